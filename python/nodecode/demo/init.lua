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
    -- The scripted model answers three questions; a kept workspace whose bug
    -- is fixed already is offered the other two.
    local fixed =
      not table.concat(vim.fn.readfile('calc.py'), '\n'):find('len(values) - 1', 1, true)
    local asks = fixed
        and ':Nodecode what does mean do with an empty list?  then  :Nodecode add a median function'
      or ':Nodecode fix the bug in calc.py  then  :Nodecode what does mean do with an empty list?'
    chat.say('Welcome to the nodecode demo (' .. (vim.env.NODECODE_DEMO_MODEL or '?') .. ').', true)
    if fixed then
      chat.say('calc.py is fixed already (the workspace is kept between runs).')
    end
    chat.say('Type  ' .. asks .. '  and watch the replies stream in here.')
    -- One say per sentence: each is its own "> " line, wrapped by the window.
    chat.say(
      'Writes and commands ask first: a accepts, r rejects, R rejects with a reason, '
        .. 'A accepts that kind for the rest of the session.'
    )
    chat.say(
      'The window is small: the second question evicts the first (:NodecodeContext shows the stub).'
    )
    chat.say(
      'In the input area (:Nodecode alone), /help lists the slash commands: '
        .. '/context, /tree, /undo… run there without asking the model.'
    )
    chat.say(
      'Quit with :qa. The session is kept for the next `make demo`; '
        .. '`make demo-clean` starts afresh.'
    )
    vim.cmd.wincmd('p')
  end,
})
