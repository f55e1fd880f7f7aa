-- The context buffer: context.txt opened as a real file buffer (filetype
-- nodecode-context). One manual fold per block (closed, the newest few open)
-- with the fold text `ID ROLE · N tokens · first line`, token counts as
-- virtual text on headers, a virtual line where the prefix the next request
-- can read from cache ends (moving up as soon as a line above it changes).
-- Reloading the file from disk (`:e!`, autoread) re-attaches the buffer to the
-- export the file now holds. `:w` validates through the core, shows problems as
-- diagnostics and writes the file byte for byte: the saved file is the edit,
-- which the core takes (or refuses) at the next request. This module opens,
-- follows and restores; view.lua draws (folds, marks), write.lua writes.

local M = {}

local api = vim.api
M.ns_diag = api.nvim_create_namespace('nodecode_context_diag')

---@class nodecode.Block
---@field id integer
---@field role string
---@field line integer 1-based line of the header
---@field tokens? integer

---@class nodecode.ContextState
---@field path string
---@field session string
---@field first string line 1 as exported
---@field nonce string
---@field blocks nodecode.Block[] as the buffer stands (rescanned after edits)
---@field tokens table<integer, integer> tokens of each exported block, by id
---@field prefix table<integer, integer> prompt tokens through each block, by id
---@field cached table<integer, boolean> blocks whose prefix the next request can read from cache
---@field cache table {through?, system, fixed, tokens?, last?} (host.py: context); last: {seq,
--- read, prompt, missed?, why?} (why: the reason it read short of what the mark promised)
---@field changed_from? integer 0-based first row changed since the export (or the last :w)
---@field header string Lua pattern of this export's headers, capturing the ID

---@type table<integer, nodecode.ContextState>
local states = {}

local function rpc()
  return require('nodecode.rpc')
end

local function message()
  return require('nodecode.message')
end

local function view()
  return require('nodecode.ui.context.view')
end

