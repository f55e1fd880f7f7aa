-- Restoring a removed message into the context buffer: its header goes back
-- at its place, and `:w` takes it (the picker's restore action, the buffer's key).

local M = {}

local api = vim.api

local function context()
  return require('nodecode.ui.context')
end

local function view()
  return require('nodecode.ui.context.view')
end

local function rpc()
  return require('nodecode.rpc')
end

local function message()
  return require('nodecode.message')
end

--- Insert the restore header of message `id` into `buf` at its place
--- (before the first block with a higher ID); returns its line.
---@param buf integer
---@param id integer
---@param role string
---@return integer lnum
function M.insert_header(buf, id, role)
  local st = assert(context().state(buf), 'not a context buffer')
  st.blocks = view().scan(buf, st)
  local at = api.nvim_buf_line_count(buf) + 1
  for _, b in ipairs(st.blocks) do
    if b.id == id then
      error(('nodecode: message %d is in the buffer already (line %d)'):format(id, b.line), 0)
    end
    if b.id > id then
      at = b.line
      break
    end
  end
  local header = ('[[m:%s %d %s]]'):format(st.nonce, id, role)
  api.nvim_buf_set_lines(buf, at - 1, at - 1, false, { header })
  view().refresh(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    api.nvim_win_set_cursor(win, { at, 0 })
  end
  return at
end

--- Restore message `id` into the open context buffer (or say how to).
---@param id integer
---@param role string
function M.restore(id, role)
  local buf = context().find()
  if not buf then
    return message().info(
      'open the context buffer (:NodecodeContext) first, then restore message %d',
      id
    )
  end
  local lnum = M.insert_header(buf, id, role)
  -- `:w` is what comes next: it must reach this buffer, not the chat the
  -- picker was opened from.
  local win = vim.fn.win_findbuf(buf)[1]
  if not win then
    win = context().target_window()
    api.nvim_win_set_buf(win, buf)
    api.nvim_win_set_cursor(win, { lnum, 0 })
  end
  api.nvim_set_current_win(win)
  vim.cmd('stopinsert')
  message().info('message %d goes back into the context at line %d: :w to save the edit', id, lnum)
end

--- The restore action: pick a removed message, insert its header.
---@param buf? integer
function M.pick_removed(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local items = rpc().call('removed')
  if #items == 0 then
    return message().info('nothing to restore: every message of the path is in the context')
  end
  require('nodecode.ui.picker').removed(items, function(item)
    M.insert_header(buf, item.id, item.role)
  end)
end

return M
