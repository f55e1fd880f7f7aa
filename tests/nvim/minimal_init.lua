-- Init for the tests' headless Neovim: this checkout on the runtimepath,
-- plugins (and so remote plugins) loaded, no user state. Not --clean,
-- --noplugin or -u NONE: each of those disables plugin/ scripts.
local root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
vim.opt.runtimepath:prepend(root)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'
vim.opt.more = false
vim.g.loaded_node_provider = 0
vim.g.loaded_perl_provider = 0
vim.g.loaded_ruby_provider = 0
-- The Python running nodecode's host: the one running pytest (the .venv).
local py = vim.env.NODECODE_TEST_PYTHON
if py and py ~= '' then
  vim.g.nodecode_python = py
end
