-- The context buffer: context.txt opened as a real file buffer (filetype
-- nodecode-context). One manual fold per block (closed, the newest few open)
-- with the fold text `ID ROLE · N tokens · first line`, token counts as
-- virtual text on headers, a virtual line where the prefix the next request
-- can read from cache ends (moving up as soon as a line above it changes).
-- Reloading the file from disk (`:e!`, autoread) re-attaches the buffer to the
-- export the file now holds. `:w` validates through the core, shows problems as
-- diagnostics and writes the file byte for byte: the saved file is the edit,
-- which the core takes (or refuses) at the next request. This module holds
-- the state, attaches and tracks edits; open.lua opens and follows (these
-- fields delegate to it), view.lua draws (folds, marks), write.lua writes.

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
---@field tab integer the tabpage that opened it: its chat's session is the buffer's

---@type table<integer, nodecode.ContextState>
local states = {}
M._states = states -- (shared with open.lua)

local function rpc()
  return require('nodecode.rpc')
end

local function message()
  return require('nodecode.message')
end

local function view()
  return require('nodecode.ui.context.view')
end

local function open()
  return require('nodecode.ui.context.open')
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

--- The tabpage whose session context buffer `buf` edits (rpc.tab() when the
--- tab that opened it is closed, or none did).
---@param buf integer
---@return integer
function M.tab_of(buf)
  local st = states[buf]
  if st and st.tab and api.nvim_tabpage_is_valid(st.tab) then
    return st.tab
  end
  return rpc().tab()
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

-- Following edits and reloads ------------------------------------------

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
M._following = following -- (open.lua sets it around its own reloads)

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

--- Make `buf` (context.txt, loaded) the context buffer of export `data`,
--- asked for by tabpage `tab` (the one that opened it before, or rpc.tab()).
---@param buf integer
---@param data table what rpc.call('context') returned
---@param tab? integer
function M.attach(buf, data, tab)
  local tokens, prefix, cached = {}, {}, {}
  for _, b in ipairs(data.blocks) do
    tokens[b.id], prefix[b.id], cached[b.id] = b.tokens, nonil(b.prefix), b.cached == true
  end
  require('nodecode.ui.highlights').setup()
  local fresh = states[buf] == nil
  tab = tab or M.tab_of(buf)
  states[buf] = {
    tab = tab,
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

--- The window to open the buffer in, per context.position (open.lua).
---@return integer
function M.target_window()
  return open().target_window()
end

--- :NodecodeContext — export, then open context.txt with folds and marks (open.lua).
function M.open()
  return open().open()
end

--- Is an export :NodecodeContext asked for still on its way? (Tests look.)
---@return boolean
function M.opening()
  return open().opening()
end

--- The export :NodecodeContext asked for (the host's `context` event).
---@param ev { token: integer, value?: table, error?: string }
function M.opened(ev)
  return open().opened(ev)
end

--- The context buffer `old` belongs to another session than the pinned one (open.lua).
---@param old integer
---@param pinned string
function M.switch(old, pinned)
  return open().switch(old, pinned)
end

--- Re-export into the loaded, unmodified context buffer of the session of
--- tabpage `tab` (rpc.tab()) (open.lua).
---@param tab? integer
function M.follow(tab)
  return open().follow(tab)
end

--- Host events: a finished turn is followed, in its tab's session (receipts
--- are told by the chat).
---@param ev table
function M.on_event(ev)
  local tab = ev.kind == 'done' and require('nodecode.ui.chat').tab_of(ev.job)
  if tab and api.nvim_tabpage_is_valid(tab) and M.find() then
    vim.schedule(function()
      local ok, err = pcall(M.follow, tab)
      if not ok then
        message().caught(err)
      end
    end)
  end
end

return M
