-- Slash commands typed in the chat (the input area, `:Nodecode {text}`): a
-- message starting with `/NAME` runs the :Nodecode… command the core's one
-- table (python/nodecode/slash.py) names, as that command runs, instead of
-- asking; `//text` asks `/text`. The host reads the message, so `nodecode ask`
-- and the chat agree on what is a command.

local M = {}

local function rpc()
  return require('nodecode.rpc')
end

--- /help: the commands in the chat, as lines of the plugin's own.
---@param lines string[]
local function show_help(lines)
  local chat = require('nodecode.ui.chat')
  chat.show_for_ask()
  chat.say('slash commands (nothing is sent to the model):')
  for _, line in ipairs(lines) do
    chat.say(line)
  end
end

--- Run `text` when it is a slash command, as its :Nodecode… command runs;
--- otherwise return what to ask (the text, or an escaped one without its
--- first `/`). An unknown command or bad words raise one line.
---@param text string
---@return string? ask
function M.run(text)
  if text:sub(1, 1) ~= '/' then
    return text
  end
  local r = rpc().call('slash', text)
  if r.send then
    return r.send
  end
  if r.lines then
    return show_help(r.lines)
  end
  require('nodecode.commands').commands[r.command].impl({
    name = r.command,
    args = r.args,
    fargs = vim.split(r.args, '%s+', { trimempty = true }),
    bang = r.bang == true,
    range = 0,
  })
end

return M
