-- The chat: a read-only buffer `nodecode://chat` (filetype nodecode-chat)
-- showing the pinned session's history and the running turn as it streams
-- (the layout is ui/transcript.lua's); `:Nodecode` alone adds the input area
-- (ui/input.lua). Events from the host arrive in on_event.
--
-- A chat per tab: each tabpage has its own chat on its own session (the host
-- pins one per tab); the first is `nodecode://chat`, another tab's
-- `nodecode://chat/TAB` (TAB: its tabpage handle). Commands act on the
-- current tab's chat; a job's events go to the chat that asked.

local M = {}

local NAME = 'nodecode://chat'
local Transcript = require('nodecode.ui.transcript')

---@class nodecode.ChatState
---@field tab integer the tabpage
---@field buf? integer
---@field view? nodecode.Transcript
---@field job? integer the running job
---@field token? integer the history being loaded (M.on_history)

---@type table<integer, nodecode.ChatState> by tabpage
local chats = {}

--- The tabpage whose chat tabpage `tab` (the current one) works with: its
--- own, or, in a tab showing another tab's chat and none of its own (one
--- `chat.position = 'tab'` opened), that tab's. Commands act on its session.
---@param tab? integer
---@return integer
function M.owner(tab)
  tab = tab or vim.api.nvim_get_current_tabpage()
  if chats[tab] then
    return tab
  end
  for t, state in pairs(chats) do
    if state.buf and vim.api.nvim_buf_is_valid(state.buf) then
      for _, w in ipairs(vim.fn.win_findbuf(state.buf)) do
        if vim.api.nvim_win_get_tabpage(w) == tab then
          return t
        end
      end
    end
  end
  return tab
end

