-- The user commands: one table, one dispatcher. plugin/nodecode.lua calls
-- register(); each implementation requires what it needs when run.

local M = {}

---@class nodecode.Command
---@field impl fun(opts: vim.api.keyset.create_user_command.command_args)
---@field desc string
---@field nargs? string|integer
---@field complete? string|fun(arglead: string, cmdline: string, pos: integer): string[]

---@type table<string, nodecode.Command>
M.commands = {
  Nodecode = {
    desc = 'nodecode: open the chat with an input area, or ask: :Nodecode {text}',
    nargs = '*',
    complete = 'file', -- an ask often names files
    impl = function(o)
      local chat = require('nodecode.ui.chat')
      if vim.trim(o.args) == '' then
        chat.open({ input = true })
      else
        chat.ask(o.args)
      end
    end,
  },
  NodecodeStop = {
    desc = 'nodecode: stop the running turn',
    nargs = 0,
    impl = function()
      require('nodecode.ui.chat').stop()
    end,
  },
}

--- Run command `name`; errors become one message, not a traceback.
---@param name string
---@param opts table
function M.run(name, opts)
  local ok, err = pcall(M.commands[name].impl, opts)
  if not ok then
    require('nodecode.message').error('%s', (tostring(err):gsub('^nodecode: ', '')))
  end
end

--- Define every command of the table.
function M.register()
  for name, cmd in pairs(M.commands) do
    vim.api.nvim_create_user_command(name, function(o)
      M.run(name, o)
    end, { desc = cmd.desc, nargs = cmd.nargs, complete = cmd.complete })
  end
end

return M
