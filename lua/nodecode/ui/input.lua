-- The input area `nodecode://input`: a small split under the chat whose
-- whole (multi-line) text is sent as one ask.

local M = {}

local NAME = 'nodecode://input'

---@type integer?
local buf

--- Send the whole input as an ask, then clear it.
function M.send()
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local text = vim.trim(table.concat(lines, '\n'))
  if text == '' then
    return require('nodecode.message').warn('nothing to send')
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  local ok, err = pcall(require('nodecode.ui.chat').ask, text)
  if not ok then
    require('nodecode.message').error('%s', (tostring(err):gsub('^nodecode: ', '')))
  end
end

---@return integer
local function input_buf()
  if buf and vim.api.nvim_buf_is_valid(buf) then
    return buf
  end
  buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, NAME)
  vim.bo[buf].filetype = 'nodecode-input'
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
    vim.keymap.set('n', keys.stop, require('nodecode.ui.chat').stop, { buffer = buf, desc = 'nodecode: stop the turn' })
  end
  return buf
end

--- Show the input area under window `chat` and start typing in it.
---@param chat integer
function M.open(chat)
  local b = input_buf()
  local win = vim.fn.bufwinid(b)
  if win == -1 then
    local height = require('nodecode.config').get().chat.input_height
    win = vim.api.nvim_open_win(b, true, { split = 'below', win = chat, height = height })
    vim.wo[win][0].winfixheight = true
  end
  vim.api.nvim_set_current_win(win)
  vim.cmd('startinsert')
end

return M