--- The chat state of tabpage `tab` (rpc.tab(): the one rpc.within names, else
--- the current tab's owner), made when missing.
---@param tab? integer
---@return nodecode.ChatState
local function chat_of(tab)
  tab = tab or require('nodecode.rpc').tab() -- which calls M.owner, never chat_of
  chats[tab] = chats[tab] or { tab = tab }
  return chats[tab]
end

local function config()
  return require('nodecode.config').get()
end

local function message()
  return require('nodecode.message')
end

-- Approvals and notices: ui/chat_events.lua. The history: ui/chat_history.lua
-- (M.loading, M.without_host, M.on_history).
local events = require('nodecode.ui.chat_events')
local load_history = require('nodecode.ui.chat_history').install(M, chats)

-- Buffer and window -----------------------------------------------------

--- Window options and folds for a window that starts showing a chat.
---@param state nodecode.ChatState
---@param win integer
local function setup_win(state, win)
  state.view:refold(win)
  local wo = vim.wo[win][0]
  wo.wrap, wo.linebreak = true, true
  wo.number, wo.relativenumber, wo.signcolumn = false, false, 'no'
  wo.foldmethod, wo.foldenable, wo.foldlevel = 'manual', true, 0
  wo.foldtext = "v:lua.require'nodecode.ui.transcript'.foldtext()"
  wo.fillchars = 'fold: ,eob: '
  if vim.w[win].nodecode_away ~= true then -- refolding moved text from under the view
    state.view:show_end({ win })
  end
end

--- The name of a new chat buffer: `nodecode://chat` unless another tab's
--- chat has it (a buffer of that name left by an earlier load is taken over).
---@param state nodecode.ChatState
---@return string
local function name_for(state)
  for tab, other in pairs(chats) do
    local b = other.buf
    if tab ~= state.tab and b and vim.api.nvim_buf_is_valid(b) then
      if vim.api.nvim_buf_get_name(b) == NAME then
        return NAME .. '/' .. state.tab
      end
    end
  end
  return NAME
end

--- The chat buffer of `state` (the current tab's), created (with the
--- session's history) when missing.
---@param state? nodecode.ChatState
---@return integer buf
local function chat_buf(state)
  state = state or chat_of()
  if state.buf and vim.api.nvim_buf_is_valid(state.buf) then
    return state.buf
  end
  local buf = require('nodecode.ui.buffers').named(name_for(state))
  vim.bo[buf].filetype = 'nodecode-chat'
  vim.bo[buf].undolevels = -1
  pcall(vim.treesitter.language.register, 'markdown', 'nodecode-chat')
  vim.schedule(function() -- after the window is drawn: loading its queries takes a while
    if vim.api.nvim_buf_is_valid(buf) then
      pcall(vim.treesitter.start, buf, 'markdown')
    end
  end)
  local stop = config().keymaps.stop
  if stop then
    vim.keymap.set('n', stop, M.stop, { buffer = buf, desc = 'nodecode: stop the turn' })
  end
  require('nodecode.keymaps').attach(buf, 'chat')
  state.buf, state.view = buf, Transcript.new(buf)
  vim.api.nvim_create_autocmd('BufWinEnter', {
    buffer = buf,
    callback = function()
      setup_win(state, vim.api.nvim_get_current_win())
    end,
  })
  -- Our own writes move a following window's cursor to the end too, so only
  -- the person leaves a cursor above it: that window stops following.
  vim.api.nvim_create_autocmd('CursorMoved', {
    buffer = buf,
    callback = function()
      local win = vim.api.nvim_get_current_win()
      vim.w[win].nodecode_away = vim.api.nvim_win_get_cursor(win)[1]
        < vim.api.nvim_buf_line_count(buf)
    end,
  })
  require('nodecode.ui.hints').empty_chat(buf) -- until the history's first part is drawn
  load_history(state)
  return buf
end

local SPLITS = { right = 'vertical botright', left = 'vertical topleft', below = 'botright' }

--- The window showing the chat in this tab; opened per chat.position if none.
---@return integer win, boolean opened
local function chat_win()
  local buf = chat_buf()
  local tab = vim.api.nvim_get_current_tabpage()
  local c = config().chat
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if vim.api.nvim_win_get_tabpage(win) == tab or c.position == 'tab' then
      return win, false -- ('tab': the chat's own tab, wherever it is)
    end
  end
  if c.position == 'tab' then
    vim.cmd('tabnew')
  elseif c.position ~= 'current' then
    vim.cmd(('%s %ssplit'):format(SPLITS[c.position], c.size > 0 and tostring(c.size) or ''))
  end
  vim.api.nvim_win_set_buf(0, buf)
  local win = vim.api.nvim_get_current_win()
  setup_win(chat_of(), win) -- BufWinEnter does not fire inside other autocmds (e.g. VimEnter)
  vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
  return win, true
end

-- Public ----------------------------------------------------------------

--- Show the chat; with `input`, also the input area, focused.
---@param opts? { input?: boolean }
---@return integer win
function M.open(opts)
  local win = chat_win()
  require('nodecode.ui.status').refresh()
  if opts and opts.input then
    require('nodecode.ui.input').open(win)
  end
  return win
end

--- Ask `text` in the pinned session; the reply streams into the chat. A
--- slash command (`/tree`) runs instead, sending nothing (nodecode.slash).
---@param text string
function M.ask(text)
  text = require('nodecode.slash').run(text)
  if not text then
    return
  end
  local state = chat_of()
  if state.job then
    error('nodecode: a turn is running — :NodecodeStop to stop it', 0)
  end
  text = require('nodecode.ask').expand(text) -- #buffer, #file:PATH
  M.show_for_ask()
  state.view:ask(text)
  state.view:reply_header()
  local ok, job = pcall(require('nodecode.rpc').call, 'ask', text)
  if not ok then
    state.view:done('failed', message().reason(job))
    message().caught(job)
    return
  end
  state.job, state.last_job = job, job
end

--- Show the chat for an ask, per chat.open_on_ask and chat.focus_on_ask:
--- the cursor stays in the window (and tab) the ask came from unless
--- focus_on_ask. A chat in the 'current' position is not put into that window
--- (it would take it over) unless focus_on_ask.
function M.show_for_ask()
  local c = config().chat
  local from, tab = vim.api.nvim_get_current_win(), vim.api.nvim_get_current_tabpage()
  local buf = chat_buf()
  local shown = vim.tbl_filter(function(w)
    return vim.api.nvim_win_get_tabpage(w) == tab
  end, vim.fn.win_findbuf(buf))[1]
  if not shown and (not c.open_on_ask or (c.position == 'current' and not c.focus_on_ask)) then
    return
  end
  local win = chat_win()
  if c.focus_on_ask then
    vim.api.nvim_set_current_win(win)
  elseif vim.api.nvim_win_is_valid(from) then
    vim.api.nvim_set_current_tabpage(tab)
    vim.api.nvim_set_current_win(from)
  end
end

-- :NodecodeToggle: ui/chat_toggle.lua.
require('nodecode.ui.chat_toggle').install(M, {
  buf = chat_buf,
  chat_of = chat_of,
  setup_win = setup_win,
})

--- Stop the running turn of this tab's chat (the chat then says it stopped).
function M.stop()
  local state = chat_of()
  if not state.job and require('nodecode.actions').stop_evict() then
    return -- an eviction's summary: its receipt says the plain stub stands
  end
  if not state.job then
    return message().info('nothing is running')
  end
  require('nodecode.rpc').notify('stop', state.job)
end

--- Show a line of the plugin's own in the chat (not part of the session);
--- with `apart`, a blank line first sets it off from what the chat holds.
---@param text string
---@param apart? boolean
function M.say(text, apart)
  local state = chat_of()
  chat_buf(state)
  if apart then
    state.view:paragraph()
  end
  state.view:say(text)
end

--- Show the session's history again (after an undo, a tree move, a session
--- switch) in this tab's chat. Left alone while a turn streams into it.
function M.reload()
  local state = chat_of()
  if not (state.buf and vim.api.nvim_buf_is_valid(state.buf)) or state.job then
    return
  end
  local buf = state.buf
  local away = {} -- windows the person moved away in keep their view
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if vim.w[win].nodecode_away then
      away[win] = vim.api.nvim_win_call(win, vim.fn.winsaveview)
    end
  end
  state.token = nil -- a history still arriving is the old one
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  vim.api.nvim_buf_clear_namespace(buf, vim.api.nvim_create_namespace('nodecode_transcript'), 0, -1)
  state.view = Transcript.new(buf)
  local ok, history = pcall(require('nodecode.rpc').call, 'messages')
  if not ok then
    return message().caught(history)
  end
  local all = Transcript.lines()
  all:history(history)
  state.view:prepend(all)
  require('nodecode.ui.hints').empty_chat(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    setup_win(state, win)
    if away[win] then
      vim.api.nvim_win_call(win, function()
        vim.fn.winrestview(away[win])
      end)
    end
  end
end

--- The job running in this tab's chat (or tabpage `tab`'s), if any.
---@param tab? integer
---@return integer?
function M.job(tab)
  local state = chats[tab or M.owner()]
  return state and state.job
end

--- The tabpage whose chat runs (or ran last) job `job`, if any.
---@param job integer
---@return integer?
function M.tab_of(job)
  for tab, state in pairs(chats) do
    if state.job == job or state.last_job == job then
      return tab
    end
  end
end

--- The chat buffer of tabpage `tab` (the current one), if it has one.
---@param tab? integer
---@return integer?
function M.buf(tab)
  local state = chats[tab or M.owner()]
  local b = state and state.buf
  return b and vim.api.nvim_buf_is_valid(b) and b or nil
end

--- Forget tabpage `tab`'s chat (the tab was closed): its buffer is wiped.
---@param tab integer
function M.forget(tab)
  local state = chats[tab]
  chats[tab] = nil
  if state and state.buf and vim.api.nvim_buf_is_valid(state.buf) then
    pcall(vim.api.nvim_buf_delete, state.buf, { force = true })
  end
end

--- The tabpages that have a chat.
---@return integer[]
function M.tabs()
  return vim.tbl_keys(chats)
end

--- Handle one event pushed by the host (kinds: see python/nodecode/host.py):
--- drawn in the chat whose ask started the job (none: its tab was closed).
---@param ev table
function M.on_event(ev)
  local tab = M.tab_of(ev.job)
  if not tab then
    return
  end
  local state = chats[tab]
  chat_buf(state)
  local view, kind = state.view, ev.kind
  if kind == 'text' then
    view:text(ev.text)
  elseif kind == 'thinking' then
    view:thinking(ev.text)
  elseif kind == 'call' then
    view:call_block(ev.seq, ev.code)
  elseif kind == 'result' then
    view:result_block(ev.seq, ev.text, ev.error == true)
    pcall(vim.cmd.checktime) -- the call may have changed files open in buffers
  elseif kind == 'retry' then
    view:quote('retry', ev.message)
  elseif kind == 'discard' then
    -- The chat only grows: say that the text above it does not count.
    view:quote('dropped', 'the attempt above was discarded')
  elseif kind == 'notice' then
    events.notice(view, ev)
  elseif kind == 'approve' then
    events.approve(ev, function()
      return state.view
    end, tab)
  elseif kind == 'request' and ev.state == 'finished' and ev.status ~= 'failed' then
    view:request_done(ev)
  elseif kind == 'done' then
    if state.job == ev.job then
      state.job = nil
    end
    local err = ev.error ~= vim.NIL and ev.error or nil
    view:done(ev.status, err)
    if ev.status == 'failed' then
      message().error('%s', err or 'the turn failed')
    end
  end
end

return M
