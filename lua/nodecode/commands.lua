-- The user commands: one table, one dispatcher. plugin/nodecode.lua calls
-- register(); each implementation requires what it needs when run.

local M = {}

---@class nodecode.Command
---@field impl fun(opts: vim.api.keyset.create_user_command.command_args)
---@field desc string
---@field nargs? string|integer
---@field complete? string|fun(arglead: string, cmdline: string, pos: integer): string[]
---@field bang? boolean
---@field range? boolean

---@type table<string, nodecode.Command>
M.commands = {
  Nodecode = {
    desc = 'nodecode: open the chat with an input area, or ask: :[range]Nodecode {text}',
    nargs = '*',
    range = true, -- the lines go into the ask as a block
    complete = function(lead) -- an ask often names files, or #buffer / #file:PATH
      return require('nodecode.ask').complete(lead)
    end,
    impl = function(o)
      require('nodecode.ask').command(o)
    end,
  },
  NodecodeModel = {
    desc = 'nodecode: the model of the next request: pick one, or PROVIDER/MODEL',
    nargs = '?',
    complete = function(lead)
      return require('nodecode.model').complete(lead)
    end,
    impl = function(o)
      require('nodecode.model').command(o.args)
    end,
  },
  NodecodeToggle = {
    desc = 'nodecode: show or hide the chat in this tab',
    nargs = 0,
    impl = function()
      require('nodecode.ui.chat').toggle()
    end,
  },
  NodecodeStop = {
    desc = 'nodecode: stop the running turn',
    nargs = 0,
    impl = function()
      require('nodecode.ui.chat').stop()
    end,
  },
  NodecodeContext = {
    desc = 'nodecode: export the context and open context.txt',
    nargs = 0,
    impl = function()
      require('nodecode.ui.context').open()
    end,
  },
  NodecodeEvict = {
    desc = 'nodecode: evict now, down to PERCENT of the budget (50) or through TURN',
    nargs = '*',
    complete = function(lead, line)
      return M.complete_evict(lead, line)
    end,
    impl = function(o)
      require('nodecode.actions').evict(o.args)
    end,
  },
  NodecodeRecall = {
    desc = 'nodecode: recall from the log in a picker (a key toggles every-session search; '
      .. '! starts there)',
    nargs = '*',
    bang = true,
    impl = function(o)
      require('nodecode.ui.picker').recall(o.args, nil, { everywhere = o.bang == true })
    end,
  },
  NodecodeTree = {
    desc = 'nodecode: the session tree (continue, rewind, fork, open a turn)',
    nargs = 0,
    impl = function()
      require('nodecode.ui.tree').open()
    end,
  },
  NodecodeUndo = {
    desc = 'nodecode: undo the last turn and its file changes (! overwrites files changed since)',
    nargs = 0,
    bang = true,
    impl = function(o)
      require('nodecode.actions').undo(o.bang)
    end,
  },
  NodecodeRedo = {
    desc = 'nodecode: redo the turn the last undo took back (! overwrites files changed since)',
    nargs = 0,
    bang = true,
    impl = function(o)
      require('nodecode.actions').redo(o.bang)
    end,
  },
  NodecodeBlob = {
    desc = 'nodecode: show a file version a forced undo, redo or rewind kept: :NodecodeBlob HASH',
    nargs = 1,
    impl = function(o)
      require('nodecode.actions').blob(o.args)
    end,
  },
  NodecodeFork = {
    desc = 'nodecode: fork a new session at the head (or at TURN) and work in it',
    nargs = '?',
    complete = function(lead)
      return M.complete_turns(lead)
    end,
    impl = function(o)
      local arg = vim.trim(o.args)
      if arg ~= '' and not tonumber(arg) then
        error(('nodecode: :NodecodeFork expects a turn number (got %q)'):format(arg), 0)
      end
      require('nodecode.actions').fork(tonumber(arg))
    end,
  },
  NodecodeStatus = {
    desc = 'nodecode: the /context report: window, budget, fill, cache, pending edits',
    nargs = 0,
    impl = function()
      require('nodecode.ui.status').open()
    end,
  },
  NodecodeBudget = {
    desc = 'nodecode: show the budget, or set the window override to N tokens (clear: remove it)',
    nargs = '?',
    complete = function(lead)
      return vim.startswith('clear', lead) and { 'clear' } or {}
    end,
    impl = function(o)
      require('nodecode.actions').budget(o.args)
    end,
  },
  NodecodeSessions = {
    desc = 'nodecode: pick a session to resume (or a new one), or resume ID',
    nargs = '?',
    complete = function(lead)
      return M.complete_sessions(lead)
    end,
    impl = function(o)
      require('nodecode.actions').sessions(o.args)
    end,
  },
  NodecodeSessionRename = {
    desc = 'nodecode: give this session a title (asks for it without one)',
    nargs = '?',
    impl = function(o)
      require('nodecode.ui.sessions').rename_current(o.args)
    end,
  },
}
-- :NodecodeCompact is :NodecodeEvict by another name.
M.commands.NodecodeCompact =
  vim.tbl_extend('force', M.commands.NodecodeEvict, { desc = 'nodecode: alias of :NodecodeEvict' })

