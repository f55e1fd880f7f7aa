-- Pickers behind one source shape (ui/float_picker.lua documents it):
-- telescope when installed (picker.backend = 'auto' or 'telescope'), else the
-- built-in floating picker. Three sources: recall (the log, or every session,
-- with open / insert (recall-entry N) / restore), removed messages (the
-- context buffer's restore) and sessions.

local M = {}

local api = vim.api

local function rpc()
  return require('nodecode.rpc')
end

local function keys()
  return require('nodecode.config').get().keymaps.picker
end

--- 'telescope' or 'builtin', per picker.backend and what is installed.
---@return 'telescope'|'builtin'
function M.backend()
  local want = require('nodecode.config').get().picker.backend
  if want ~= 'builtin' and pcall(require, 'telescope.pickers') then
    return 'telescope'
  end
  return 'builtin'
end

--- Show `source` in the configured picker.
---@param source nodecode.PickerSource
function M.pick(source)
  if M.backend() == 'telescope' then
    return require('nodecode.ui.telescope_picker').pick(source)
  end
  return require('nodecode.ui.float_picker').open(source, keys())
end

---@param text string
---@return string[]
local function split(text)
  return vim.split(text or '', '\n', { plain = true })
end

--- A picker title naming its toggle key and what the key switches to:
--- `recall: this session (text) · <C-t> every session`.
---@param title string
---@param key string|false
---@param other string
---@return string
function M.with_toggle(title, key, other)
  if type(key) ~= 'string' or key == '' then
    return title
  end
  return ('%s · %s %s'):format(title, key, other)
end

-- Recall ----------------------------------------------------------------

--- Open the whole entry in a scratch buffer, in a split.
---@param item table a recall row
local function open_entry(item)
  local text = rpc().recall_entry(item.seq, item.session)
  local name = ('nodecode://entry/%s/%d'):format(item.session or '', item.seq)
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    buf = api.nvim_create_buf(false, true)
    api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, split(text))
  vim.bo[buf].modifiable, vim.bo[buf].bufhidden = false, 'wipe'
  vim.bo[buf].filetype = 'nodecode-entry'
  vim.cmd('split')
  api.nvim_win_set_buf(0, buf)
  vim.keymap.set('n', 'q', '<cmd>close<cr>', { buffer = buf, nowait = true, desc = 'nodecode: close' })
end

--- Insert `text` at the cursor of window `win` (into the input area when
--- that window's buffer cannot be edited, like the chat).
---@param win integer
---@param text string
function M.insert_at(win, text)
  if not api.nvim_win_is_valid(win) then
    win = api.nvim_get_current_win()
  end
  local buf = api.nvim_win_get_buf(win)
  if not vim.bo[buf].modifiable or vim.bo[buf].readonly then
    local chat = require('nodecode.ui.chat')
    return require('nodecode.ui.input').open(chat.open(), text, true)
  end
  api.nvim_set_current_win(win)
  local row, col = unpack(api.nvim_win_get_cursor(win))
  api.nvim_buf_set_text(buf, row - 1, col, row - 1, col, { text })
  api.nvim_win_set_cursor(win, { row, col + #text })
end

--- Put the message of a recall row back into the context buffer.
---@param item table
local function restore(item)
  local message = require('nodecode.message')
  local info = rpc().info()
  if item.session and item.session ~= info.id then
    local why = 'seq %d is in session %s: only messages of this session can be restored'
    return message.warn(why, item.seq, item.session)
  end
  for _, m in ipairs(rpc().removed()) do
    if m.id == item.seq then
      return require('nodecode.ui.context').restore(m.id, m.role)
    end
  end
  message.warn('seq %d is not a removed message of this context (nothing to restore)', item.seq)
end

--- :NodecodeRecall [text] — this session's log (or, toggled, every session).
---@param query? string
---@return table? state of the built-in picker
function M.recall(query)
  local from = api.nvim_get_current_win()
  local mode = { everywhere = false }
  local guard = require('nodecode.actions').guard
  local k = keys()
  return M.pick({
    title = function()
      local title = mode.everywhere and 'recall: every session (words)' or 'recall: this session (text)'
      return M.with_toggle(title, k.toggle, mode.everywhere and 'this session' or 'every session')
    end,
    query = vim.trim(query or ''),
    items = function(q)
      return rpc().recall(q ~= '' and q or nil, mode.everywhere)
    end,
    text = function(it)
      return it.line
    end,
    preview = function(it)
      return split(rpc().recall_entry(it.seq, it.session))
    end,
    actions = {
      { name = 'open', key = k.open, fn = guard(open_entry) },
      { name = 'insert', key = k.insert, fn = guard(function(it)
        M.insert_at(from, ('(recall-entry %d)'):format(it.seq))
      end) },
      { name = 'restore', key = k.restore, fn = guard(restore) },
    },
    toggle = { key = k.toggle, desc = 'switch: this session / every session', fn = function()
      mode.everywhere = not mode.everywhere
    end },
  })
end

-- Removed messages and sessions -------------------------------------------

--- Pick one of the removed messages `items` ({id, role, first_line}).
---@param items table[]
---@param on_choice fun(item: table)
function M.removed(items, on_choice)
  return M.pick({
    title = 'restore a removed message',
    items = items,
    text = function(it)
      return ('%d %s · %s'):format(it.id, it.role, it.first_line or '')
    end,
    preview = function(it)
      return split(rpc().recall_entry(it.id))
    end,
    actions = { { name = 'restore', key = keys().open, fn = require('nodecode.actions').guard(on_choice) } },
  })
end

--- Pick a session to work in, or a new one.
---@param rows table[] rpc.sessions()
---@param on_choice fun(item: table) item.id is nil for a new session
function M.sessions(rows, on_choice)
  local items = { { id = nil, new = true } }
  vim.list_extend(items, rows)
  return M.pick({
    title = 'sessions',
    items = items,
    text = function(it)
      if it.new then
        return '+ new session'
      end
      local about = it.title ~= '' and it.title or it.first_ask
      return ('%s %s  %s  %d turn%s  %s'):format(it.pinned and '*' or ' ', it.id, it.created,
        it.turns, it.turns == 1 and '' or 's', about or '')
    end,
    preview = function(it)
      if it.new then
        return { 'Start a new session and work in it.' }
      end
      return {
        'session  ' .. it.id, 'parent   ' .. (it.parent ~= vim.NIL and it.parent or '-'),
        'created  ' .. it.created, 'turns    ' .. it.turns, 'title    ' .. (it.title or ''),
        '', 'first ask:', it.first_ask or '',
      }
    end,
    actions = { { name = 'use', key = keys().open, fn = require('nodecode.actions').guard(on_choice) } },
  })
end

return M
