-- :NodecodeStatus (the /context report in a float) and the statusline text
-- behind require('nodecode').status(): fill and budget, cached here per tab
-- (each tab's chat has its own session) and refreshed after each turn and
-- each change; reading it never calls the host.

local M = {}

local api = vim.api

---@type table<integer, string> by tabpage
local cached = {}
---@type table<integer, boolean> tabs whose refresh is scheduled
local scheduled = {}
-- Refreshed only once a statusline has asked: without one, no turn pays for
-- a status report it would never show.
local wanted = false

---@param v any
---@return number?
local function number(v)
  if type(v) == 'number' then
    return v
  end
  if type(v) == 'table' then -- {tokens = N, …}
    return number(v.tokens or v.value)
  end
  return nil
end

--- The first of `keys` that holds a number, in the report or its `fields`.
---@param r table
---@return number?
local function field(r, ...)
  local places = { r, type(r.fields) == 'table' and r.fields or {} }
  for _, key in ipairs({ ... }) do
    for _, t in ipairs(places) do
      local n = number(t[key])
      if n then
        return n
      end
    end
  end
end

---@param n number
---@return string
local function short(n)
  if n >= 1e6 then
    return ('%.1fM'):format(n / 1e6)
  elseif n >= 1e4 then
    return ('%dk'):format(math.floor(n / 1e3 + 0.5))
  elseif n >= 1e3 then
    return ('%.1fk'):format(n / 1e3)
  end
  return tostring(math.floor(n))
end

--- The statusline text of a status report: `ctx 41k/196k 21%`, or `ctx 41k`
--- when no window is known; then what the session cost, when its model has a
--- price (`ctx 41k/196k 21% · $0.0443`).
---@param r table
---@return string
function M.format(r)
  if type(r) ~= 'table' then
    return ''
  end
  local fill = field(r, 'fill', 'fill_tokens', 'tokens')
  if not fill then
    return ''
  end
  local spent = type(r.spent) == 'string' and (' · ' .. r.spent) or ''
  local budget = field(r, 'budget', 'budget_tokens')
  if budget and budget > 0 then
    return ('ctx %s/%s %d%%'):format(
      short(fill),
      short(budget),
      math.floor(100 * fill / budget + 0.5)
    ) .. spent
  end
  return 'ctx ' .. short(fill) .. spent
end

--- The cached statusline text of this tab's session (never blocks, never
--- starts the host).
---@return string
function M.line()
  if not wanted then
    wanted = true
    M.refresh()
  end
  return cached[require('nodecode.rpc').tab()] or ''
end

--- Refresh the cached text of tabpage `tab` (the current one) soon, outside
--- whatever is running now; only when the host already runs.
---@param tab? integer
function M.refresh(tab)
  tab = tab or require('nodecode.rpc').tab()
  if scheduled[tab] or not wanted then
    return
  end
  scheduled[tab] = true
  vim.schedule(function()
    scheduled[tab] = nil
    local rpc = require('nodecode.rpc')
    if not rpc.ready() or not api.nvim_tabpage_is_valid(tab) then
      return -- not started, or starting: it refreshes when the host answers
    end
    -- (A tab of no chat whose session another tab has is refused: it shows nothing.)
    local ok, r = pcall(rpc.within, tab, rpc.call, 'status')
    if ok then
      cached[tab] = M.format(r)
      pcall(vim.cmd, 'redrawstatus!')
    end
  end)
end

--- Forget tabpage `tab`'s text (the tab was closed).
---@param tab integer
function M.forget(tab)
  cached[tab] = nil
end

--- Host events: a finished turn refreshes its tab's statusline.
---@param ev table
function M.on_event(ev)
  if ev.kind == 'done' then
    M.refresh(require('nodecode.ui.chat').tab_of(ev.job))
  end
end

--- The report's lines, whatever shape the host gave.
---@param r any
---@return string[]
local function report_lines(r)
  local lines = require('nodecode.actions').lines(r)
  if #lines == 0 then
    lines = vim.split(vim.inspect(r), '\n', { plain = true })
  end
  return lines
end

--- The screen rows `line` takes in a window `width` wide wrapping at words
--- (continuation rows indented by 2, as breakindentopt shift:2 does).
---@param line string
---@param width integer
---@return integer
function M.wrapped_rows(line, width)
  local rows, col = 1, 0
  for word in line:gmatch('%S+%s*') do
    local w = vim.fn.strdisplaywidth(word)
    if col > 0 and col + vim.fn.strdisplaywidth(vim.trim(word)) > width then
      rows, col = rows + 1, 2
    end
    col = col + w
    while col > width do -- a word longer than the row
      rows, col = rows + 1, 2 + (col - width)
    end
  end
  return rows
end

--- :NodecodeStatus — the /context report in a float; q or <Esc> closes it.
---@return integer win
function M.open()
  local r = require('nodecode.rpc').call('status')
  cached[require('nodecode.rpc').tab()] = M.format(r)
  local lines = report_lines(r)
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width + 2, vim.o.columns - 4)
  -- A line wider than the screen wraps at a word (linebreak), in rows counted
  -- here so the float shows them all.
  local rows = 0
  for _, l in ipairs(lines) do
    rows = rows + M.wrapped_rows(l, width)
  end
  local height = math.max(1, math.min(rows, vim.o.lines - 6))
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable, vim.bo[buf].bufhidden = false, 'wipe'
  vim.bo[buf].filetype = 'nodecode-status'
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    style = 'minimal',
    border = 'rounded',
    title = ' nodecode /context ',
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
  })
  vim.wo[win][0].wrap, vim.wo[win][0].linebreak = true, true
  vim.wo[win][0].breakindent, vim.wo[win][0].breakindentopt = true, 'shift:2'
  for _, lhs in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', lhs, function()
      pcall(api.nvim_win_close, win, true)
    end, { buffer = buf, nowait = true, desc = 'nodecode: close the report' })
  end
  api.nvim_create_autocmd('WinLeave', {
    buffer = buf,
    once = true,
    callback = function()
      pcall(api.nvim_win_close, win, true)
    end,
  })
  return win
end

return M