-- Completion ------------------------------------------------------------

---@param lead string
---@param words string[]
---@return string[]
local function starting(lead, words)
  return vim.tbl_filter(function(w)
    return vim.startswith(w, lead)
  end, words)
end

--- Turn numbers of the session tree (only once the host runs: a completion
--- never starts it).
---@param lead string
---@return string[]
function M.complete_turns(lead)
  local rpc = require('nodecode.rpc')
  local ok, items = pcall(function()
    return rpc.running() and rpc.call('tree') or {}
  end)
  local out = {}
  for _, t in ipairs(ok and items or {}) do
    out[#out + 1] = tostring(t.number)
  end
  return starting(lead, out)
end

---@param lead string
---@param line string
---@return string[]
function M.complete_evict(lead, line)
  if line:match('through%s+%S*$') then
    return M.complete_turns(lead)
  end
  if line:match('^%s*%S+%s+%S*$') then
    return starting(lead, { 'through', '25', '50', '75' })
  end
  return {}
end

---@param lead string
---@return string[]
function M.complete_sessions(lead)
  local rpc = require('nodecode.rpc')
  local ok, rows = pcall(rpc.call, 'sessions')
  return starting(
    lead,
    vim.tbl_map(function(r)
      return r.id
    end, ok and rows or {})
  )
end

--- Run command `name`; errors become one message, not a traceback.
---@param name string
---@param opts table
function M.run(name, opts)
  local ok, err = pcall(M.commands[name].impl, opts)
  if not ok then
    require('nodecode.message').caught(err)
  end
end

--- Define every command of the table.
function M.register()
  for name, cmd in pairs(M.commands) do
    vim.api.nvim_create_user_command(name, function(o)
      M.run(name, o)
    end, {
      desc = cmd.desc,
      nargs = cmd.nargs,
      complete = cmd.complete,
      bang = cmd.bang,
      range = cmd.range,
    })
  end
  require('nodecode.keymaps').plugs()
  -- A chat per tab: entering a tab and closing one (ui/chat_tabs.lua).
  local tabs = vim.api.nvim_create_augroup('nodecode_tabs', { clear = true })
  vim.api.nvim_create_autocmd('TabEnter', {
    group = tabs,
    callback = function()
      require('nodecode.ui.chat_tabs').entered()
    end,
  })
  vim.api.nvim_create_autocmd('TabClosed', {
    group = tabs,
    callback = function() -- (the tabpage is freed after its TabClosed)
      vim.schedule(function()
        require('nodecode.ui.chat_tabs').closed()
      end)
    end,
  })
  -- `#buffer` typed in the chat's input area means the file buffer left last.
  vim.api.nvim_create_autocmd('BufLeave', {
    group = vim.api.nvim_create_augroup('nodecode_ask', { clear = true }),
    callback = function(ev)
      require('nodecode.ask').left(ev.buf)
    end,
  })
end

return M
