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
local T = {}
T.__index = T

local ns = vim.api.nvim_create_namespace('nodecode_transcript')
local ns_cost = vim.api.nvim_create_namespace('nodecode_cost')

--- A transcript writing into `buf` (which it keeps 'nomodifiable' between writes).
---@param buf integer
---@return nodecode.Transcript
function T.new(buf)
  vim.bo[buf].modifiable = false
  return setmetatable({ buf = buf, folds = {}, need_header = false, after_block = false }, T)
end

-- Writing ---------------------------------------------------------------

---@return integer rows, string last
function T:tail()
  local n = vim.api.nvim_buf_line_count(self.buf)
  return n, vim.api.nvim_buf_get_lines(self.buf, n - 1, n, true)[1]
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
  elseif vim.api.nvim_buf_get_lines(self.buf, n - 2, n - 1, true)[1] ~= '' then
    self:write('\n')
  end
end

function T:reply_header()
  if self.need_header then
    self:paragraph()
    local row = vim.api.nvim_buf_line_count(self.buf) - 1
    self:write('## nodecode\n')
    self.need_header = false
    self.header = vim.api.nvim_buf_set_extmark(self.buf, ns_cost, row, 0, {})
    self:draw_spent()
  end
end

--- `$0.0123` under a dollar, `$4.56` from one on (as the host writes money).
---@param x number
---@return string
local function money(x)
  return x >= 1 and ('$%.2f'):format(x) or ('$%.4f'):format(x)
end

---@param n integer
---@return string
local function thousands(n)
  local s = tostring(math.floor(n))
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end

--- What the turn's requests cost so far, beside its reply's header: money when
--- the model has a price, else its tokens only.
---@return string?
function T:spent_text()
  local s = self.spent
  if not s then
    return nil
  end
  local n = ('%d request%s'):format(s.requests, s.requests == 1 and '' or 's')
  if s.priced == 0 then
    return ('%s in · %s out · %s'):format(thousands(s.input), thousands(s.output), n)
  end
  local unpriced = s.requests - s.priced
  return money(s.dollars)
    .. ' · '
    .. n
    .. (unpriced > 0 and (' (%d without a price)'):format(unpriced) or '')
end

function T:draw_spent()
  local text = self:spent_text()
  if not (self.header and text) then
    return
  end
  local row = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns_cost, self.header, {})[1]
  if row then
    vim.api.nvim_buf_set_extmark(self.buf, ns_cost, row, 0, {
      id = self.header,
      virt_text = { { '  ' .. text, 'NodecodeTokens' } },
      virt_text_pos = 'eol',
    })
  end
end

--- A request of the running turn ended ({cost?, usage {prompt, output}}).
---@param ev table
function T:request_done(ev)
  local s = self.spent or { dollars = 0, priced = 0, requests = 0, input = 0, output = 0 }
  s.requests = s.requests + 1
  if type(ev.cost) == 'number' then
    s.dollars, s.priced = s.dollars + ev.cost, s.priced + 1
  end
  local usage = type(ev.usage) == 'table' and ev.usage or {}
  s.input = s.input + (tonumber(usage.prompt) or 0)
  s.output = s.output + (tonumber(usage.output) or 0)
  self.spent = s
  self:draw_spent()
end

-- Folds -----------------------------------------------------------------

--- Fold rows [first, last] (0-based) in every window showing the buffer.
---@param first integer
---@param last integer
function T:add_fold(first, last)
  local a = vim.api.nvim_buf_set_extmark(self.buf, ns, first, 0, {})
  local b = vim.api.nvim_buf_set_extmark(self.buf, ns, last, 0, {})
  table.insert(self.folds, { a, b })
  local follow = self:followers()
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    vim.api.nvim_win_call(win, function()
      vim.cmd(('%d,%dfold'):format(first + 1, last + 1))
    end)
  end
  self:show_end(follow)
end

--- Recreate every fold in `win` (a window that just started showing the buffer).
---@param win integer
function T:refold(win)
  vim.api.nvim_win_call(win, function()
    vim.cmd('normal! zE')
    for _, pair in ipairs(self.folds) do
      local a = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, pair[1], {})
      local b = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, pair[2], {})
      if a[1] and b[1] and b[1] > a[1] then
        vim.cmd(('%d,%dfold'):format(a[1] + 1, b[1] + 1))
      end
    end
  end)
end

--- Thinking that has stopped streaming: its fence closed, the block folded.
function T:close_thinking()
  if not self.think then
    return
  end
  local row = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, self.think, {})[1]
  self.think = nil
  self:newline()
  self:write('```\n')
  if row then
    self:add_fold(row, vim.api.nvim_buf_line_count(self.buf) - 2)
  end
  self.after_block = true
end

--- A call left without its result is folded on its own.
function T:close_call()
  self:close_thinking()
  if not self.call then
    return
  end
  local row = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, self.call, {})[1]
  local n = vim.api.nvim_buf_line_count(self.buf)
  self.call = nil
  if row and n - 2 > row then
    self:add_fold(row, n - 2)
  end
end

--- Fold text: `▸ call #5  ;; what it is for  · 7 lines` (for 'foldtext').
---@return table chunks
function T.foldtext()
  local s, e = vim.v.foldstart, vim.v.foldend
  local lines = vim.api.nvim_buf_get_lines(0, s - 1, math.min(s + 1, e), false)
  local label = (lines[1] or ''):match('^```%S*%s*(.-)%s*$') or ''
  return {
    { '▸ ', 'Comment' },
    { label, 'Title' },
    { '  ' .. vim.trim(lines[2] or ''), 'Normal' },
    { ('  · %d lines'):format(e - s + 1), 'Comment' },
  }
end

-- Parts of a conversation -------------------------------------------------

---@param text string
function T:ask(text)
  self:follow_all()
  self:close_call()
  self:paragraph()
  local row = vim.api.nvim_buf_line_count(self.buf) -- (0-based) the ask's first line
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
    local row = vim.api.nvim_buf_line_count(self.buf) - 1
    self:write('```text thinking\n')
    self.think = vim.api.nvim_buf_set_extmark(self.buf, ns, row, 0, {})
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
  local row = vim.api.nvim_buf_line_count(self.buf) - 1
  self:write(('```lisp call #%d\n%s\n```\n'):format(seq, vim.trim(code)))
  self.call = vim.api.nvim_buf_set_extmark(self.buf, ns, row, 0, {})
  self.after_block = true
end

---@param seq integer
---@param text string
---@param is_error boolean
function T:result_block(seq, text, is_error)
  local start
  if self.call then
    start = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, self.call, {})[1]
    self.call = nil
  end
  self:newline()
  start = start or (vim.api.nvim_buf_line_count(self.buf) - 1)
  local label = is_error and 'error' or 'result'
  self:write(('```text %s #%d\n%s\n```\n'):format(label, seq, (text:gsub('\n+$', ''))))
  self:add_fold(start, vim.api.nvim_buf_line_count(self.buf) - 2)
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
