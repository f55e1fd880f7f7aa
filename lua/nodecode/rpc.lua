-- The only module that talks to nodecode's host process: it starts the host
-- (the factory plugin/nodecode.lua registers), calls its endpoints by name
-- through M.call and M.notify (python/nodecode/host.py ENDPOINTS lists them),
-- turns their {ok, error} replies into Lua errors, and receives the events the
-- host pushes back from its worker threads.

local M = {}

-- The remote plugin's two functions, as remote#host#RegisterPlugin wants them:
-- the @pynvim decorators of rplugin/python3/nodecode_nvim (test_registration.py
-- compares them). `opts` must be a dict, not `{}` (a list in Vimscript).
---@type { type: 'function', name: string, sync: boolean, opts: table }[]
local ENTRIES = {
  { type = 'function', name = 'NodecodeCall', sync = true, opts = vim.empty_dict() },
  { type = 'function', name = 'NodecodeNotify', sync = false, opts = vim.empty_dict() },
}

local HOST = 'nodecode'
-- Channels shutdown() ended on purpose: their exit is no error.
---@type table<integer, boolean>
local stopped = {}
local BOOT =
  'import sys; sys.path = [p for p in sys.path if p != ""]; import pynvim; pynvim.start_host()'

--- The one line worth showing of an error: Vim's wrappers ("...FuncUndefined
--- Autocommands...Vim(return):E5108: Error executing lua ...") peeled off.
---@param text any
---@return string
local function first_line(text)
  local lines = vim.tbl_filter(function(l)
    return vim.trim(l) ~= ''
  end, vim.split(tostring(text or ''), '\n', { plain = true }))
  local line = vim.trim(lines[1] or '')
  line = line:match('E5108: Error executing lua (.*)$') or line:match('^.-Vim%b():(.*)$') or line
  return vim.trim((line:gsub('^nodecode: ', '')))
end

--- The last non-empty line (of a traceback: the exception).
---@param lines string[]
---@return string
local function last_line(lines)
  for i = #lines, 1, -1 do
    if vim.trim(lines[i]) ~= '' then
      return vim.trim(lines[i])
    end
  end
  return ''
end

---@class nodecode.HostProcess
---@field chan integer
---@field ready boolean it answered: a request or an event came back
---@field waiting boolean a caller waits for it to answer (await reports its failure)
---@field stderr string[]

---@type nodecode.HostProcess?
local current = nil
---@type string? the remote plugin's path (M.register), to register it again
local plugin_path = nil
---@type integer? the tabpage whose session calls act on (M.within); nil: the current one
local tab_override = nil
---@type table<integer, boolean> every tabpage a call was sent for (the host pinned its session)
local sent = {}

