-- nodecode: an LLM coding agent whose context is an editable file.
-- setup() only merges and validates options (defaults: lua/nodecode/config.lua);
-- commands and the remote host are set up by plugin/nodecode.lua.

local M = {}

--- Merge `opts` over the defaults and validate them (unknown keys are warned).
---@param opts? table see require('nodecode.config').defaults
function M.setup(opts)
  require('nodecode.config').apply(opts)
end

--- A short statusline string: while a turn runs its progress, the model
--- chosen with :NodecodeModel, then fill and budget:
--- `⠋ streaming · 2.1s · anthropic/claude-opus-4-1 · ctx 41k/196k 21%` (just
--- `ctx 41k/196k 21%` usually; empty until the host has run). Cached:
--- refreshed after each turn and change, so calling it from 'statusline'
--- never blocks.
---@return string
function M.status()
  local parts = {
    require('nodecode.ui.progress').statusline(),
    require('nodecode.model').statusline(),
    require('nodecode.ui.status').line(),
  }
  return table.concat(
    vim.tbl_filter(function(p)
      return p ~= ''
    end, parts),
    ' · '
  )
end

--- Undo what loading nodecode did, for a plugin manager's reload (lazy.nvim
--- calls it on :Lazy reload nodecode): the host and its turns stop, its
--- autocommands go; the next load (plugin/nodecode.lua, setup) starts clean.
function M.deactivate()
  require('nodecode.teardown').run()
end

return M
