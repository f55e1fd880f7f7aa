-- The context buffer's view: its blocks (scanned from the header lines),
-- one manual fold per block with the fold text `ID ROLE · N tokens · first
-- line`, token counts drawn on headers, and the cached-prefix line.

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('nodecode_context')
local ns_tokens = api.nvim_create_namespace('nodecode_context_tokens')

---@param buf integer
---@return nodecode.ContextState?
local function state(buf)
  return require('nodecode.ui.context').state(buf)
end

--- The blocks of the buffer as it stands: every header with this export's nonce.
---@param buf integer
---@param st nodecode.ContextState
---@return nodecode.Block[]
function M.scan(buf, st)
  local pat = '^%[%[m:' .. st.nonce .. ' (%d+) (%l+)%]%]$'
  local out = {}
  for i, line in ipairs(api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if line:sub(1, 4) == '[[m:' then
      local id, role = line:match(pat)
      if id then
        out[#out + 1] = { id = tonumber(id), role = role, line = i }
      end
    end
  end
  return out
end

--- The token count shown on the header at `row` (0-based), if it is one.
---@param buf integer
---@param row integer
---@return string?
function M.token_text(buf, row)
  local st = state(buf)
  local line = st and api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
  if not line or line:sub(1, 4) ~= '[[m:' then
    return nil
  end
  local id = line:match(st.header)
  local n = id and st.tokens[tonumber(id)]
  return n and ('%d tok'):format(n) or nil
end

-- Token counts are drawn as each header line is (ephemeral marks): opening a
-- 20,000-line buffer sets none, and edits never leave one on the wrong line.
-- A closed fold shows the count in its fold text: drawn there only, so it is
-- neither shown twice nor drawn over a long first line.
---@param win integer
---@param row integer 0-based
local function folded(win, row)
  return api.nvim_win_call(win, function()
    return vim.fn.foldclosed(row + 1)
  end) ~= -1
end

api.nvim_set_decoration_provider(ns_tokens, {
  on_win = function(_, _, buf)
    return state(buf) ~= nil
  end,
  on_line = function(_, win, buf, row)
    local text = M.token_text(buf, row)
    if text and not folded(win, row) then
      api.nvim_buf_set_extmark(buf, ns_tokens, row, 0, {
        ephemeral = true,
        virt_text = { { text, 'NodecodeTokens' } },
        virt_text_pos = 'right_align',
      })
    end
  end,
})

---@param n integer
---@return string
local function tokens_word(n)
  return ('%d token%s'):format(n, n == 1 and '' or 's')
end

--- Where the prefix the next request can read from cache ends: the last block
--- the host found cached, at or before `cache.through`, above the first row
--- changed since (nil: none of the blocks, at most the system prompt).
---@param buf integer
---@param st nodecode.ContextState
---@return integer? k index into st.blocks
function M.cached_block(buf, st)
  local c, n, mark = st.cache or {}, api.nvim_buf_line_count(buf), nil
  if c.through == nil then
    return nil
  end
  for k, b in ipairs(st.blocks) do
    local nxt = st.blocks[k + 1]
    local last_row = nxt and nxt.line - 2 or n - 1
    if st.changed_from and last_row >= st.changed_from then
      break
    end
    if st.cached[b.id] or b.id == c.through then
      mark = k
    end
    if b.id == c.through then
      break
    end
  end
  return mark
end

--- The text of the cached-prefix line (the figures :NodecodeStatus shows).
---@param st nodecode.ContextState
---@param k? integer the block it follows (nil: the system prompt and tools)
---@return string
function M.cached_text(st, k)
  local c = st.cache or {}
  local what
  if k then
    local id = st.blocks[k].id
    what = ('cached through %d · %s'):format(id, tokens_word(st.prefix[id] or c.tokens or 0))
  else
    what = 'cached through the system prompt and tools · ' .. tokens_word(c.fixed or 0)
  end
  local last = c.last
  if last then
    what = what .. (' · the last request read %d of %d'):format(last.read or 0, last.prompt or 0)
    if last.why then -- it read short of what the mark promised: by how much, and why
      what = what .. (' · missed %s: %s'):format(tostring(last.missed or '?'), last.why)
    end
  end
  return ('──── %s ────'):format(what)
end

--- The cached-prefix line: a virtual line where the cached prefix ends.
---@param buf integer
---@param st nodecode.ContextState
function M.decorate(buf, st)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local c = st.cache or {}
  local k = M.cached_block(buf, st)
  if not k and not c.system then
    return
  end
  local nxt = st.blocks[(k or 0) + 1]
  local row = nxt and nxt.line - 1 or api.nvim_buf_line_count(buf) - 1
  api.nvim_buf_set_extmark(buf, ns, row, 0, {
    virt_lines = { { { M.cached_text(st, k), 'NodecodeCached' } } },
    virt_lines_above = nxt ~= nil,
  })
end

-- Folds are made at once for the blocks around the cursor, and for the rest
-- in slices of SLICE blocks, one slice per turn of the event loop: 10,000
-- blocks' folds, made at once, kept Neovim from answering for 200 ms.
local SLICE = 400

---@type table<integer, integer> window → the fold() whose slices it takes
local folding = {}
---@type table<integer, boolean> windows with slices still to fold
local unfinished = {}

--- The fold commands for blocks first..last (indices into st.blocks).
---@param st nodecode.ContextState
---@param n integer lines in the buffer
---@param first integer
---@param last integer
---@param closed? table<integer, boolean>
---@return string[]
local function fold_commands(st, n, first, last, closed)
  local newest = #st.blocks - require('nodecode.config').get().context.open_newest
  local cmds = {}
  for k = first, last do
    local b = st.blocks[k]
    local stop = st.blocks[k + 1] and st.blocks[k + 1].line - 1 or n
    if stop > b.line then
      cmds[#cmds + 1] = ('%d,%dfold'):format(b.line, stop)
      local shut = closed and closed[b.id]
      if shut == false or (shut == nil and k > newest) then
        cmds[#cmds + 1] = ('%dfoldopen'):format(b.line)
      end
    end
  end
  return cmds
end

--- The index of the block holding line `lnum` (1-based), 1 if none.
---@param blocks nodecode.Block[]
---@param lnum integer
---@return integer
local function block_at(blocks, lnum)
  local lo, hi = 1, #blocks
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if blocks[mid].line <= lnum then
      lo = mid
    else
      hi = mid - 1
    end
  end
  return math.max(lo, 1)
end

--- One closed fold per block in `win`, the newest few open; blocks whose
--- fold state is in `closed` (by id) keep it. Those around the cursor are
--- folded before this returns, the others soon after (above them first).
---@param win integer
---@param buf integer
---@param st nodecode.ContextState
---@param closed? table<integer, boolean>
function M.fold(win, buf, st, closed)
  local wo = vim.wo[win][0]
  wo.foldmethod, wo.foldenable, wo.foldlevel = 'manual', true, 0
  wo.foldtext = "v:lua.require'nodecode.ui.context.view'.foldtext()"
  wo.fillchars = 'fold: '
  local n, blocks = api.nvim_buf_line_count(buf), st.blocks
  local here = block_at(blocks, api.nvim_win_get_cursor(win)[1])
  local reach = api.nvim_win_get_height(win) + 2
  local from, to = math.max(here - reach, 1), math.min(here + reach, #blocks)
  local generation = (folding[win] or 0) + 1
  folding[win] = generation
  local cmds = vim.list_extend({ 'normal! zE' }, fold_commands(st, n, from, to, closed))
  api.nvim_win_call(win, function()
    vim.cmd(table.concat(cmds, '\n'))
  end)
  local slices = {} -- the rest: above the cursor's blocks, then below them
  for first = 1, from - 1, SLICE do
    slices[#slices + 1] = { first, math.min(first + SLICE - 1, from - 1) }
  end
  for first = to + 1, #blocks, SLICE do
    slices[#slices + 1] = { first, math.min(first + SLICE - 1, #blocks) }
  end
  local function next_slice(i)
    local slice = slices[i]
    if folding[win] ~= generation then
      return -- a later fold() of this window took over
    end
    if
      not slice
      or not api.nvim_win_is_valid(win)
      or api.nvim_win_get_buf(win) ~= buf
      or api.nvim_buf_line_count(buf) ~= n
    then
      unfinished[win] = nil -- done; or another buffer, or edited since (a refresh follows)
      return
    end
    local part = fold_commands(st, n, slice[1], slice[2], closed)
    api.nvim_win_call(win, function()
      local view = vim.fn.winsaveview()
      vim.cmd(table.concat(part, '\n'))
      vim.fn.winrestview(view)
    end)
    vim.schedule(function()
      next_slice(i + 1)
    end)
  end
  unfinished[win] = #slices > 0 or nil
  if #slices > 0 then
    vim.schedule(function()
      next_slice(1)
    end)
  end
end

--- Are the folds of `win` all made? (Tests look.)
---@param win integer
---@return boolean
function M.folded(win)
  return not unfinished[win]
end

--- Which blocks are folded shut in `win`, by id.
---@param win integer
---@param st nodecode.ContextState
---@return table<integer, boolean>
function M.closed_in(win, st)
  local out = {}
  api.nvim_win_call(win, function()
    for _, b in ipairs(st.blocks) do
      if vim.fn.foldlevel(b.line) > 0 then -- (a fold not made yet keeps the default)
        out[b.id] = vim.fn.foldclosed(b.line) ~= -1
      end
    end
  end)
  return out
end

--- Rescan after edits: folds (keeping what was open or shut) and marks.
---@param buf integer
function M.refresh(buf)
  local st = state(buf)
  if not st then
    return
  end
  local before = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    before[win] = M.closed_in(win, st)
  end
  st.blocks = M.scan(buf, st)
  for win, closed in pairs(before) do
    M.fold(win, buf, st, closed)
  end
  M.decorate(buf, st)
end

--- 'foldtext': `ID ROLE · N tokens · first line`.
---@return table chunks
function M.foldtext()
  local s, e = vim.v.foldstart, vim.v.foldend
  local lines = api.nvim_buf_get_lines(0, s - 1, math.min(e, s + 5), false)
  local st = state(api.nvim_get_current_buf())
  local id, role = lines[1]:match('^%[%[m:%w+ (%d+) (%l+)%]%]$')
  local head = id and (id .. ' ' .. role) or lines[1]
  local chunks = { { head, 'NodecodeHeader' } }
  local n = st and id and st.tokens[tonumber(id)]
  if n then
    chunks[#chunks + 1] = { (' · %d token%s'):format(n, n == 1 and '' or 's'), 'NodecodeTokens' }
  end
  for i = 2, #lines do
    local text = vim.trim(lines[i])
    if text ~= '' then
      chunks[#chunks + 1] = { ' · ' .. text, 'Normal' }
      break
    end
  end
  return chunks
end

return M
