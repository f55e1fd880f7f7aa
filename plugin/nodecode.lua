-- nodecode: commands, and the remote plugin registered on its own host.
-- Nothing heavy loads here: modules are required inside callbacks, and the
-- host process starts on the first remote call.

if vim.g.loaded_nodecode then
  return
end
vim.g.loaded_nodecode = 1

if vim.fn.has('nvim-0.10') == 0 then
  vim.api.nvim_echo({ { 'nodecode needs Neovim 0.10 or newer', 'WarningMsg' } }, true, {})
  return
end

local root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h')

-- A host of our own named 'nodecode' (not the shared 'python3' one): started
-- from the plugin's .venv by require('nodecode.rpc').start_host, so neither
-- g:python3_host_prog nor :UpdateRemotePlugins is involved. The factory must
-- be a Vim Funcref (a Lua function passed through vim.fn arrives as v:null).
vim.cmd([[
function! NodecodeHostFactory(host) abort
  return v:lua.require'nodecode.rpc'.start_host(a:host)
endfunction
call remote#host#Register('nodecode', '*', function('NodecodeHostFactory'))
]])

-- Registering defines the remote functions as stubs that start the host on
-- first use (again after a :Lazy reload, whose deactivate stopped the host).
require('nodecode.rpc').register(vim.fn.resolve(root .. '/rplugin/python3/nodecode_nvim'))

require('nodecode.commands').register()
require('nodecode.ui.highlights').setup()

-- Context buffers an earlier load left open (a :Lazy reload) become ours again.
for _, buf in ipairs(vim.api.nvim_list_bufs()) do
  if vim.bo[buf].filetype == 'nodecode-context' then
    require('nodecode.ui.context').adopt(buf)
  end
end
