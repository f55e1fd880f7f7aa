-- A chat per tab (ui/chat.lua keeps each tabpage's chat): what follows the
-- tabs. Entering a tab runs what waited for it (an approval its turn asks)
-- and redraws its statusline and tree; closing one stops its running turn
-- (logged as stopped), wipes its chat and input area and tells the host to
-- forget it.

local M = {}

local api = vim.api

---@type table<integer, fun()[]> by tabpage: what waits until it is entered
local waiting = {}

--- Run `fn` when tabpage `tab` is next entered; the person is told once.
---@param tab integer
---@param fn fun()
function M.later(tab, fn)
  waiting[tab] = waiting[tab] or {}
  table.insert(waiting[tab], fn)
  if api.nvim_tabpage_is_valid(tab) then
    require('nodecode.message').info(
      'the turn in tab %d waits for your approval: go to tab %d',
      api.nvim_tabpage_get_number(tab),
      api.nvim_tabpage_get_number(tab)
    )
  end
end

--- A tab was entered: what waits for it (its chat's) runs now, and its
--- statusline and a tree shown there follow its session. Nothing is loaded
--- for it before a chat exists.
function M.entered()
  local chat = package.loaded['nodecode.ui.chat']
  if not chat then
    return
  end
  local tab = chat.owner()
  local fns = waiting[tab]
  waiting[tab] = nil
  for _, fn in ipairs(fns or {}) do
    fn()
  end
  require('nodecode.ui.status').refresh()
  local tree = package.loaded['nodecode.ui.tree'] -- a tree shown here: this tab's session
  if tree and require('nodecode.rpc').ready() then
    pcall(tree.refresh)
  end
end

--- A tab was closed: every chat whose tabpage is gone and which no other tab
--- shows (`chat.position = 'tab'` puts it in one) is forgotten, its buffers
--- wiped; then the host forgets the tabs gone (rpc.tabs_closed), stopping
--- their turns. (TabClosed fires before the tabpage is freed: called scheduled.)
function M.closed()
  local chat = package.loaded['nodecode.ui.chat']
  for _, tab in ipairs(chat and chat.tabs() or {}) do
    local b = chat.buf(tab)
    if not api.nvim_tabpage_is_valid(tab) and not (b and #vim.fn.win_findbuf(b) > 0) then
      waiting[tab] = nil
      chat.forget(tab)
      require('nodecode.ui.input').forget(tab)
      require('nodecode.ui.status').forget(tab)
    end
  end
  local rpc = package.loaded['nodecode.rpc']
  if rpc then
    rpc.tabs_closed()
  end
end

return M