--- Forget a host that died before it answered: the remote functions and the
--- host are registered anew, so the next call starts another.
local function forget()
  current = nil
  vim.cmd([[call remote#host#Register('nodecode', '*', function('NodecodeHostFactory'))]])
  for _, spec in ipairs(ENTRIES) do
    if vim.fn.exists('*' .. spec.name) == 1 then
      vim.cmd('delfunction ' .. spec.name)
    end
  end
  if plugin_path then
    M.register(plugin_path)
  end
end

--- Start the host process; called by NodecodeHostFactory on the first remote
--- call. Runs the plugin's .venv Python with pynvim's host loop on our
--- rplugin path, so g:python3_host_prog is neither used nor changed. Returns
--- at once: a notification waits in the channel until the host reads it, and
--- M.call waits for the host's first answer (await).
---@param host { name: string }
---@return integer channel
function M.start_host(host)
  local py = require('nodecode.config').python()
  if vim.fn.executable(py) ~= 1 then
    error('nodecode: ' .. require('nodecode.config').no_python(), 0)
  end
  local paths = vim.tbl_map(function(p)
    return p.path
  end, vim.fn['remote#host#PluginsForHost'](host.name))
  ---@type nodecode.HostProcess
  local this = { chan = 0, ready = false, waiting = false, stderr = {} }
  local argv = vim.list_extend({ py, '-c', BOOT }, paths)
  local chan = vim.fn.jobstart(argv, {
    rpc = true,
    env = { NODECODE_NVIM_HOST = '1' },
    on_stderr = function(_, data) -- data[1] continues the previous chunk's last line
      local stderr = this.stderr
      stderr[math.max(#stderr, 1)] = (stderr[#stderr] or '') .. data[1]
      vim.list_extend(stderr, data, 2)
      if #stderr > 200 then -- a long-lived host: keep only the recent lines
        this.stderr = vim.list_slice(stderr, #stderr - 99)
      end
    end,
    on_exit = function(job, code)
      if vim.v.exiting ~= vim.NIL or stopped[job] then
        return
      end
      if not this.ready then
        if not this.waiting then -- nobody waits to say it (a notification started it)
          local why = 'the host did not start: ' .. last_line(this.stderr)
          vim.schedule(function()
            forget()
            require('nodecode.ui.chat').without_host(why)
          end)
          require('nodecode.message').error('%s', why)
        end
      elseif code ~= 0 then
        require('nodecode.message').error('host exited with %d: %s', code, last_line(this.stderr))
      end
    end,
  })
  if chan <= 0 then
    error(('nodecode: could not start %s (jobstart returned %d)'):format(py, chan), 0)
  end
  this.chan, current = chan, this
  return chan
end

--- Start the host if needed and wait until it answers (its first answer only:
--- then it is known to run). A host that dies first is one error naming why.
local function await()
  local started, chan = pcall(vim.fn['remote#host#Require'], HOST)
  if not started then
    error('nodecode: ' .. first_line(chan), 0)
  end
  local this = current
  if not this or this.chan ~= chan or this.ready then
    return
  end
  this.waiting = true
  local ok, err = pcall(vim.fn.rpcrequest, chan, 'poll')
  this.waiting = false
  if ok then
    this.ready = true
    return require('nodecode.ui.status').refresh()
  end
  vim.fn.jobwait({ chan }, 1000) -- lets the rest of its stderr arrive
  local why = last_line(this.stderr)
  forget()
  error(('nodecode: the host did not start: %s'):format(why ~= '' and why or first_line(err)), 0)
end

--- Has the host answered (is it running, and done starting)? Does not start it.
---@return boolean
function M.ready()
  return M.running() and current ~= nil and current.ready
end

--- Register the remote plugin at `path` on nodecode's host (plugin/nodecode.lua).
--- A second load (after deactivate) finds the path registered already, and the
--- functions deleted with the old host: their start-on-first-use stubs are
--- defined again, so the first call starts a new host.
---@param path string
function M.register(path)
  plugin_path = path
  if pcall(vim.fn['remote#host#RegisterPlugin'], HOST, path, ENTRIES) then
    return
  end
  for _, spec in ipairs(ENTRIES) do
    local name = spec.name
    if vim.fn.exists('*' .. name) == 0 and vim.fn.exists('#FuncUndefined#' .. name) == 0 then
      vim.fn['remote#define#FunctionOnHost'](
        HOST,
        path .. ':function:' .. name,
        spec.sync,
        name,
        spec.opts
      )
    end
  end
end

--- Stop the host (its running turns first, given a few seconds to end as
--- stopped) and delete the remote functions bound to its channel, so a new
--- load of the plugin starts a new host instead of calling a dead one.
function M.shutdown()
  if M.running() then
    local chan = vim.fn['remote#host#Require'](HOST)
    if pcall(M.notify, 'stop') then
      vim.wait(5000, function() -- every tab's turn
        local ok, jobs = pcall(M.call, 'jobs')
        return not ok
          or #vim.tbl_filter(function(j)
              return j.status == 'running'
            end, jobs)
            == 0
      end, 20)
    end
    stopped[chan] = true
    current = nil
    vim.fn.jobstop(chan)
    vim.fn.jobwait({ chan }, 2000)
    -- Forget the channel: the host is registered anew, not running.
    vim.cmd([[call remote#host#Register('nodecode', '*', function('NodecodeHostFactory'))]])
  end
  for _, spec in ipairs(ENTRIES) do
    if vim.fn.exists('*' .. spec.name) == 1 then
      vim.cmd('delfunction ' .. spec.name)
    end
  end
end

--- Is the host process running? (Does not start it.)
---@return boolean
function M.running()
  local ok, r = pcall(vim.fn['remote#host#IsRunning'], HOST)
  return ok and r == 1
end

--- A reply's blocks, sent as one JSON string of columns (pynvim walks every
--- value of a reply in Python: 2,000 tables were a third of :NodecodeContext),
--- made into one table per block again.
---@param value any
---@return any
local function with_blocks(value)
  if type(value) == 'table' and type(value.blocks) == 'string' then
    local columns, blocks = vim.json.decode(value.blocks), {}
    for i = 1, columns.id and #columns.id or 0 do
      local b = {}
      for k, column in pairs(columns) do
        b[k] = column[i]
      end
      blocks[i] = b
    end
    value.blocks = blocks
  end
  return value
end

--- The place a call or notification is sent for (config.place of M.tab()):
--- its tab is remembered as one the host pinned a session for (M.tabs_closed).
---@return table
local function place_of_call()
  local tab = M.tab()
  sent[tab] = true
  return require('nodecode.config').place(tab)
end

--- Call endpoint `name` of the host (python/nodecode/host.py ENDPOINTS has
--- each one's arguments and reply) in the place this Neovim works in, and
--- return its value; its error is raised as one line.
---@param name string
---@param ... any the endpoint's arguments
---@return any
function M.call(name, ...)
  local place = place_of_call()
  await()
  local ok, reply = pcall(vim.fn.NodecodeCall, name, place, ...)
  if not ok then
    error('nodecode: ' .. first_line(reply), 0)
  end
  if type(reply) ~= 'table' or reply.ok == nil then
    error(('nodecode: %s gave no reply (is the host running?)'):format(name), 0)
  end
  if not reply.ok then
    error('nodecode: ' .. first_line(reply.error), 0)
  end
  if reply.value == vim.NIL then
    return nil
  end
  return with_blocks(reply.value)
end

--- Send notification `name` to the host (a stop): returns at once, and the
--- host shows its error, if any, as a message.
---@param name string
---@param ... any the endpoint's arguments
function M.notify(name, ...)
  local place = place_of_call()
  local ok, err = pcall(vim.fn.NodecodeNotify, name, place, ...)
  if not ok then -- the host could not start: one line, as rpc.call says it
    error('nodecode: ' .. first_line(err), 0)
  end
end

--- The tabpage whose session calls act on: the one M.within names, else the
--- current tab's chat's (ui/chat.lua M.owner), without loading the chat.
--- No side effect: the statusline asks on every redraw.
---@return integer
function M.tab()
  local tab = tab_override
  if not tab then
    local chat = package.loaded['nodecode.ui.chat']
    tab = chat and chat.owner() or vim.api.nvim_get_current_tabpage()
  end
  return tab
end

--- Tell the host to forget the tabpages that are gone (their sessions are
--- free for other tabs, their running turns stop); chat or none.
function M.tabs_closed()
  local chat = package.loaded['nodecode.ui.chat']
  local kept = chat and chat.tabs() or {} -- a chat shown in another tab lives on
  for tab in pairs(sent) do
    if not vim.api.nvim_tabpage_is_valid(tab) and not vim.tbl_contains(kept, tab) then
      sent[tab] = nil
      if M.running() then
        pcall(M.notify, 'close_tab', tab)
      end
    end
  end
end

--- Run `fn(...)` with every call and notification in it acting on the session
--- of tabpage `tab` (a turn of another tab finished: its views follow it).
---@generic T
---@param tab integer
---@param fn fun(...): T
---@return T
function M.within(tab, fn, ...)
  local was = tab_override
  tab_override = tab
  local result = { pcall(fn, ...) }
  tab_override = was
  if not result[1] then
    error(result[2], 0)
  end
  return unpack(result, 2, table.maxn(result))
end

--- Entry point of the host's events (nodecode.host module docstring lists them).
---@param event table
function M._on_event(event)
  if not M.running() then
    return -- a stopped host's last words (after :Lazy reload): redrawing would start a new one
  end
  if current and not current.ready then -- its first word: it runs
    current.ready = true
    require('nodecode.ui.status').refresh()
  end
  if event.kind == 'history' then -- of no job: a part of the chat's history
    return require('nodecode.ui.chat').on_history(event)
  end
  if event.kind == 'context' then -- of no job: the export :NodecodeContext asked for
    if event.value ~= nil then
      event.value = with_blocks(event.value)
    end
    return require('nodecode.ui.context').opened(event)
  end
  if event.kind == 'evict' then -- of no job: an eviction by hand's progress or receipt
    return require('nodecode.actions').evicted(event)
  end
  if event.kind == 'title' then -- of no job: a session's automatic title, made or failed
    return vim.schedule(function()
      require('nodecode.ui.sessions').titled(event)
    end)
  end
  if event.kind == 'warning' then -- of no job: config.jsonc names a key that is not a setting
    require('nodecode.message').warn('%s', event.text)
    return
  end
  for _, mod in ipairs({
    'nodecode.ui.chat',
    'nodecode.ui.context',
    'nodecode.ui.status',
    'nodecode.ui.tree',
    'nodecode.ui.progress',
  }) do
    local ok, err = pcall(require(mod).on_event, event)
    if not ok then
      require('nodecode.message').error(
        'showing %s failed: %s',
        tostring(event.kind),
        first_line(err)
      )
    end
  end
end

return M
