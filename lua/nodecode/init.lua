-- nodecode: an LLM coding agent whose context is an editable file.
-- setup() only merges and validates options (defaults: lua/nodecode/config.lua);
-- commands and the remote host are set up by plugin/nodecode.lua.

local M = {}

--- Merge `opts` over the defaults and validate them (unknown keys are warned).
---@param opts? table see require('nodecode.config').defaults
function M.setup(opts)
  require('nodecode.config').apply(opts)
end

--- A short statusline string, fill and budget: `ctx 41k/196k 21%` (empty
--- until the host has run). Cached: refreshed after each turn and change,
--- so calling it from 'statusline' never blocks.
---@return string
function M.status()
  return require('nodecode.ui.status').line()
end

--- Undo what loading nodecode did, for a plugin manager's reload (lazy.nvim
--- calls it on :Lazy reload nodecode): the host and its turns stop, its
--- autocommands go; the next load (plugin/nodecode.lua, setup) starts clean.
function M.deactivate()
  require('nodecode.teardown').run()
end

return M