---@param v any
local function nonil(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

--- The state of `buf` (0: current), if it is a context buffer.
---@param buf? integer
---@return nodecode.ContextState?
function M.state(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  return states[buf]
end

--- The loaded context buffer of `session` (any, when nil).
---@param session? string
---@return integer?
function M.find(session)
  for buf, st in pairs(states) do
    if api.nvim_buf_is_loaded(buf) and (session == nil or st.session == session) then
      return buf
    end
  end
end

-- Opening and following -------------------------------------------------

---@type table<integer, uv.uv_timer_t>
local timers = {}

---@param buf integer
local function on_change(buf)
  local t = timers[buf] or vim.uv.new_timer()
  timers[buf] = t
  t:stop()
  t:start(
    200,
    0,
    vim.schedule_wrap(function()
      local st = states[buf]
      if not (st and api.nvim_buf_is_loaded(buf)) then
        return
      end
      local blocks = view().scan(buf, st)
      if #blocks ~= #st.blocks then
        view().refresh(buf)
      else
        st.blocks = blocks
        view().decorate(buf, st)
      end
    end)
  )
end

---@type table<integer, boolean> buffers being reloaded by follow() (already attached)
local following = {}

--- The file was read again from disk (`:e!`, autoread): attach to the export it
--- holds now, so `:w`, folds, counts and diagnostics are that export's.
---@param buf integer
function M.reloaded(buf)
  if following[buf] or not states[buf] then
    return
  end
  local first = api.nvim_buf_get_lines(buf, 0, 1, false)[1] or ''
  local ok, data = pcall(rpc().call, 'describe', first)
  if not ok then
    vim.diagnostic.reset(M.ns_diag, buf)
    return message().warn('%s', message().reason(data))
  end
  M.attach(buf, data)
end

--- Track the first changed row: the cached-prefix mark stops above it.
---@param buf integer
local function track_changes(buf)
  api.nvim_buf_attach(buf, false, {
    on_lines = function(_, b, _, first)
      local st = states[b]
      if not st then
        return true -- detach: no longer a context buffer
      end
      if following[b] then
        return -- our own reload, line by line: attached again after
      end
      st.changed_from = math.min(st.changed_from or first, first)
      on_change(b)
    end,
  })
end

---@param buf integer
local function autocmds(buf)
  local group = api.nvim_create_augroup('nodecode_context_' .. buf, { clear = true })
  api.nvim_create_autocmd('BufWriteCmd', {
    group = group,
    buffer = buf,
    callback = function(ev)
      require('nodecode.ui.context.write').write(ev.buf, ev.match)
    end,
  })
  api.nvim_create_autocmd('BufReadPost', {
    group = group,
    buffer = buf,
    callback = function(ev)
      M.reloaded(ev.buf)
    end,
  })
  api.nvim_create_autocmd('BufWinEnter', {
    group = group,
    buffer = buf,
    callback = function(ev)
      local st = states[ev.buf]
      -- (also fires while `:edit!` reloads: the lines may be another export's;
      -- one of ours is attached again after, which folds)
      if st and not following[ev.buf] then
        st.blocks = view().scan(ev.buf, st)
        view().fold(api.nvim_get_current_win(), ev.buf, st)
      end
    end,
  })
  api.nvim_create_autocmd({ 'TextChanged', 'InsertLeave' }, {
    group = group,
    buffer = buf,
    callback = function(ev)
      on_change(ev.buf)
    end,
  })
  api.nvim_create_autocmd('BufWipeout', {
    group = group,
    buffer = buf,
    callback = function(ev)
      states[ev.buf] = nil
      if timers[ev.buf] then
        timers[ev.buf]:close()
        timers[ev.buf] = nil
      end
    end,
  })
end

--- A context buffer left by an earlier load of the plugin (`:Lazy reload`):
--- attached again at its first use (entering it, or `:w`, which starts the
--- host then), unsaved changes included, so `:w` is nodecode's write again.
---@param buf integer
function M.adopt(buf)
  local group = api.nvim_create_augroup('nodecode_context_' .. buf, { clear = true })
  local function reattach()
    if states[buf] then
      return true
    end
    local first = api.nvim_buf_get_lines(buf, 0, 1, false)[1] or ''
    local ok, data = pcall(rpc().call, 'describe', first)
    if not ok then
      message().warn('%s', message().reason(data))
      return false
    end
    M.attach(buf, data) -- replaces this group with the buffer's own
    if vim.bo[buf].modified then
      states[buf].blocks = view().scan(buf, states[buf])
      on_change(buf)
    end
    return true
  end
  api.nvim_create_autocmd('BufWriteCmd', {
    group = group,
    buffer = buf,
    callback = function(ev)
      if reattach() then
        require('nodecode.ui.context.write').write(ev.buf, ev.match)
      end
    end,
  })
  api.nvim_create_autocmd('BufEnter', { group = group, buffer = buf, callback = reattach })
end

--- Make `buf` (context.txt, loaded) the context buffer of export `data`.
---@param buf integer
---@param data table what rpc.call('context') returned
function M.attach(buf, data)
  local tokens, prefix, cached = {}, {}, {}
  for _, b in ipairs(data.blocks) do
    tokens[b.id], prefix[b.id], cached[b.id] = b.tokens, nonil(b.prefix), b.cached == true
  end
  require('nodecode.ui.highlights').setup()
  local fresh = states[buf] == nil
  states[buf] = {
    path = data.path,
    session = data.session,
    first = data.first,
    nonce = data.nonce,
    blocks = data.blocks,
    tokens = tokens,
    prefix = prefix,
    cached = cached,
    cache = M.cache_of(data.cache),
    header = '^%[%[m:' .. data.nonce .. ' (%d+) %l+%]%]$',
  }
  if vim.bo[buf].filetype ~= 'nodecode-context' then
    vim.bo[buf].filetype = 'nodecode-context'
  end
  vim.diagnostic.reset(M.ns_diag, buf)
  if fresh then
    autocmds(buf)
    track_changes(buf)
    require('nodecode.keymaps').attach(buf, 'context')
  end
  view().decorate(buf, states[buf])
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    view().fold(win, buf, states[buf])
  end
end

--- A host `cache` table with vim.NIL turned into nil.
---@param c any
---@return table
function M.cache_of(c)
  c = type(c) == 'table' and c or {}
  local last = nonil(c.last)
  return {
    through = nonil(c.through),
    system = c.system == true,
    fixed = nonil(c.fixed),
    tokens = nonil(c.tokens),
    last = type(last) == 'table' and last or nil,
  }
end

--- The window of this tab showing a buffer of filetype `ft`, if any.
---@param ft string
---@return integer?
local function shown(ft)
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if vim.bo[api.nvim_win_get_buf(w)].filetype == ft then
      return w
    end
  end
end

--- The window to open the buffer in, per context.position. 'chat' (the
--- default): the context buffer's window in this tab if there is one, else
--- a split above the chat when the chat is shown, else a window at the right;
--- the window you were in keeps its file.
---@return integer
function M.target_window()
  local pos = require('nodecode.config').get().context.position
  local ft = vim.bo.filetype
  if
    pos == 'current' and (ft == 'nodecode-chat' or ft == 'nodecode-input' or ft == 'nodecode-tree')
  then
    pos = 'above'
  elseif pos == 'chat' then
    local here, chat = shown('nodecode-context'), shown('nodecode-chat')
    if here then
      api.nvim_set_current_win(here)
      return here
    end
    if chat then
      api.nvim_set_current_win(chat)
    end
    pos = chat and 'above' or 'right'
  end
  local cmds = {
    split = 'split',
    vsplit = 'vsplit',
    tab = 'tabnew',
    above = 'aboveleft split',
    right = 'vertical botright split',
  }
  local cmd = cmds[pos]
  if cmd then
    vim.cmd(cmd)
  end
  return api.nvim_get_current_win()
end

--- Delete every fold of `buf`'s windows before its text is read again
--- (attach makes them anew): `:edit!` under 10,000 folds took a second.
---@param buf integer
local function unfold(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    api.nvim_win_call(win, function()
      vim.cmd('normal! zE')
    end)
  end
end

--- Load export `data` into `buf` (or a new buffer) shown in window `win`.
---@param data table
---@param win integer
---@return integer buf
local function load(data, win)
  local buf = -1
  for _, b in ipairs(api.nvim_list_bufs()) do -- the exact name (bufnr() takes a pattern)
    if api.nvim_buf_get_name(b) == data.path then
      buf = b
    end
  end
  local hidden = buf > 0 and #vim.fn.win_findbuf(buf) == 0 and not vim.bo[buf].modified
  if hidden then -- read anew, not again: `:edit!` of 80,000 lines took 0.5 s, `:edit` 0.2 s
    api.nvim_buf_delete(buf, { force = true })
    buf = -1
  end
  if buf > 0 and api.nvim_buf_is_loaded(buf) then
    following[buf] = true -- attached by the caller
    api.nvim_win_set_buf(win, buf)
    unfold(buf)
    pcall(api.nvim_buf_call, buf, function()
      vim.cmd('silent edit!')
    end)
    following[buf] = nil
  else
    api.nvim_win_call(win, function()
      vim.cmd('silent edit ' .. vim.fn.fnameescape(data.path))
    end)
    buf = api.nvim_win_get_buf(win)
  end
  return buf
end

---@type integer? the export :NodecodeContext waits for (M.opened)
local opening = nil
local last_token = 0

--- :NodecodeContext — export, then open context.txt with folds and marks.
--- The host exports on a worker thread; the buffer opens when it is done
--- (M.opened), so Neovim never waits for an export of a long session.
function M.open()
  local pinned = rpc().call('info').id
  for buf, st in pairs(states) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].modified and st.session == pinned then
      vim.cmd('drop ' .. vim.fn.fnameescape(api.nvim_buf_get_name(buf)))
      message().warn('%s', require('nodecode.ui.context.write').unsaved_words(st))
      return
    end
  end
  last_token = last_token + 1
  opening = last_token
  rpc().notify('context_open', opening)
end

--- Is an export :NodecodeContext asked for still on its way? (Tests look.)
---@return boolean
function M.opening()
  return opening ~= nil
end

--- The export :NodecodeContext asked for (the host's `context` event): the
--- buffer opens, per context.position from the window the cursor is in now.
---@param ev { token: integer, value?: table, error?: string }
function M.opened(ev)
  if ev.token ~= opening then
    return -- a later :NodecodeContext asked for another
  end
  opening = nil
  if type(ev.error) == 'string' then
    return message().error('%s', ev.error)
  end
  local data = ev.value
  local buf = load(data, M.target_window())
  M.attach(buf, data)
  require('nodecode.ui.status').refresh()
end

--- Reload `buf` (context.txt) from disk as export `data`, each window's view kept.
---@param buf integer
---@param data table
local function reload_as(buf, data)
  local views = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    views[win] = api.nvim_win_call(win, vim.fn.winsaveview)
  end
  following[buf] = true
  unfold(buf)
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd('silent edit!')
  end)
  following[buf] = nil
  if not ok then
    error(err, 0)
  end
  M.attach(buf, data)
  for win, saved in pairs(views) do
    api.nvim_win_call(win, function()
      vim.fn.winrestview(saved)
    end)
  end
end

--- The context buffer `old` belongs to another session than the pinned one (a
--- fork, a session switch): its windows show the pinned session's context
--- instead, or, with unsaved edits, the person is told whose they are.
---@param old integer
---@param pinned string
function M.switch(old, pinned)
  local st = states[old]
  if vim.bo[old].modified then
    return message().warn(
      'the context buffer holds unsaved edits of session %s, but this Neovim '
        .. 'works in session %s now, where they cannot be saved: yank them, then :NodecodeContext '
        .. 'opens the context of %s',
      st.session,
      pinned,
      pinned
    )
  end
  local wins = vim.fn.win_findbuf(old)
  if #wins == 0 then
    return api.nvim_buf_delete(old, {}) -- hidden: the next :NodecodeContext opens the new one
  end
  local data = rpc().call('context')
  local buf = load(data, wins[1])
  for _, win in ipairs(wins) do
    api.nvim_win_set_buf(win, buf)
  end
  M.attach(buf, data)
  if api.nvim_buf_is_valid(old) and old ~= buf then
    api.nvim_buf_delete(old, {})
  end
  message().info('the context buffer follows session %s now', pinned)
end

--- Re-export into the loaded, unmodified context buffer of the pinned session
--- (after a turn, an undo, an eviction…); a modified one is left alone. One of
--- another session follows the pinned one (M.switch).
function M.follow()
  if not M.find() then
    return
  end
  local pinned = rpc().call('info').id
  local buf = M.find(pinned)
  if not buf then
    return M.switch(assert(M.find()), pinned)
  end
  if vim.bo[buf].modified then
    return message().warn(
      'the context changed; the context buffer has unsaved changes, so it stays on its export'
    )
  end
  local data = rpc().call('context')
  if data.path ~= states[buf].path then
    return -- (cannot happen: the pinned session's context has one path)
  end
  reload_as(buf, data)
end

--- Host events: a finished turn is followed (receipts are told by the chat).
---@param ev table
function M.on_event(ev)
  if ev.kind == 'done' and M.find() then
    vim.schedule(function()
      local ok, err = pcall(M.follow)
      if not ok then
        message().caught(err)
      end
    end)
  end
end

return M
