-- Writing a conversation into a buffer, as markdown that only ever grows at
-- its end:
--
--   ## you / the ask / ## nodecode / the reply as it streams, each tool call a
--   ```lisp call #SEQ block followed by its ```text result #SEQ block, the two
--   folded together, and the model's thinking a ```text thinking block folded
--   under its first line (manual folds, remembered as extmarks so every window
--   showing the buffer can get them back); `_marker_` lines where a turn
--   failed, stopped, was undone or evicted.
--
-- Windows follow new text (their cursor goes to the end) unless the person
-- moved away from the end on purpose: the chat sets w:nodecode_away from
-- CursorMoved; a new ask makes every window follow again.
--
-- A long history is not written into the buffer piece by piece: T.lines()
-- writes it the same way into a list of lines, and T:prepend puts that list
-- above the buffer's text in one change (the chat loads the newest part
-- first, then each older part above it).
--
-- Parts live beside this file: transcript_lines.lua (the list writer L),
-- transcript_cost.lua (the cost beside a reply's header), transcript_folds.lua
-- (folds, T:prepend, T.foldtext).

---@class nodecode.Spent
---@field dollars number
---@field priced integer requests with a price
---@field requests integer
---@field input integer prompt tokens
---@field output integer

---@class nodecode.Transcript
---@field buf integer
---@field folds { [1]: integer, [2]: integer }[] extmark pairs: first and last row of each fold
---@field call? integer extmark on the fence of a call still waiting for its result
---@field think? integer extmark on the fence of thinking still streaming
---@field need_header boolean the next reply text needs a `## nodecode` header
---@field after_block boolean the last thing written was a block: text starts a paragraph
---@field header? integer extmark on the running turn's `## nodecode` line
---@field spent? nodecode.Spent what the running turn's requests cost so far
---@field rows? string[] (T.lines) the lines written, instead of a buffer
---@field costs? table<integer, string> (T.lines) each reply header's cost, by row
local T = {}
T.__index = T

--- A transcript written into a list of lines (`rows`), for T:prepend: the
--- same methods, with rows in place of extmarks and no windows to follow
--- (ui/transcript_lines.lua).
local L = require('nodecode.ui.transcript_lines').class(T)
require('nodecode.ui.transcript_cost').install(T, L) -- the running turn's cost
require('nodecode.ui.transcript_folds').install(T) -- folds, T:prepend, T.foldtext

local ns = vim.api.nvim_create_namespace('nodecode_transcript')

--- A transcript writing into `buf` (which it keeps 'nomodifiable' between writes).
---@param buf integer
---@return nodecode.Transcript
function T.new(buf)
  vim.bo[buf].modifiable = false
  return setmetatable({ buf = buf, folds = {}, need_header = false, after_block = false }, T)
end

--- A transcript written into a list of lines, for T:prepend.
---@return nodecode.Transcript
function T.lines()
  return setmetatable({ rows = { '' }, folds = {}, need_header = false, after_block = false }, L)
end

-- Where the writing goes: the buffer (T; the list of lines: L) -------------

---@return integer
function T:count()
  return vim.api.nvim_buf_line_count(self.buf)
end

---@param row integer 0-based
---@return string
function T:line(row)
  return vim.api.nvim_buf_get_lines(self.buf, row, row + 1, true)[1]
end

--- Something to find row `row` (0-based) by later, wherever text moved it.
---@param row integer
---@return integer
function T:anchor(row)
  return vim.api.nvim_buf_set_extmark(self.buf, ns, row, 0, {})
end

---@param anchor integer
---@return integer? row
function T:row(anchor)
  return vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, anchor, {})[1]
end

-- Writing ---------------------------------------------------------------

---@return integer rows, string last
function T:tail()
  local n = self:count()
  return n, self:line(n - 1)
end

--- Windows whose view follows new text: every one showing the buffer but
--- those the person moved away from the end in (w:nodecode_away).
---@return integer[]
function T:followers()
  return vim.tbl_filter(function(win)
    return vim.w[win].nodecode_away ~= true
  end, vim.fn.win_findbuf(self.buf))
end

--- Every window follows again (a new ask: the person wants to see it).
function T:follow_all()
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    vim.w[win].nodecode_away = false
  end
end

--- Put the end of the buffer at the bottom of each following window (after a
--- fold closed over what was on screen: the view is not left inside it).
---@param wins integer[]
function T:show_end(wins)
  local rows = vim.api.nvim_buf_line_count(self.buf)
  for _, win in ipairs(wins) do
    vim.api.nvim_win_call(win, function()
      vim.api.nvim_win_set_cursor(win, { rows, 0 })
      vim.cmd('normal! zb')
    end)
  end
end

--- Append `text` (newlines allowed) at the very end.
---@param text string
function T:write(text)
  if text == '' then
    return
  end
  local follow = self:followers()
  local n, last = self:tail()
  vim.bo[self.buf].modifiable = true
  vim.api.nvim_buf_set_text(
    self.buf,
    n - 1,
    #last,
    n - 1,
    #last,
    vim.split(text, '\n', { plain = true })
  )
  vim.bo[self.buf].modifiable = false
  local rows = vim.api.nvim_buf_line_count(self.buf)
  for _, win in ipairs(follow) do
    vim.api.nvim_win_set_cursor(win, { rows, 0 })
  end
end

--- End the current line, if it has text.
function T:newline()
  local _, last = self:tail()
  if last ~= '' then
    self:write('\n')
  end
