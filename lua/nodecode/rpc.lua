-- The only module that talks to nodecode's host process: it starts the host
-- (the factory plugin/nodecode.lua registers), calls the remote functions,
-- turns their {ok, error} replies into Lua errors, and receives the events the
-- host pushes back from its worker threads.

local M = {}

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

--- Start the host process; called by NodecodeHostFactory on the first remote
--- call. Runs the plugin's .venv Python with pynvim's host loop on our
--- rplugin path, so g:python3_host_prog is neither used nor changed.
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
  local stderr = {} ---@type string[]
  local started = false
  local argv = vim.list_extend({ py, '-c', BOOT }, paths)
  local chan = vim.fn.jobstart(argv, {
    rpc = true,
    env = { NODECODE_NVIM_HOST = '1' },
    on_stderr = function(_, data) -- data[1] continues the previous chunk's last line
      stderr[math.max(#stderr, 1)] = (stderr[#stderr] or '') .. data[1]
      vim.list_extend(stderr, data, 2)
      if #stderr > 200 then -- a long-lived host: keep only the recent lines
        stderr = vim.list_slice(stderr, #stderr - 99)
      end
    end,
    on_exit = function(job, code)
      if started and code ~= 0 and vim.v.exiting == vim.NIL and not stopped[job] then
        require('nodecode.message').error('host exited with %d: %s', code, last_line(stderr))
      end
    end,
  })
  if chan <= 0 then
    error(('nodecode: could not start %s (jobstart returned %d)'):format(py, chan), 0)
  end
  local ok, err = pcall(vim.fn.rpcrequest, chan, 'poll')
  if not ok then
    vim.fn.jobwait({ chan }, 1000) -- lets the rest of its stderr arrive
    local why = last_line(stderr)
    error(('nodecode: the host did not start: %s'):format(why ~= '' and why or first_line(err)), 0)
  end
  started = true
  return chan
end

--- Register the remote plugin at `path` on nodecode's host (plugin/nodecode.lua).
--- A second load (after deactivate) finds the path registered already, and the
--- functions deleted with the old host: their start-on-first-use stubs are
--- defined again, so the first call starts a new host.
---@param path string
---@param specs nodecode.RemoteSpec[]
function M.register(path, specs)
  if pcall(vim.fn['remote#host#RegisterPlugin'], HOST, path, specs) then
    return
  end
  for _, spec in ipairs(specs) do
    local name = spec.name
    if
      spec.type == 'function'
      and vim.fn.exists('*' .. name) == 0
      and vim.fn.exists('#FuncUndefined#' .. name) == 0
    then
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
    if pcall(M.stop) then
      vim.wait(5000, function()
        local ok, info = pcall(M.info)
        return not ok or info.job == nil
      end, 20)
    end
    stopped[chan] = true
    vim.fn.jobstop(chan)
    vim.fn.jobwait({ chan }, 2000)
    -- Forget the channel: the host is registered anew, not running.
    vim.cmd([[call remote#host#Register('nodecode', '*', function('NodecodeHostFactory'))]])
  end
  for _, spec in ipairs(require('nodecode.specs')) do
    if spec.type == 'function' and vim.fn.exists('*' .. spec.name) == 1 then
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

--- Call a sync remote function and unwrap its {ok, value | error} reply.
---@param fname string
---@return any
local function call(fname, ...)
  local ok, reply = pcall(vim.fn[fname], ...)
  if not ok then
    error('nodecode: ' .. first_line(reply), 0)
  end
  if type(reply) ~= 'table' or reply.ok == nil then
    error(('nodecode: %s gave no reply (is the host running?)'):format(fname), 0)
  end
  if not reply.ok then
    error('nodecode: ' .. first_line(reply.error), 0)
  end
  if reply.value == vim.NIL then
    return nil
  end
  return reply.value
end

--- Start a turn; returns the job id at once (the reply streams as events).
---@param text string
---@return integer job
function M.ask(text)
  return call('NodecodeAsk', require('nodecode.config').place(), text)
end

--- Ask the running job (or every job) to stop. Fire-and-forget: the job's
--- `done` event says how it ended.
---@param job? integer
function M.stop(job)
  vim.fn.NodecodeStop(job or vim.NIL)
end

--- Answer an approval prompt of a job; `extra` may hold `reason` (why not)
--- and `always` (allow the kind for the rest of the session).
---@param job integer
---@param id integer
---@param yes boolean
---@param extra? { reason?: string, always?: boolean }
---@return boolean
function M.approval(job, id, yes, extra)
  return call('NodecodeApproval', job, id, yes, extra or vim.empty_dict())
end

--- The pinned session's history: a list of {seq, role, text}.
---@return { seq: integer, role: string, text: string }[]
function M.messages()
  return call('NodecodeMessages', require('nodecode.config').place())
end

--- {id, home, store, cwd, job?} of the session this Neovim works in.
---@return { id: string, home: string, store: string, cwd: string, job?: integer }
function M.info()
  local info = call('NodecodeInfo', require('nodecode.config').place())
  if info.job == vim.NIL then
    info.job = nil
  end
  return info
end

--- A remote function of the pinned session: fn(...) = F(place, ...).
---@param fname string
---@return fun(...): any
local function remote(fname)
  return function(...)
    return call(fname, require('nodecode.config').place(), ...)
  end
end

--- A reply's blocks, sent as one JSON string of columns (pynvim walks every
--- value of a reply in Python: 2,000 tables were a third of :NodecodeContext),
--- made into one table per block again.
---@param value table
---@return table
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

-- The context buffer, recall and sessions (python/nodecode/host.py has the contracts).
---@type fun(): table export + blocks
function M.context()
  return with_blocks(call('NodecodeContext', require('nodecode.config').place()))
end
---@type fun(first: string): table what context() says, of that export
function M.describe(first)
  return with_blocks(call('NodecodeDescribe', require('nodecode.config').place(), first))
end
M.validate = remote('NodecodeValidate') ---@type fun(text: string): table {ok, errors, summary}
M.removed = remote('NodecodeRemoved') ---@type fun(): table[]
---@type fun(query?: string, everywhere: boolean, every_kind?: boolean): table[]
M.recall = remote('NodecodeRecall')
M.recall_entry = remote('NodecodeRecallEntry') ---@type fun(seq: integer, session?: string): string
M.turn_messages = remote('NodecodeTurnMessages') ---@type fun(turn: integer): table[]
M.sessions = remote('NodecodeSessions') ---@type fun(): table[]
M.use_session = remote('NodecodeUseSession') ---@type fun(id?: string): table
-- Budget and checkpoints.
M.evict = remote('NodecodeEvict') ---@type fun(arg?: string): table {receipt}
M.status = remote('NodecodeStatus') ---@type fun(): table
M.budget = remote('NodecodeBudget') ---@type fun(n?: integer|'clear'): table {lines}
M.undo = remote('NodecodeUndo') ---@type fun(force: boolean): table {lines, ask}
M.redo = remote('NodecodeRedo') ---@type fun(force: boolean): table {lines}
M.tree = remote('NodecodeTree') ---@type fun(): table[]
M.continue_ = remote('NodecodeContinue') ---@type fun(turn: integer): any
M.rewind = remote('NodecodeRewind') ---@type fun(turn: integer, force: boolean): any
M.fork = remote('NodecodeFork') ---@type fun(turn?: integer): table {id}
M.blob = remote('NodecodeBlob') ---@type fun(hash: string): string a kept file version
-- The model (:NodecodeModel).
---@type fun(): table[] {name, provider, model, source, window, current}
M.models = remote('NodecodeModels')
---@type fun(name: string): table {provider, model, previous, lines}
M.use_model = remote('NodecodeUseModel')

--- Entry point of the host's events (nodecode.host module docstring lists them).
---@param event table
function M._on_event(event)
  if not M.running() then
    return -- a stopped host's last words (after :Lazy reload): redrawing would start a new one
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
