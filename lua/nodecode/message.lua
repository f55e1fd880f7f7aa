-- The one way nodecode talks to the person: prefixed, titled, and safe to
-- call from any context (fast events, RPC callbacks): each is scheduled.

local M = {}

local TITLE = 'nodecode'

---@param level integer
---@return fun(fmt: string, ...: any)
local function notifier(level)
  return vim.schedule_wrap(function(fmt, ...)
    local text = select('#', ...) > 0 and fmt:format(...) or fmt
    vim.notify('nodecode: ' .. text, level, { title = TITLE })
  end)
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
