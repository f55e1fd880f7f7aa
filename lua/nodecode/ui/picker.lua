-- Pickers behind one source shape (ui/float_picker.lua documents it). The
-- backend is picker.backend, or with 'auto' the first installed of M.ORDER,
-- else the built-in floating picker; 'select' sends the simple choices
-- (a fixed list with one action) to vim.ui.select. Three sources: recall (the
-- log, or every session, with open / insert (recall-entry N) / restore, and a
-- key that shows the export and request rows it hides by default), removed
-- messages (the context buffer's restore) and sessions (use, rename, delete).

local M = {}

local api = vim.api

local function rpc()
  return require('nodecode.rpc')
end

local function keys()
  return require('nodecode.config').get().keymaps.picker
end

local backends = require('nodecode.ui.picker_backends')

-- (in picker_backends.lua; the fields here are the same tables and functions)
M.BACKENDS = backends.BACKENDS
M.ORDER = backends.ORDER
M.unusable = backends.unusable
M.backend = backends.backend

--- A fixed list with one action (besides `extra` ones, which vim.ui.select
--- has no keys for: the sessions picker's rename and delete): vim.ui.select
--- can show it.
---@param source nodecode.PickerSource
local function simple(source)
  local main = vim.tbl_filter(function(a)
    return not a.extra
  end, source.actions)
  return type(source.items) == 'table' and #main == 1 and not source.toggle
end

---@param source nodecode.PickerSource
local function ui_select(source)
  local title = type(source.title) == 'function' and source.title() or source.title
  vim.ui.select(
    source.items,
    { prompt = title, format_item = source.text, kind = 'nodecode' },
    function(item)
      if item then
        source.actions[1].fn(item)
      end
    end
  )
end

--- Show `source` in the configured picker.
---@param source nodecode.PickerSource
---@param opts? table the backend's own options (telescope: from :Telescope nodecode …)
function M.pick(source, opts)
  local name = M.backend()
  if name == 'select' and simple(source) then
    return ui_select(source)
  elseif name == 'select' or name == 'builtin' then
    return require('nodecode.ui.float_picker').open(source, keys())
  end
  -- A backend that fails half-way leaves its windows open: close the ones it
  -- opened, remember why (:checkhealth says it) and use the built-in picker.
  local before = {} ---@type table<integer, boolean>
  for _, w in ipairs(api.nvim_list_wins()) do
    before[w] = true
  end
  local ok, err = pcall(function()
    return require(M.BACKENDS[name].module).pick(source, opts)
  end)
  if ok then
    return
  end
  for _, w in ipairs(api.nvim_list_wins()) do
    if not before[w] and api.nvim_win_is_valid(w) then
      pcall(api.nvim_win_close, w, true)
    end
  end
  local why = ('%s failed to open: %s'):format(
    M.BACKENDS[name].what,
    vim.split(require('nodecode.message').reason(err), '\n', { plain = true })[1]
  )
  backends.mark_broken(name, why)
  require('nodecode.message').warn('%s: using the built-in picker', why)
  return require('nodecode.ui.float_picker').open(source, keys())
end

---@param text string
---@return string[]
local function split(text)
  return vim.split(text or '', '\n', { plain = true })
end

--- The key hints of a source that has them: `<M-e> this / every session`,
--- shown where each backend has room (source.hints).
---@param parts (string|false)[] each `KEY WHAT` part; false: its key is disabled
---@return string[]
function M.key_hints(parts)
  return vim.tbl_filter(function(p)
    return type(p) == 'string'
  end, parts)
end

-- Recall ----------------------------------------------------------------

--- Open the whole entry in a scratch buffer, in a split.
---@param item table a recall row
local function open_entry(item)
  local text = rpc().call('recall_entry', item.seq, item.session)
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
  vim.keymap.set(
    'n',
    'q',
    '<cmd>close<cr>',
    { buffer = buf, nowait = true, desc = 'nodecode: close' }
  )
end

--- Insert `text` after the cursor of window `win`, a space between it and
--- the text around it (into the input area when that window's buffer
--- cannot be edited, like the chat).
---@param win integer
---@param text string
---@param pos? integer[] (1,0)-based cursor to insert at: the window's when
---  the picker opened (closing a picker from insert mode moves the cursor)
function M.insert_at(win, text, pos)
  if not api.nvim_win_is_valid(win) then
    win = api.nvim_get_current_win()
  end
  local buf = api.nvim_win_get_buf(win)
  if not vim.bo[buf].modifiable or vim.bo[buf].readonly then
    local chat = require('nodecode.ui.chat')
    return require('nodecode.ui.input').open(chat.open(), text, true)
  end
  api.nvim_set_current_win(win)
  if pos then
    pcall(api.nvim_win_set_cursor, win, pos)
  end
  local row, col = unpack(api.nvim_win_get_cursor(win))
  local line = api.nvim_buf_get_lines(buf, row - 1, row, true)[1]
  -- after the cursor's character
  local at = line == '' and 0 or col + #vim.fn.strcharpart(line:sub(col + 1), 0, 1)
  local before, after = line:sub(at, at), line:sub(at + 1, at + 1)
  local put = (before:match('^%S$') and ' ' or '') .. text .. (after:match('^%S$') and ' ' or '')
  api.nvim_buf_set_text(buf, row - 1, at, row - 1, at, { put })
  api.nvim_win_set_cursor(win, { row, at + #put - 1 })
end

--- Put the message of a recall row back into the context buffer.
---@param item table
local function restore(item)
  local message = require('nodecode.message')
  local info = rpc().call('info')
  if item.session and item.session ~= info.id then
    local why = 'seq %d is in session %s: only messages of this session can be restored'
    return message.warn(why, item.seq, item.session)
  end
  for _, m in ipairs(rpc().call('removed')) do
    if m.id == item.seq then
      return require('nodecode.ui.context.restore').restore(m.id, m.role)
    end
  end
  message.warn('seq %d is not a removed message of this context (nothing to restore)', item.seq)
end

--- The row standing for log rows left out: choosing it (any action) shows them.
---@param key string|false
---@return table
local function hidden_row(key)
  local how = type(key) == 'string' and key ~= '' and (key .. ' shows them')
    or 'keymaps.picker.kinds shows them'
  return { hidden = true, line = ('(only hidden export and request rows match: %s)'):format(how) }
end

--- :NodecodeRecall [text] — this session's log (or, toggled, every session).
--- The log's export and request rows are left out until the kinds key.
---@param query? string
---@param opts? table the backend's own options
---@param start? { everywhere?: boolean, every_kind?: boolean, from?: integer, cursor?: integer[] }
---  the mode it opens in, and (reopened by the kinds key) the window it came from
---@return table? state of the built-in picker
function M.recall(query, opts, start)
  start = start or {}
  local from = start.from or api.nvim_get_current_win()
  local cursor = start.cursor or api.nvim_win_get_cursor(from)
  local mode = { everywhere = start.everywhere == true, every_kind = start.every_kind == true }
  local last = vim.trim(query or '') -- the query the source was last asked
  local guard = require('nodecode.actions').guard
  local k = keys()
  --- Open again with the export and request rows shown (or hidden again).
  local function other_kinds()
    M.recall(last, opts, {
      everywhere = mode.everywhere,
      every_kind = not mode.every_kind,
      from = from,
      cursor = cursor,
    })
  end
  --- `fn` for a row of the log; the hidden-rows row shows them instead.
  local function on_row(fn)
    return guard(function(it)
      if it.hidden then
        return other_kinds()
      end
      fn(it)
    end)
  end
  return M.pick({
    -- Short enough to show whole at 80 columns in every backend; the keys
    -- are in `hints`.
    title = function()
      if mode.everywhere then
        return 'recall: every session'
      end
      return mode.every_kind and 'recall: this session, every kind' or 'recall: this session'
    end,
    hints = M.key_hints({
      type(k.toggle) == 'string' and k.toggle ~= '' and (k.toggle .. ' this / every session'),
      type(k.kinds) == 'string' and k.kinds ~= '' and (k.kinds .. ' exports and requests'),
    }),
    query = last,
    items = function(q)
      last = q
      local rows = rpc().call('recall', q ~= '' and q or nil, mode.everywhere, mode.every_kind)
      if
        #rows == 0
        and not mode.everywhere
        and not mode.every_kind
        and #rpc().call('recall', q ~= '' and q or nil, false, true) > 0
      then
        return { hidden_row(k.kinds) } -- only hidden rows match: say how to see them
      end
      return rows
    end,
    text = function(it)
      return it.line
    end,
    preview = function(it)
      if it.hidden then
        return { it.line }
      end
      return split(rpc().call('recall_entry', it.seq, it.session))
    end,
    actions = {
      { name = 'open', key = k.open, fn = on_row(open_entry) },
      {
        name = 'insert',
        key = k.insert,
        fn = on_row(function(it)
          M.insert_at(from, ('(recall-entry %d)'):format(it.seq), cursor)
        end),
      },
      { name = 'restore', key = k.restore, fn = on_row(restore) },
      {
        name = 'kinds',
        key = k.kinds,
        desc = 'show or hide export and request rows',
        fn = guard(other_kinds),
      },
    },
    toggle = {
      key = k.toggle,
      desc = 'switch: this session / every session',
      fn = function()
        mode.everywhere = not mode.everywhere
      end,
    },
  }, opts)
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
      return split(rpc().call('recall_entry', it.id))
    end,
    actions = {
      { name = 'restore', key = keys().open, fn = require('nodecode.actions').guard(on_choice) },
    },
  })
end

--- Pick a session to work in, or a new one. The sessions come first (the
--- current one at the top, so <CR> at once stays in it), "+ new session"
--- last: a new, empty session is never one key away.
---@param rows table[] rpc.call('sessions')
---@param on_choice fun(item: table) item.id is nil for a new session
---@param opts? table the backend's own options
function M.sessions(rows, on_choice, opts)
  local items = vim.tbl_filter(function(r)
    return r.pinned == true
  end, rows)
  vim.list_extend(
    items,
    vim.tbl_filter(function(r)
      return r.pinned ~= true
    end, rows)
  )
  items[#items + 1] = { id = nil, new = true }
  return M.pick({
    title = 'sessions',
    items = items,
    text = function(it)
      if it.new then
        return '+ new session'
      end
      local about = require('nodecode.ui.sessions').about(it)
      local tab = type(it.tab) == 'number' and vim.api.nvim_tabpage_is_valid(it.tab) and it.tab
      return ('%s %s  %s  %d turn%s  %s%s'):format(
        it.pinned and '*' or ' ',
        it.id,
        it.created,
        it.turns,
        it.turns == 1 and '' or 's',
        about,
        tab and ('  (tab %d)'):format(vim.api.nvim_tabpage_get_number(tab)) or ''
      )
    end,
    preview = function(it)
      if it.new then
        return { 'Start a new session and work in it.' }
      end
      return {
        'session  ' .. it.id,
        'parent   ' .. (it.parent ~= vim.NIL and it.parent or '-'),
        'created  ' .. it.created,
        'turns    ' .. it.turns,
        'title    ' .. (it.title or ''),
        '',
        'first ask:',
        it.first_ask or '',
      }
    end,
    actions = {
      { name = 'use', key = keys().open, fn = require('nodecode.actions').guard(on_choice) },
      -- A session's rename and delete (ui/sessions.lua), then the picker again.
      unpack(require('nodecode.ui.sessions').picker_actions(keys(), function()
        require('nodecode.actions').sessions('', opts)
      end)),
    },
  }, opts)
end

return M
