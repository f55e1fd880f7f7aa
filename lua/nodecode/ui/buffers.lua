-- nodecode's named scratch buffers (`nodecode://chat`, `nodecode://tree`, …).
-- A buffer of that name left by an earlier load of the plugin (a :Lazy
-- reload) is taken over, emptied of what the old load put on it, instead of
-- failing with E95 on a second buffer of the same name.

local M = {}

local api = vim.api

--- The buffer whose name is exactly `name` (bufnr() would take it as a pattern).
---@param name string
---@return integer?
function M.find(name)
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_get_name(b) == name then
      return b
    end
  end
end

--- Take away what nodecode put on `buf`: its autocommands outside a group
--- (grouped ones go with their group), its keys, marks and text.
---@param buf integer
function M.reset(buf)
  vim.fn.bufload(buf)
  api.nvim_clear_autocmds({ buffer = buf })
  for _, mode in ipairs({ 'n', 'i', 'v', 'x', 'o' }) do
    for _, map in ipairs(api.nvim_buf_get_keymap(buf, mode)) do
      if (map.desc or ''):find('^nodecode') then
        pcall(api.nvim_buf_del_keymap, buf, mode, map.lhs)
      end
    end
  end
  for _, ns in pairs(api.nvim_get_namespaces()) do
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  end
  vim.bo[buf].modifiable, vim.bo[buf].readonly = true, false
  api.nvim_buf_set_lines(buf, 0, -1, false, {})
end

--- A scratch buffer named `name`: the one already there (reset), or a new one.
---@param name string
---@return integer buf
function M.named(name)
  local buf = M.find(name)
  if buf then
    M.reset(buf)
    return buf
  end
  buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_name(buf, name)
  return buf
end

--- Every buffer nodecode made (a `nodecode://` name).
---@return integer[]
function M.all()
  return vim.tbl_filter(function(b)
    return vim.startswith(api.nvim_buf_get_name(b), 'nodecode://')
  end, api.nvim_list_bufs())
end

return M
