-- What the budget, checkpoint and session commands do: call the host, say
-- what happened, and make every view follow (files, chat, context buffer,
-- tree, statusline).

local M = {}

local function rpc()
  return require('nodecode.rpc')
end

local function message()
  return require('nodecode.message')
end

--- Lines of a host reply, whatever its shape: a string, a list of lines, or
--- a table with `lines`, `text` or `message`.
---@param r any
---@return string[]
function M.lines(r)
  if r == nil or r == vim.NIL then
    return {}
  end
  if type(r) == 'string' then
    return vim.split(vim.trim(r), '\n', { plain = true })
  end
  if type(r) ~= 'table' then
    return { tostring(r) }
  end
  if vim.islist(r) and (#r == 0 or type(r[1]) == 'string') then
    return r
  end
  for _, key in ipairs({ 'lines', 'text', 'message', 'receipt' }) do
    local v = r[key]
    if v ~= nil and v ~= vim.NIL then
      return M.lines(v)
    end
  end
  return {}
end

--- Tell the person what the host said (info), or `fallback`.
---@param r any
---@param fallback string
local function say(r, fallback)
  local lines = M.lines(r)
  message().info('%s', #lines > 0 and table.concat(lines, '\n') or fallback)
end

--- Re-read files a move changed. :checktime alone only looks at buffers in a
--- window, so each loaded, unmodified file buffer is checked by number.
function M.reload_files()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local bo = vim.bo[buf]
    if
      vim.api.nvim_buf_is_loaded(buf)
      and bo.buftype == ''
      and not bo.modified
      and vim.api.nvim_buf_get_name(buf) ~= ''
    then
      pcall(vim.cmd, ('silent! checktime %d'):format(buf))
    end
  end
end

--- Something moved the head or changed the context: files, chat, context
--- buffer, tree and statusline follow. Each step on its own, so one failing
--- does not stop the others.
function M.after_change()
  for _, step in ipairs({
    function()
      M.reload_files()
    end,
    function()
      require('nodecode.ui.chat').reload()
    end,
    function()
      require('nodecode.ui.context').follow()
    end,
    function()
      require('nodecode.ui.tree').refresh()
    end,
    function()
      require('nodecode.ui.status').refresh()
    end,
  }) do
    local ok, err = pcall(step)
    if not ok then
      message().caught(err)
    end
  end
end

-- Evictions by hand under way: token → the tabpage that asked (its views follow).
---@type table<integer, integer>
local evicting = {}
local tokens = 0

--- :NodecodeEvict [percent | through TURN] (and :NodecodeCompact): the host
--- evicts on a worker thread (a summary may take a while) and its receipt
--- comes as an `evict` event (M.evicted); Neovim does not wait for it.
---@param arg string
function M.evict(arg)
  arg = vim.trim(arg or '')
  tokens = tokens + 1
  local token = tokens
  evicting[token] = rpc().tab() -- before the call: its events may come first
  local ok, err = pcall(rpc().call, 'evict', token, arg ~= '' and arg or nil)
  if not ok then
    evicting[token] = nil
    error(err, 0)
  end
end

--- An `evict` event: a summary asked for (say so), or the eviction's receipt
--- (or error), after which every view follows.
---@param ev { token: integer, summary?: integer[], value?: table, error?: string }
function M.evicted(ev)
  local tab = evicting[ev.token]
  if ev.summary then
    return message().info(
      'evicting… asking for a summary of seq %d–%d (:NodecodeStop stops it)',
      ev.summary[1],
      ev.summary[2]
    )
  end
  evicting[ev.token] = nil
  if ev.error then
    return message().error('%s', ev.error)
  end
  say(ev.value, 'evicted')
  if tab and vim.api.nvim_tabpage_is_valid(tab) then
    rpc().within(tab, M.after_change)
  else
    M.after_change()
  end
end

--- :NodecodeStop in a tab whose eviction runs: its summary request ends, and
--- the plain stub stands. Was there one to stop?
---@return boolean
function M.stop_evict()
  if not rpc().running() then -- the host went, and its evictions with it
    evicting = {}
    return false
  end
  local tab = rpc().tab()
  for _, t in pairs(evicting) do
    if t == tab then
      rpc().notify('stop_evict')
      return true
    end
  end
  return false
end

--- :NodecodeBudget [N | clear]: show the budget, or set (clear) the store's
--- window override.
---@param arg string
function M.budget(arg)
  arg = vim.trim(arg or '')
  local n = nil
  if arg == 'clear' then
    n = arg
  elseif arg ~= '' then
    n = tonumber(arg)
    if not n or n <= 0 or n % 1 ~= 0 then
      error(
        ('nodecode: :NodecodeBudget expects a window in tokens or "clear" (got %q)'):format(arg),
        0
      )
    end
  end
  say(rpc().call('budget', n), 'budget: unknown')
  require('nodecode.ui.status').refresh()
end

--- :NodecodeUndo[!]: rewind the last turn; its ask comes back into the input
--- area, shown under the chat without taking the cursor or starting insert.
---@param force boolean
function M.undo(force)
  local r = rpc().call('undo', force)
  say(r, 'undone')
  M.after_change()
  local ask = type(r) == 'table' and r.ask
  if type(ask) == 'string' and ask ~= '' then
    local from = vim.api.nvim_get_current_win()
    local chat = require('nodecode.ui.chat').open()
    if vim.api.nvim_win_is_valid(from) then
      vim.api.nvim_set_current_win(from)
    end
    if not require('nodecode.ui.input').put_undone(chat, ask) then
      message().info('the undone ask stays out of the input area (it holds your text): %s', ask)
    end
  end
end

--- :NodecodeRedo[!]: the undone ask leaves the input area (its turn is back).
---@param force? boolean
function M.redo(force)
  say(rpc().call('redo', force == true), 'redone')
  require('nodecode.ui.input').clear_undone()
  M.after_change()
end

--- :NodecodeBlob HASH: the version of a file a forced move kept, read-only in a split.
---@param hash string
function M.blob(hash)
  hash = vim.trim(hash or '')
  local text = rpc().call('blob', hash)
  local name = 'nodecode://blob/' .. hash
  local buf = vim.fn.bufnr('^' .. vim.pesc(name) .. '$')
  if buf == -1 then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(
    buf,
    0,
    -1,
    false,
    vim.split((text:gsub('\n$', '')), '\n', { plain = true })
  )
  vim.bo[buf].modifiable, vim.bo[buf].bufhidden = false, 'wipe'
  vim.cmd('split')
  vim.api.nvim_win_set_buf(0, buf)
  vim.keymap.set(
    'n',
    'q',
    '<cmd>close<cr>',
    { buffer = buf, nowait = true, desc = 'nodecode: close' }
  )
end

--- :NodecodeFork [TURN]: a new session from here (or from TURN), pinned at once.
---@param turn? integer
function M.fork(turn)
  local r = rpc().call('fork', turn) -- the host pins the child
  require('nodecode.ui.input').clear_undone()
  local id = type(r) == 'table' and r.id or r
  if type(id) == 'string' then
    message().info('forked: this Neovim now works in session %s', id)
  else
    say(r, 'forked')
  end
  M.after_change()
end

--- Work in session `id` (nil: a new one) from now on.
---@param id? string
function M.use_session(id)
  local info = rpc().call('use_session', id)
  require('nodecode.ui.input').clear_undone()
  message().info('now in session %s', info.id)
  M.after_change()
end

--- :NodecodeSessions [ID]: resume ID, or pick one (or a new one).
---@param arg string
---@param opts? table the picker backend's own options
function M.sessions(arg, opts)
  arg = vim.trim(arg or '')
  if arg ~= '' then
    return M.use_session(arg)
  end
  require('nodecode.ui.picker').sessions(rpc().call('sessions'), function(item)
    M.use_session(item.id)
  end, opts)
end

--- Run `fn`, turning its error into one message (for picker and tree callbacks).
---@param fn fun(...)
---@return fun(...)
function M.guard(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then
      message().caught(err)
    end
  end
end

return M
