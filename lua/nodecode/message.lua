-- The one way nodecode talks to the person: prefixed, titled, and safe to
-- call from any context (fast events, RPC callbacks): each is scheduled.

local M = {}

local TITLE = 'nodecode'

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
      vim.notify(text, level, { title = TITLE })
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
