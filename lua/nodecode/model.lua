-- :NodecodeModel [PROVIDER/MODEL]: the model of this Neovim's next request,
-- named or picked (the configured providers' models: config.jsonc's and
-- models.dev's). The host logs the switch; the window, the budget and the
-- statusline follow.

local M = {}

---@type string? PROVIDER/MODEL chosen in this Neovim
local chosen = nil

local function rpc()
  return require('nodecode.rpc')
end

--- The statusline part: the chosen model ('' until one is chosen).
---@return string
function M.statusline()
  return chosen or ''
end

---@param n any
---@return string
local function tokens(n)
  if type(n) ~= 'number' then
    return 'window unknown'
  end
  -- Rounded only where rounding loses little: 1570 is not "2k".
  return n >= 1e6 and ('%.1fM window'):format(n / 1e6)
    or n >= 1e4 and ('%dk window'):format(math.floor(n / 1e3 + 0.5))
    or ('%d-token window'):format(n)
end

--- Work with `name` (PROVIDER/MODEL) from the next request on.
---@param name string
function M.use(name)
  local r = rpc().call('use_model', name)
  chosen = ('%s/%s'):format(r.provider, r.model)
  require('nodecode.message').info('%s', table.concat(require('nodecode.actions').lines(r), '\n'))
  local status = require('nodecode.ui.status')
  status.refresh() -- the window and the budget follow the model
  pcall(vim.cmd, 'redrawstatus')
end

--- One picker row: `* anthropic/claude-sonnet-4-5   200k window · models.dev`.
---@param r table
---@return string
function M.row(r)
  return ('%s %s  %s · %s'):format(r.current and '*' or ' ', r.name, tokens(r.window), r.source)
end

--- Pick a model of the configured providers.
---@return table? the built-in picker's state
function M.pick()
  local rows = rpc().call('models')
  local guard = require('nodecode.actions').guard
  local key = require('nodecode.config').get().keymaps.picker.open
  return require('nodecode.ui.picker').pick({
    title = 'model of the next request',
    items = rows,
    text = M.row,
    preview = function(r)
      return {
        'provider  ' .. r.provider,
        'model     ' .. r.model,
        'window    ' .. tokens(r.window),
        'from      ' .. r.source,
        '',
        r.current and 'the model in use now' or 'used from the next request',
      }
    end,
    actions = { { name = 'use', key = key, fn = guard(function(r)
      M.use(r.name)
    end) } },
  })
end

--- :NodecodeModel [PROVIDER/MODEL]
---@param arg string
function M.command(arg)
  arg = vim.trim(arg or '')
  if arg ~= '' then
    return M.use(arg)
  end
  return M.pick()
end

--- Completion: the names the picker lists.
---@param lead string
---@return string[]
function M.complete(lead)
  local ok, rows = pcall(rpc().call, 'models')
  local out = {}
  for _, r in ipairs(ok and rows or {}) do
    if vim.startswith(r.name, lead) then
      out[#out + 1] = r.name
    end
  end
  return out
end

return M
