-- Keys: the <Plug>(nodecode-ACTION) mappings (defined once, by
-- plugin/nodecode.lua through commands.register) and the buffer-local maps
-- of the chat, input and context buffers, each lhs from setup{ keymaps }.

local M = {}

---@param name string
---@param args? string
---@param bang? boolean
local function run(name, args, bang)
  return function()
    require('nodecode.commands').run(name, { args = args or '', fargs = {}, bang = bang or false })
  end
end

---@type table<string, { desc: string, fn: fun() }>
M.actions = {
  chat = { desc = 'open the chat and its input area', fn = run('Nodecode') },
  stop = { desc = 'stop the running turn', fn = run('NodecodeStop') },
  context = { desc = 'export the context and open it', fn = run('NodecodeContext') },
  undo = { desc = 'undo the last turn and its file changes', fn = run('NodecodeUndo') },
  redo = { desc = 'redo the turn the last undo took back', fn = run('NodecodeRedo') },
  tree = { desc = 'open the session tree', fn = run('NodecodeTree') },
  status = { desc = 'show the /context report', fn = run('NodecodeStatus') },
  recall = { desc = 'recall from the log', fn = run('NodecodeRecall') },
  evict = { desc = 'evict down to 50% of the budget', fn = run('NodecodeEvict') },
  fork = { desc = 'fork a new session at the head', fn = run('NodecodeFork') },
  sessions = { desc = 'pick or resume a session', fn = run('NodecodeSessions') },
  model = { desc = 'pick the model of the next request', fn = run('NodecodeModel') },
  toggle = { desc = 'show or hide the chat', fn = run('NodecodeToggle') },
  help = {
    desc = "list this buffer's keys",
    fn = function()
      local ok, err = pcall(require('nodecode.ui.hints').open)
      if not ok then
        require('nodecode.message').caught(err)
      end
    end,
  },
  restore = {
    desc = 'restore a removed message into the context buffer',
    fn = function()
      local context = require('nodecode.ui.context')
      if not context.state(0) then
        return require('nodecode.message').info(
          'restore works in the context buffer (:NodecodeContext)'
        )
      end
      local ok, err = pcall(require('nodecode.ui.context.restore').pick_removed, 0)
      if not ok then
        require('nodecode.message').caught(err)
      end
    end,
  },
}

-- Which actions each kind of buffer maps (stop and send are the chat's and
-- the input area's own).
local BUFFER_ACTIONS = {
  chat = { 'undo', 'redo', 'tree', 'status', 'recall', 'evict', 'fork', 'context', 'help' },
  context = {
    'undo',
    'redo',
    'tree',
    'status',
    'recall',
    'evict',
    'fork',
    'context',
    'chat',
    'restore',
    'help',
  },
}
M.BUFFER_ACTIONS = BUFFER_ACTIONS -- (ui/hints.lua lists them)

--- Define every <Plug>(nodecode-ACTION) mapping (normal mode).
function M.plugs()
  for name, a in pairs(M.actions) do
    vim.keymap.set(
      'n',
      ('<Plug>(nodecode-%s)'):format(name),
      a.fn,
      { desc = 'nodecode: ' .. a.desc }
    )
  end
  vim.keymap.set('x', '<Plug>(nodecode-ask-selection)', function()
    require('nodecode.ask').selection()
  end, { desc = 'nodecode: ask about the selected lines (the input area opens with them)' })
end

--- Map the configured keys of `kind` ('chat' or 'context') in `buf`.
---@param buf integer
---@param kind 'chat'|'context'
function M.attach(buf, kind)
  local keys = require('nodecode.config').get().keymaps
  for _, name in ipairs(BUFFER_ACTIONS[kind]) do
    local lhs = keys[name]
    if type(lhs) == 'string' and lhs ~= '' then
      vim.keymap.set(
        'n',
        lhs,
        M.actions[name].fn,
        { buffer = buf, desc = 'nodecode: ' .. M.actions[name].desc }
      )
    end
  end
end

return M
