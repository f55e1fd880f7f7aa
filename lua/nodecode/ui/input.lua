-- The input area `nodecode://input`: a small split under the chat whose
-- whole (multi-line) text is sent as one ask. Each tab's chat has its own
-- (another tab's is `nodecode://input/TAB`), sending to that tab's session.

local M = {}

local NAME = 'nodecode://input'

--- The tabpage whose chat the current tab works with (ui/chat.lua M.owner).
---@return integer
local function owner()
  return require('nodecode.rpc').tab()
end

---@type table<integer, integer> by tabpage: its input buffer
local bufs = {}
---@type table<integer, string> by tabpage: the undone ask its input holds, as undo put it there
local undones = {}

--- This tab's input buffer, if any.
---@return integer?
local function this_buf()
  local b = bufs[owner()]
  return b and vim.api.nvim_buf_is_valid(b) and b or nil
end

--- The input's whole text.
---@return string
local function text_of(b)
  return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
end

--- Send the whole input as an ask (or run it: a slash command), clearing it
--- first: `/undo` puts the undone ask back here.
function M.send()
  local tab = owner()
  local buf = assert(this_buf(), 'nodecode: this tab has no input area')
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local text = vim.trim(table.concat(lines, '\n'))
  if text == '' then
    return require('nodecode.message').warn('nothing to send')
  end
  local b, was = buf, undones[tab]
  vim.api.nvim_buf_set_lines(b, 0, -1, false, {})
  undones[tab] = nil
  local ok, err = pcall(require('nodecode.ui.chat').ask, text)
  if not ok then -- (a bad #file:, a running turn, an unknown /command) the input keeps the text
    if vim.api.nvim_buf_is_valid(b) and vim.trim(text_of(b)) == '' then
      vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
      undones[tab] = was
    end
    return require('nodecode.message').caught(err)
  end
end

local placeholder_ns = vim.api.nvim_create_namespace('nodecode_input_placeholder')

--- The dimmed line an empty input shows: how to send, and what it takes.
---@return string
function M.placeholder()
  local keys = require('nodecode.config').get().keymaps
  local send = {}
  if keys.send then
    send[#send + 1] = keys.send .. ' sends'
  end
  if keys.send_insert then
    send[#send + 1] = keys.send_insert .. ' in insert mode'
  end
  return ('Ask here · %s · #file:PATH, #buffer · /help'):format(table.concat(send, ', '))
end

--- Show the placeholder while `b` is empty, and only then.
---@param b integer
local function placeholder(b)
  vim.api.nvim_buf_clear_namespace(b, placeholder_ns, 0, -1)
  if
    vim.api.nvim_buf_line_count(b) == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ''
  then
    vim.api.nvim_buf_set_extmark(b, placeholder_ns, 0, 0, {
      virt_text = { { M.placeholder(), 'Comment' } },
      virt_text_pos = 'overlay',
    })
  end
end

--- The placeholder shown now, if any (tests look at it).
---@return string?
function M.shown_placeholder()
  local buf = this_buf()
  if not buf then
    return nil
  end
  local m = vim.api.nvim_buf_get_extmarks(buf, placeholder_ns, 0, -1, { details = true })[1]
  return m and m[4].virt_text[1][1] or nil
end

---@return integer
local function input_buf()
  local buf = this_buf()
  if buf then
    return buf
  end
  local tab, name = owner(), NAME
  for t, b in pairs(bufs) do
    if t ~= tab and vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b) == NAME then
      name = NAME .. '/' .. tab -- another tab's chat has the first name
    end
  end
  buf = require('nodecode.ui.buffers').named(name)
  bufs[tab] = buf
  vim.bo[buf].filetype = 'nodecode-input'
  vim.bo[buf].omnifunc = "v:lua.require'nodecode.ask'.omnifunc" -- #buffer, #file:PATH, /NAME
  vim.api.nvim_create_autocmd('TextChangedI', {
    buffer = buf,
    callback = function()
      require('nodecode.slash').offer()
    end,
  })
  local b = buf
  vim.api.nvim_buf_attach(b, false, { -- typed or set by us (send, undo): either way
    on_lines = function()
      vim.schedule(function()
        if vim.api.nvim_buf_is_valid(b) then
          placeholder(b)
        end
      end)
    end,
  })
  placeholder(b)
  local keys = require('nodecode.config').get().keymaps
  if keys.send then
    vim.keymap.set('n', keys.send, M.send, { buffer = buf, desc = 'nodecode: send the ask' })
  end
  if keys.send_insert then
    vim.keymap.set('i', keys.send_insert, function()
      vim.cmd('stopinsert')
      M.send()
    end, { buffer = buf, desc = 'nodecode: send the ask' })
  end
  if keys.stop then
    vim.keymap.set(
      'n',
      keys.stop,
      require('nodecode.ui.chat').stop,
      { buffer = buf, desc = 'nodecode: stop the turn' }
    )
  end
  require('nodecode.keymaps').attach(buf, 'chat')
  return buf
end

--- The input area's window under window `chat`, opened (not entered) if missing.
---@param b integer
---@param chat integer
---@return integer win
local function shown_under(b, chat)
  local win = vim.fn.bufwinid(b)
  if win == -1 then
    local height = require('nodecode.config').get().chat.input_height
    win = vim.api.nvim_open_win(b, false, { split = 'below', win = chat, height = height })
    vim.wo[win][0].winfixheight = true
  end
  return win
end

--- Show the input area under window `chat` and start typing in it; with
--- `text`, the input becomes that text (or gets it added after a space, with
--- `append`), the cursor at its end.
---@param chat integer
---@param text? string
---@param append? boolean
function M.open(chat, text, append)
  local b = input_buf()
  if text then
    local lines = vim.split(text, '\n', { plain = true })
    local old = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    if append and not (#old == 1 and old[1] == '') then
      local last = old[#old]
      if last ~= '' and not last:match('%s$') then
        lines[1] = ' ' .. lines[1]
      end
      vim.api.nvim_buf_set_text(b, #old - 1, #last, #old - 1, #last, lines)
    else
      vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
    end
  end
  local win = shown_under(b, chat)
  vim.api.nvim_set_current_win(win)
  if text then
    local n = vim.api.nvim_buf_line_count(b)
    vim.api.nvim_win_set_cursor(win, { n, #vim.api.nvim_buf_get_lines(b, n - 1, n, true)[1] })
    vim.cmd('startinsert!')
  else
    vim.cmd('startinsert')
  end
end

--- Put the undone ask `text` into the input area under window `chat`, shown
--- but not entered: the cursor and mode stay where the person is. An input
--- holding the person's own draft is left alone (false is returned).
---@param chat integer
---@param text string
---@return boolean put
function M.put_undone(chat, text)
  local b, tab = input_buf(), owner()
  local now = text_of(b)
  if vim.trim(now) ~= '' and now ~= undones[tab] then
    return false
  end
  vim.api.nvim_buf_set_lines(b, 0, -1, false, vim.split(text, '\n', { plain = true }))
  undones[tab] = text_of(b)
  local win = shown_under(b, chat)
  local n = vim.api.nvim_buf_line_count(b)
  vim.api.nvim_win_set_cursor(win, { n, #vim.api.nvim_buf_get_lines(b, n - 1, n, true)[1] })
  return true
end

--- Clear this tab's undone ask (a redo brought its turn back, or another
--- session is pinned), unless the person has edited it into an ask of their own.
function M.clear_undone()
  local tab, buf = owner(), this_buf()
  local undone = undones[tab]
  if undone and buf and text_of(buf) == undone then
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  end
  undones[tab] = nil
end

--- Forget tabpage `tab`'s input area (the tab was closed): its buffer is wiped.
---@param tab integer
function M.forget(tab)
  local b = bufs[tab]
  bufs[tab], undones[tab] = nil, nil
  if b and vim.api.nvim_buf_is_valid(b) then
    pcall(vim.api.nvim_buf_delete, b, { force = true })
  end
end

return M
