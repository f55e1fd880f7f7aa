-- Opening and following the context buffer: :NodecodeContext asks the host
-- for an export and opens context.txt when it is done (per context.position);
-- after a turn the buffer is re-exported in place, or follows the session now
-- pinned. The buffer's state lives in init.lua, which delegates here.

local M = {}

local api = vim.api

local function ctx()
  return require('nodecode.ui.context')
end

local function rpc()
  return require('nodecode.rpc')
end

local function message()
  return require('nodecode.message')
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
    ctx()._following[buf] = true -- attached by the caller
    api.nvim_win_set_buf(win, buf)
    unfold(buf)
    pcall(api.nvim_buf_call, buf, function()
      vim.cmd('silent edit!')
    end)
    ctx()._following[buf] = nil
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
---@type table<integer, integer> buffer → the export its follow waits for (the newest asked)
local refreshing = {}
---@type integer? the tabpage that asked for it: the buffer edits its session
local opening_tab = nil

--- :NodecodeContext — export, then open context.txt with folds and marks.
--- The host exports on a worker thread; the buffer opens when it is done
--- (M.opened), so Neovim never waits for an export of a long session.
function M.open()
  local pinned = rpc().call('info').id
  for buf, st in pairs(ctx()._states) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].modified and st.session == pinned then
      vim.cmd('drop ' .. vim.fn.fnameescape(api.nvim_buf_get_name(buf)))
      message().warn('%s', require('nodecode.ui.context.write').unsaved_words(st))
      return
    end
  end
  last_token = last_token + 1
  opening, opening_tab = last_token, rpc().tab()
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
  for buf, token in pairs(refreshing) do
    if token == ev.token then
      refreshing[buf] = nil
      return M.refreshed(buf, ev)
    end
  end
  if ev.token ~= opening then
    return -- a later :NodecodeContext asked for another
  end
  opening = nil
  if type(ev.error) == 'string' then
    return message().error('%s', ev.error)
  end
  local data = ev.value
  local buf = load(data, M.target_window())
  ctx().attach(buf, data, opening_tab)
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
  ctx()._following[buf] = true
  unfold(buf)
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd('silent edit!')
  end)
  ctx()._following[buf] = nil
  if not ok then
    error(err, 0)
  end
  ctx().attach(buf, data)
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
  local st = ctx()._states[old]
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
  ctx().attach(buf, data, ctx().tab_of(old))
  if api.nvim_buf_is_valid(old) and old ~= buf then
    api.nvim_buf_delete(old, {})
  end
  message().info('the context buffer follows session %s now', pinned)
end

--- The context buffer tabpage `tab` opened, of whichever session, if any.
---@param tab integer
---@return integer?
local function opened_by(tab)
  for buf in pairs(ctx()._states) do
    if api.nvim_buf_is_loaded(buf) and ctx().tab_of(buf) == tab then
      return buf
    end
  end
end

--- Re-export into the loaded, unmodified context buffer of the session of
--- tabpage `tab` (rpc.tab(); after a turn, an undo, an eviction…); a
--- modified one is left alone. The one that tab opened of another session
--- follows its session now (M.switch); other tabs' buffers are theirs.
---@param tab? integer
function M.follow(tab)
  tab = tab or rpc().tab()
  if ctx().find() then
    rpc().within(tab, M.follow_here, tab)
  end
end

local UNSAVED =
  'the context changed; the context buffer has unsaved changes, so it stays on its export'

---@param tab integer the current tab, or the one rpc.within acts for
function M.follow_here(tab)
  local pinned = rpc().call('info').id
  local buf = ctx().find(pinned)
  if not buf then
    local mine = opened_by(tab)
    return mine and M.switch(mine, pinned)
  end
  if vim.bo[buf].modified then
    return message().warn(UNSAVED)
  end
  -- Exported on the host's worker (M.refreshed reloads): at 10,000 messages
  -- the export took 110 ms, which Neovim waited for after every turn.
  last_token = last_token + 1
  refreshing[buf] = last_token
  rpc().notify('context_open', last_token)
end

--- The export a follow of `buf` asked for arrived: reload the buffer as it,
--- unless it was edited (or closed) meanwhile.
---@param buf integer
---@param ev { token: integer, value?: table, error?: string }
function M.refreshed(buf, ev)
  if type(ev.error) == 'string' then
    return message().error('%s', ev.error)
  end
  local st = ctx()._states[buf]
  if not (st and api.nvim_buf_is_loaded(buf)) then
    return
  end
  if vim.bo[buf].modified then
    return message().warn(UNSAVED)
  end
  if ev.value.path ~= st.path then
    return -- (cannot happen: the pinned session's context has one path)
  end
  local ok, err = pcall(reload_as, buf, ev.value)
  if not ok then
    message().caught(err)
  end
end

return M
