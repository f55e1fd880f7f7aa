-- Sessions you manage: a rename (:NodecodeSessionRename, the sessions picker's
-- rename key), a delete (the picker's delete key, after a confirmation) and
-- the automatic title the host makes after a session's first reply. The
-- title is the core's (nodecode.views.titles): the picker, the tree's
-- winbar and `nodecode sessions` show the same words.

local M = {}

local function rpc()
  return require('nodecode.rpc')
end

local function message()
  return require('nodecode.message')
end

--- What a session is called: its title, else its first ask ('' with neither).
---@param item table a row of rpc.call('sessions'), or rpc.call('info')
---@return string
function M.about(item)
  local t = item.title ~= nil and item.title ~= vim.NIL and item.title or ''
  return t ~= '' and t or (item.first_ask or '')
end
local about = M.about

--- Rename session `id` to `title`; without one, ask for it (vim.ui.input,
--- the current title to edit). An empty answer renames nothing.
---@param id string
---@param title? string
---@param current? string the title shown now
---@param after? fun() run once renamed (the picker opens again)
function M.rename(id, title, current, after)
  local apply = require('nodecode.actions').guard(function(text)
    if text == nil or vim.trim(text) == '' then
      return
    end
    local shown = rpc().call('rename_session', id, text)
    message().info('session %s: %s', id, shown)
    require('nodecode.ui.tree').refresh()
    if after then
      after()
    end
  end)
  if title and vim.trim(title) ~= '' then
    return apply(title)
  end
  vim.ui.input({ prompt = ('title of %s: '):format(id), default = current or '' }, apply)
end

--- :NodecodeSessionRename [title] — the session this Neovim works in.
---@param arg string
function M.rename_current(arg)
  local info = rpc().call('info') -- its title is the listing's (the host's session_title)
  M.rename(info.id, arg, about(info))
end

--- Delete the session of picker row `item` once the person confirms it. The
--- session this Neovim works in is replaced by a new one.
---@param item table
---@param after? fun() run after the answer (the picker opens again)
function M.delete(item, after)
  local turns = tonumber(item.turns) or 0
  local question = ('Delete session %s (%s, %d turn%s)?\n%s'):format(
    item.id,
    about(item) ~= '' and about(item) or 'untitled',
    turns,
    turns == 1 and '' or 's',
    'Its log leaves the store and recall for good.'
  )
  local answer = vim.fn.confirm(question, '&Delete\n&Keep', 2, 'Question')
  vim.cmd('redraw') -- the dialog's lines go, so no message after it waits for Enter
  if answer ~= 1 then
    message().info('session %s kept', item.id)
  else
    local done = rpc().call('delete_session', item.id)
    message().info('deleted session %s: %d events', item.id, done.events)
    if done.pinned then
      require('nodecode.actions').use_session(nil)
    end
  end
  if after then
    after()
  end
end

--- The sessions picker's rename and delete actions.
---@param keys table keymaps.picker
---@param again fun() open the picker again
---@return table[]
function M.picker_actions(keys, again)
  local guard = require('nodecode.actions').guard
  local function on_session(fn)
    return guard(function(it)
      if it.new then
        return message().warn('"+ new session" is not a session yet: choose it to make one')
      end
      fn(it)
    end)
  end
  return {
    {
      name = 'rename',
      key = keys.rename,
      desc = 'give the session a title',
      extra = true,
      fn = on_session(function(it)
        M.rename(it.id, nil, about(it), again)
      end),
    },
    {
      name = 'delete',
      key = keys.delete,
      desc = 'delete the session (asks first)',
      extra = true,
      fn = on_session(function(it)
        M.delete(it, again)
      end),
    },
  }
end

--- The host's `title` event: a session's automatic title, made or failed.
---@param ev table {session, title, failed, line}
function M.titled(ev)
  if ev.failed ~= nil and ev.failed ~= vim.NIL then
    message().warn('%s', ev.line)
  end
  require('nodecode.ui.tree').refresh()
end

return M
