-- The teardown behind require('nodecode').deactivate(), which lazy.nvim calls
-- on :Lazy reload (before it unloads lua/nodecode/* and re-sources plugin/):
-- stop the host and its turns, remove every autocommand nodecode made, and
-- close its floats, so that the next load starts clean. The nodecode://
-- buffers stay (windows keep showing them); the next load takes them over.

local M = {}

local api = vim.api

--- Delete every autocommand group nodecode made (`nodecode_*`), and the
--- group-less autocommands and keys on its buffers.
local function remove_autocmds()
  local groups = {}
  for _, au in ipairs(api.nvim_get_autocmds({})) do
    if au.group_name and au.group_name:find('^nodecode') then
      groups[au.group] = true
    end
  end
  for id in pairs(groups) do
    pcall(api.nvim_del_augroup_by_id, id)
  end
  for _, buf in ipairs(require('nodecode.ui.buffers').all()) do
    api.nvim_clear_autocmds({ buffer = buf })
  end
end

--- Close the built-in picker if it is open (its buffers wipe themselves).
local function close_pickers()
  local float = package.loaded['nodecode.ui.float_picker']
  if float and float.current then
    pcall(float.current.close)
  end
end

function M.run()
  close_pickers()
  require('nodecode.rpc').shutdown()
  remove_autocmds()
end

return M
