-- Slash commands typed in the chat (the input area, `:Nodecode {text}`): a
-- message starting with `/NAME` runs the :Nodecode… command the core's one
-- table (python/nodecode/slash.py) names, as that command runs, instead of
-- asking; `//text` asks `/text`. The host reads the message, so `nodecode ask`
-- and the chat agree on what is a command. `/` at the start of the input
-- offers the names.

local M = {}

local api = vim.api

---@type { name: string, args: string, help: string }[]?
local known

local function rpc()
  return require('nodecode.rpc')
end

--- The commands, asked once (the table never changes while a host runs);
--- none before the host runs: completion never starts it.
---@return { name: string, args: string, help: string }[]
function M.commands()
  if not known and rpc().running() then
    local ok, rows = pcall(rpc().call, 'slash_commands')
    known = ok and rows or nil
  end
  return known or {}
end

--- /help: the commands in the chat, as lines of the plugin's own; while a
--- turn streams there, as a message (the reply is not cut in two).
---@param lines string[]
local function show_help(lines)
  local chat = require('nodecode.ui.chat')
  local head = 'slash commands (nothing is sent to the model):'
  if chat.job() then
    return require('nodecode.message').info('%s\n%s', head, table.concat(lines, '\n'))
  end
  chat.show_for_ask()
  chat.say(head)
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

--- Completion items for `base` (`/…`): the command names that start with it.
---@param base string
---@return { word: string, menu: string }[]
function M.candidates(base)
  local items = {}
  for _, c in ipairs(M.commands()) do
    local word = '/' .. c.name
    if vim.startswith(word, base) then
      local args = c.args ~= '' and (c.args .. ' · ') or ''
      items[#items + 1] = { word = word, menu = args .. c.help }
    end
  end
  return items
end

--- The start of the command name before the cursor (`/ev`), when the cursor
--- is in the first word of the input's first line; else nil.
---@return string?
function M.typed()
  local row, col = unpack(api.nvim_win_get_cursor(0))
  local before = api.nvim_get_current_line():sub(1, col)
  return row == 1 and before:match('^/[%w_-]*$') or nil
end

--- 'completeopt' for a popup nobody asked for: the person's, but with
--- nothing typed in until a name is chosen.
---@return string
local function shown_only()
  local opt = vim.o.completeopt
  local function has(flag)
    return (',' .. opt .. ','):find(',' .. flag .. ',', 1, true) ~= nil
  end
  local add = has('menuone') and '' or ',menuone'
  if not (has('noinsert') or has('noselect')) then
    add = add .. ',noinsert'
  end
  return opt .. add
end

---@type string? the input's first word when the last popup closed
local closed_on

--- TextChangedI in the input area: `/` typed at its start (and the letters
--- of a name after it) offers the names that fit, unless the popup just
--- closed on this very word (<C-e>, or a name chosen). The popup types
--- nothing in: 'completeopt' has noinsert until it closes.
function M.offer()
  local base = M.typed()
  closed_on = base and closed_on or nil
  if not base or base == closed_on or vim.fn.pumvisible() == 1 then
    return
  end
  local items = M.candidates(base)
  if #items == 0 or (#items == 1 and items[1].word == base) then
    return
  end
  local saved = api.nvim_get_option_value('completeopt', { scope = 'local' })
  api.nvim_set_option_value('completeopt', shown_only(), { scope = 'local' })
  api.nvim_create_autocmd('CompleteDone', {
    buffer = api.nvim_get_current_buf(),
    once = true,
    callback = function()
      api.nvim_set_option_value('completeopt', saved, { scope = 'local' })
      closed_on = M.typed()
    end,
  })
  vim.fn.complete(1, items)
end

return M
