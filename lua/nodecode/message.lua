-- The one way nodecode talks to the person: prefixed, titled, and safe to
-- call from any context (fast events, RPC callbacks): each is scheduled.
--
-- Nothing it shows stops Neovim at "Press ENTER": a message that fits the
-- command line is a plain notification; a longer or multi-line one (a
-- receipt, :NodecodeBudget) is its first line, cut to fit, plus the whole
-- text in a float, as tall as its wrapped lines, that does not take the
-- cursor and closes at the next key. :messages keeps the whole text: each
-- line goes in as an :echomsg, which Neovim cuts on screen ('shortmess' "T")
-- but keeps whole in the history. A vim.notify replaced by a plugin
-- (nvim-notify, noice…) gets the whole text: those show any length without
-- blocking.

local M = {}

local api = vim.api
local TITLE = 'nodecode'
local ns = api.nvim_create_namespace('nodecode_message')

---@type integer? the float showing the last long message
local shown

local function close()
  vim.on_key(nil, ns)
  if shown and api.nvim_win_is_valid(shown) then
    api.nvim_win_close(shown, true)
  end
  shown = nil
end

--- Is vim.notify Neovim's own (which echoes, and so can block)?
---@return boolean
local function builtin_notify()
  local info = debug.getinfo(vim.notify, 'S')
  return info ~= nil and info.source:find('vim/_editor.lua', 1, true) ~= nil
end

---@param lines string[]
---@param level integer
local function open_float(lines, level)
  close()
  local width = 10
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width, vim.o.columns - 4)
  local rows = 0 -- the rows its lines take once wrapped at `width`
  for _, l in ipairs(lines) do
    rows = rows + math.max(1, math.ceil(vim.fn.strdisplaywidth(l) / width))
  end
  local room = vim.o.lines - vim.o.cmdheight - 4 -- below the top line, inside its border
  local height = math.max(1, math.min(rows, room))
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].bufhidden, vim.bo[buf].modifiable = 'wipe', false
  shown = api.nvim_open_win(buf, false, {
    relative = 'editor',
    anchor = 'SE',
    row = vim.o.lines - vim.o.cmdheight - 1,
    col = vim.o.columns,
    width = width,
    height = height,
    style = 'minimal',
    border = 'rounded',
    title = ' ' .. TITLE .. ' ',
    focusable = false,
    noautocmd = true,
    zindex = 150,
  })
  vim.wo[shown].wrap = true
  if level >= vim.log.levels.WARN then
    vim.wo[shown].winhighlight = 'FloatBorder:'
      .. (level >= vim.log.levels.ERROR and 'ErrorMsg' or 'WarningMsg')
  end
  -- The next key the person types closes it (after it ran). Keys a `:normal`
  -- runs (the chat scrolling itself after a change) reach on_key too, with
  -- nothing typed: they must not close what was just shown.
  vim.on_key(function(_, typed)
    if typed ~= nil and typed ~= '' then
      vim.schedule(close)
    end
  end, ns)
end

---@type table<integer, string>
local HL = {
  [vim.log.levels.WARN] = 'WarningMsg',
  [vim.log.levels.ERROR] = 'ErrorMsg',
}

--- Put `lines` whole into :messages without a "Press ENTER": an :echomsg
--- from a scheduled callback is cut on screen when 'shortmess' has "T" and
--- kept whole in the history (each line is its own message: an :echomsg
--- shows a newline as "^@").
---@param lines string[]
---@param level integer
local function remember(lines, level)
  local shortmess = vim.o.shortmess
  vim.o.shortmess = shortmess .. 'T'
  vim.cmd.echohl(HL[level] or 'None')
  for _, l in ipairs(lines) do
    vim.cmd.echomsg(vim.fn.string(l))
  end
  vim.cmd.echohl('None')
  vim.o.shortmess = shortmess
end

--- Show `text` (already prefixed) without ever asking for ENTER.
---@param text string
---@param level integer
function M.show(text, level)
  if not builtin_notify() then
    return vim.notify(text, level, { title = TITLE })
  end
  local lines = vim.split(text, '\n', { plain = true })
  local room = math.max(20, vim.v.echospace - 1)
  if #lines == 1 and vim.fn.strdisplaywidth(text) <= room then
    return vim.notify(text, level, { title = TITLE })
  end
  local first = lines[1]
  if #lines > 1 or vim.fn.strdisplaywidth(first) > room then
    first = vim.fn.strcharpart(first, 0, room - 2) .. ' …'
    while vim.fn.strdisplaywidth(first) > room do -- wide characters
      first = vim.fn.strcharpart(first, 0, vim.fn.strchars(first) - 3) .. ' …'
    end
  end
  remember(lines, level)
  api.nvim_echo({ { first, HL[level] } }, false, {})
  open_float(lines, level)
end

-- Messages queued and not yet shown: one failure met twice in one command
-- (the chat's history and the ask both find no host) is shown once, so it
-- needs no hit-enter prompt.
---@type table<string, boolean>
local pending = {}

---@param level integer
---@return fun(fmt: string, ...: any)
local function notifier(level)
  return function(fmt, ...)
    local text = 'nodecode: ' .. (select('#', ...) > 0 and fmt:format(...) or fmt)
    local key = level .. text
    if pending[key] then
      return
    end
    pending[key] = true
    vim.schedule(function()
      pending[key] = nil
      M.show(text, level)
    end)
  end
end

M.info = notifier(vim.log.levels.INFO)
M.warn = notifier(vim.log.levels.WARN)
M.error = notifier(vim.log.levels.ERROR)

--- The text of an error caught by pcall, without the `nodecode: ` it may carry.
---@param err any
---@return string
function M.reason(err)
  return (tostring(err):gsub('^nodecode: ', ''))
end

--- An error caught by pcall, as one error message (prefixed once).
---@param err any
function M.caught(err)
  M.error('%s', M.reason(err))
end

return M
