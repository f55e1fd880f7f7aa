-- Neovim init for `make demo`: this checkout on the runtimepath, none of the
-- person's config (XDG_* point into .demo/), remote plugins still enabled.
vim.opt.runtimepath:prepend(vim.env.NODECODE_DEMO_ROOT)
-- :help nodecode: the checkout's doc/tags (ignored by git) are built here when
-- missing or older than the help file, so the demo never depends on them.
local doc = vim.env.NODECODE_DEMO_ROOT .. '/doc'
if vim.fn.getftime(doc .. '/tags') < vim.fn.getftime(doc .. '/nodecode.txt') then
  pcall(vim.cmd.helptags, vim.fn.fnameescape(doc))
end
vim.g.nodecode_python = vim.env.NODECODE_DEMO_PYTHON
vim.opt.swapfile = false
vim.opt.autoread = true
vim.g.loaded_node_provider = 0
vim.g.loaded_perl_provider = 0
vim.g.loaded_ruby_provider = 0

require('nodecode').setup({ chat = { position = 'right' } })

vim.api.nvim_create_autocmd('VimEnter', {
  once = true,
  nested = true, -- :edit inside it runs the FileType autocommands (python, colours)
  callback = function()
    vim.cmd.edit('calc.py')
    local chat = require('nodecode.ui.chat')
    chat.open()
    chat.say('Welcome to the nodecode demo (' .. (vim.env.NODECODE_DEMO_MODEL or '?') .. ').')
    chat.say('Type  :Nodecode fix the bug in calc.py  and watch the reply stream in here.')
    chat.say('In the input area (:Nodecode alone), /help lists the slash commands: /context,')
    chat.say('/tree, /undo… run there without asking the model.')
    chat.say(
      'Quit with :qa. The session is kept for the next `make demo`; '
        .. '`make demo-clean` starts afresh.'
    )
    vim.cmd.wincmd('p')
  end,
})
