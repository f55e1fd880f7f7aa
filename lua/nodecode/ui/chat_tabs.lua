-- A chat per tab (ui/chat.lua keeps each tabpage's chat): what follows the
-- tabs. Entering a tab runs what waited for it (an approval its turn asks)
-- and redraws its statusline and tree; closing one stops its running turn
-- (logged as stopped), wipes its chat and input area and tells the host to
-- forget it.

local M = {}

local api = vim.api

---@type table<integer, fun()[]> by tabpage: what waits until it is entered
local waiting = {}
local watching = false

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

--- What waits for the current tab (its chat's), run now.
local function entered()
  local tab = require('nodecode.ui.chat').owner()
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

--- Forget every chat whose tabpage is gone and which no other tab shows
--- (`chat.position = 'tab'` puts it in one): its turn stops, its buffers go.
---@param chat table the chat module
local function closed(chat)
  for _, tab in ipairs(chat.tabs()) do
    local b = chat.buf(tab)
    if not api.nvim_tabpage_is_valid(tab) and not (b and #vim.fn.win_findbuf(b) > 0) then
      waiting[tab] = nil
      chat.forget(tab)
      require('nodecode.ui.input').forget(tab)
      require('nodecode.ui.status').forget(tab)
      local rpc = require('nodecode.rpc')
      if rpc.running() then
        pcall(rpc.notify, 'close_tab', tab)
      end
    end
  end
end

--- Follow the tabs from the first chat on (once).
---@param chat table the chat module
function M.watch(chat)
  if watching then
    return
  end
  watching = true
  local group = api.nvim_create_augroup('nodecode_tabs', { clear = true })
  api.nvim_create_autocmd('TabEnter', { group = group, callback = entered })
  api.nvim_create_autocmd('TabClosed', {
    group = group,
    callback = function() -- (the tabpage is freed after its TabClosed)
      vim.schedule(function()
        closed(chat)
      end)
    end,
  })
end

return M
