-- Picker backends: which installed picker shows nodecode's pickers
-- (picker.backend, or with 'auto' the first usable of M.ORDER, else the
-- built-in floating picker), and why one cannot. picker.lua re-exports these.

local M = {}

local api = vim.api

---@class nodecode.PickerBackend
---@field module string the module whose pick(source, opts) shows a source
---@field what string what to install
---@field installed fun(asked: boolean): boolean asked: named by picker.backend
---@field plugin? string its plugin/ script, whose guard says the Neovim it needs

---@type table<string, nodecode.PickerBackend>
M.BACKENDS = {
  telescope = {
    module = 'nodecode.ui.telescope_picker',
    what = 'telescope.nvim',
    plugin = 'plugin/telescope.lua',
    installed = function()
      return (pcall(require, 'telescope.pickers'))
    end,
  },
  ['fzf-lua'] = {
    module = 'nodecode.ui.fzf_picker',
    what = 'fzf-lua and the fzf program',
    plugin = 'plugin/fzf-lua.lua',
    installed = function()
      return pcall(require, 'fzf-lua') and vim.fn.executable('fzf') == 1
    end,
  },
  snacks = {
    module = 'nodecode.ui.snacks_picker',
    what = 'snacks.nvim',
    plugin = 'plugin/snacks.lua',
    -- snacks.nvim is often installed for its other parts: 'auto' takes its
    -- picker only when the person enabled it (setup{ picker = { enabled = true } }).
    installed = function(asked)
      local ok, snacks = pcall(require, 'snacks')
      return ok and (asked or (snacks.config.picker or {}).enabled == true)
    end,
  },
  ['mini.pick'] = {
    module = 'nodecode.ui.mini_picker',
    what = "mini.pick (with require('mini.pick').setup() called)",
    installed = function()
      return pcall(require, 'mini.pick') and _G.MiniPick ~= nil and _G.MiniPick.config ~= nil
    end,
  },
}

--- The order 'auto' tries the backends in (documented in :help nodecode-picker).
M.ORDER = { 'telescope', 'fzf-lua', 'snacks', 'mini.pick' }

local warned = {} ---@type table<string, boolean>

--- Backends that failed to open a picker in this Neovim, and how.
---@type table<string, string>
local broken = {}

--- The Neovim version a plugin script's guard asks for (`if vim.fn.has
--- "nvim-0.11" ~= 1 then error …`, as telescope's does) when this Neovim is
--- older. Its Lua modules still load on the older Neovim (so require()
--- succeeding says nothing), then fail once a picker opens.
---@param file string
---@return string?
local function unmet(file)
  for _, path in ipairs(api.nvim_get_runtime_file(file, true)) do
    local ok, lines = pcall(vim.fn.readfile, path, '', 20)
    for _, l in ipairs(ok and lines or {}) do
      local v = l:match('^%s*if.-has%s*%(?%s*["\']nvim%-(%d+%.%d+[%.%d]*)["\']')
      if v and vim.fn.has('nvim-' .. v) ~= 1 then
        return v
      end
    end
  end
end

--- Why backend `name` cannot show pickers here; nil when it can.
---@param name string
---@param asked boolean named by picker.backend
---@return string?
function M.unusable(name, asked)
  local b = M.BACKENDS[name]
  if not b.installed(asked) then
    return ('%s is not installed'):format(b.what)
  end
  local v = b.plugin and unmet(b.plugin)
  if v then
    local this = vim.version()
    return ('%s needs Neovim %s (this is %d.%d.%d)'):format(
      b.what,
      v,
      this.major,
      this.minor,
      this.patch
    )
  end
  return broken[name]
end

--- The backend that shows pickers now: a name of M.BACKENDS, 'builtin' or 'select'.
---@return string
function M.backend()
  local want = require('nodecode.config').get().picker.backend
  if want == 'builtin' or want == 'select' then
    return want
  end
  if want ~= 'auto' then
    local why = M.unusable(want, true)
    if not why then
      return want
    end
    if not warned[want] then
      warned[want] = true
      require('nodecode.message').warn(
        'picker.backend is %q but %s: using the built-in picker',
        want,
        why
      )
    end
    return 'builtin'
  end
  for _, name in ipairs(M.ORDER) do
    if not M.unusable(name, false) then
      return name
    end
  end
  return 'builtin'
end

--- Remember that backend `name` failed to open a picker, and how
--- (M.unusable says it from now on: :checkhealth, and 'auto' skips it).
---@param name string
---@param why string
function M.mark_broken(name, why)
  broken[name] = why
end

return M