end

--- Leave a blank line after whatever is there (nothing in an empty buffer).
function T:paragraph()
  local n, last = self:tail()
  if n == 1 and last == '' then
    return
  end
  if last ~= '' then
    self:write('\n\n')
  elseif self:line(n - 2) ~= '' then
    self:write('\n')
  end
end

function T:reply_header()
  if self.need_header then
    self:paragraph()
    local row = self:count() - 1
    self:write('## nodecode\n')
    self.need_header = false
    self.header = self:cost_mark(row)
    self:draw_spent()
  end
end

--- Thinking that has stopped streaming: its fence closed, the block folded.
function T:close_thinking()
  if not self.think then
    return
  end
  local row = self:row(self.think)
  self.think = nil
  self:newline()
  self:write('```\n')
  if row then
    self:add_fold(row, self:count() - 2)
  end
  self.after_block = true
end

--- A call left without its result is folded on its own.
function T:close_call()
  self:close_thinking()
  if not self.call then
    return
  end
  local row = self:row(self.call)
  local n = self:count()
  self.call = nil
  if row and n - 2 > row then
    self:add_fold(row, n - 2)
  end
end

-- Parts of a conversation -------------------------------------------------

---@param text string
function T:ask(text)
  self:follow_all()
  self:close_call()
  self:paragraph()
  local row = self:count() -- (0-based) the ask's first line
  self.header, self.spent = nil, nil -- a new turn: its cost starts at nothing
  self:write('## you\n' .. vim.trim(text) .. '\n')
  for _, b in ipairs(require('nodecode.ask').blocks(vim.trim(text))) do
    self:add_fold(row + b[1], row + b[2]) -- a selection, #buffer or #file: folded
  end
  self.need_header = true
  self.after_block = false
end

--- The model's thinking as it streams, inside a ```text thinking block.
---@param text string
function T:thinking(text)
  self:reply_header()
  if not self.think then
    self:close_call()
    self:paragraph()
    local row = self:count() - 1
    self:write('```text thinking\n')
    self.think = self:anchor(row)
  end
  self:write(text)
end

---@param text string
function T:text(text)
  self:close_thinking()
  self:reply_header()
  if self.after_block then
    self:close_call()
    self:paragraph()
    self.after_block = false
  end
  self:write(text)
end

---@param seq integer
---@param code string
function T:call_block(seq, code)
  self:close_call()
  self:reply_header()
  self:paragraph()
  local row = self:count() - 1
  self:write(('```lisp call #%d\n%s\n```\n'):format(seq, vim.trim(code)))
  self.call = self:anchor(row)
  self.after_block = true
end

---@param seq integer
---@param text string
---@param is_error boolean
function T:result_block(seq, text, is_error)
  local start
  if self.call then
    start = self:row(self.call)
    self.call = nil
  end
  self:newline()
  start = start or (self:count() - 1)
  local label = is_error and 'error' or 'result'
  self:write(('```text %s #%d\n%s\n```\n'):format(label, seq, (text:gsub('\n+$', ''))))
  self:add_fold(start, self:count() - 2)
  self.after_block = true
end

--- A `> kind: text` line (notices, retries, approvals, notes, stubs).
---@param kind string
---@param text string
function T:quote(kind, text)
  self:paragraph()
  local lines = vim.split(vim.trim(text), '\n', { plain = true })
  self:write('> ' .. kind .. ': ' .. table.concat(lines, '\n> ') .. '\n')
  self.after_block = true
end

--- A line of the plugin's own, not part of the conversation.
---@param text string
function T:say(text)
  self:close_call()
  self:newline()
  self:write('> ' .. text .. '\n')
  self.after_block = true
end

-- The words of nodecode.transcript's markers (the reopened chat says the same).
local ENDED = { stopped = 'stopped', ['round-limit'] = 'stopped: round limit reached' }

--- A `_marker_` line: what happened to the turn (failed, stopped, undone, evicted…).
---@param words string
function T:mark(words)
  self:close_call()
  self:paragraph()
  self:write(('_%s_\n'):format((vim.trim(words):gsub('\n', ' '))))
  self.after_block = true
end

--- How a turn ended, unless it simply ended.
---@param status string done | stopped | failed | round-limit
---@param err? string
function T:done(status, err)
  self:close_call()
  if status ~= 'done' then
    self:mark(ENDED[status] or (status .. (err and (': ' .. err) or '')))
  end
  self.after_block = true
end

--- A whole transcript, as nodecode.host's messages() gives it.
---@param messages { seq: integer, role: string, text: string }[]
function T:history(messages)
  for _, m in ipairs(messages) do
    if m.role == 'mark' then
      self:reply_header() -- as the live chat has it: the header came with the ask
      self:mark(m.text)
    elseif m.role == 'user' then
      self:ask(m.text)
      if type(m.spent) == 'table' then -- what the turn's requests cost
        self.spent = m.spent
      end
    elseif m.role == 'assistant' then
      self:text(m.text)
      self.after_block = true
    elseif m.role == 'thinking' then
      self:thinking(m.text)
      self:close_thinking()
    elseif m.role == 'call' then
      self:call_block(m.seq, m.text)
    elseif m.role == 'tool' then
      self:result_block(m.seq, m.text, false)
    else
      self:reply_header()
      self:quote(('%s #%d'):format(m.role, m.seq), m.text)
    end
  end
  self:close_call()
end

return T
