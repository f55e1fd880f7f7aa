-- Options: defaults, merge and validation. setup() only calls apply(); side
-- effects live in plugin/nodecode.lua and the modules that use the options.

local M = {}

---@alias nodecode.ApproveFn fun(kind: string, detail: string, done: fun(yes: boolean), ev: table)

---@class nodecode.ChatConfig
---@field position string
---@field size integer
---@field input_height integer
---@field open_on_ask boolean
---@field focus_on_ask boolean
---@field progress boolean

---@class nodecode.Config
---@field python? string
---@field home? string
---@field store string
---@field approve 'diff'|'confirm'|'select'|nodecode.ApproveFn
---@field approval { window: 'float'|'split' }
---@field chat nodecode.ChatConfig
---@field context { position: string, open_newest: integer }
---@field picker { backend: 'auto'|'telescope'|'fzf-lua'|'snacks'|'mini.pick'|'builtin'|'select' }
---@field keymaps table<string, string|false|table<string, string|false>>

---@type nodecode.Config
M.defaults = {
  -- python (string?): the Python that runs nodecode's host process.
  --   nil: vim.g.nodecode_python, else <plugin root>/.venv/bin/python (`make install`).
  -- home (string?): nodecode's home. nil: $NODECODE_HOME, else $XDG_DATA_HOME/nodecode,
  --   the same home the `nodecode` command line uses.
  -- The store: one SQLite database under home/store/ holding many sessions.
  store = 'default',
  -- How the agent's writes and shell commands are approved: 'diff' (a window
  -- showing a write's diff or a command and its directory, keys in
  -- keymaps.approval), 'confirm' (vim.fn.confirm), 'select' (vim.ui.select), or
  -- a function(kind, detail, done, ev) that calls done(true) or done(false) (ev
  -- holds diff and cwd). config.jsonc's auto_approve skips it.
  approve = 'diff',
  approval = {
    -- Where approve = 'diff' shows the request: 'float' or 'split'.
    window = 'float',
  },
  chat = {
    -- Where :Nodecode opens the chat: 'right', 'left', 'below', 'tab' or 'current'.
    position = 'right',
    -- Width of a right/left chat window, height of a below one (0: half).
    size = 0,
    -- Height of the input area that `:Nodecode` (no text) opens under the chat.
    input_height = 6,
    -- :Nodecode {text} shows the chat when it is not shown in this tab.
    open_on_ask = true,
    -- :Nodecode {text} moves the cursor into the chat (else it stays where you typed).
    focus_on_ask = false,
    -- While a turn runs, a spinner with its phase and elapsed time ends the chat.
    progress = true,
  },
  context = {
    -- Where :NodecodeContext opens context.txt: 'chat' (above the chat when it
    -- is shown, else at the right), 'current', 'split', 'vsplit' or 'tab'.
    -- (From the chat or its input area, 'current' opens a split above instead.)
    position = 'chat',
    -- How many of the newest blocks start unfolded (the rest start folded).
    open_newest = 3,
  },
  picker = {
    -- 'auto': the first installed of telescope, fzf-lua, snacks (its picker
    -- enabled) and mini.pick (set up), else the built-in floating picker.
    -- Or one by name: 'telescope', 'fzf-lua', 'snacks', 'mini.pick', 'builtin';
    -- 'select': vim.ui.select for the simple choices (sessions, restore), the
    -- built-in picker for recall.
    backend = 'auto',
  },
  -- Buffer-local keys; false disables one. Every action also has a
  -- <Plug>(nodecode-ACTION) mapping (see :help nodecode-mappings).
  keymaps = {
    send = '<CR>', -- input area, normal mode: send the whole input as the ask
    send_insert = '<C-s>', -- input area, insert mode: the same
    stop = '<C-c>', -- chat and input area, normal mode: :NodecodeStop
    -- Chat and context buffers, normal mode:
    undo = '<localleader>u', -- :NodecodeUndo (the ask comes back into the input area)
    redo = '<localleader>r', -- :NodecodeRedo
    tree = '<localleader>t', -- :NodecodeTree
    status = '<localleader>s', -- :NodecodeStatus
    recall = '<localleader>/', -- :NodecodeRecall
    evict = '<localleader>e', -- :NodecodeEvict (down to 50%)
    fork = '<localleader>f', -- :NodecodeFork
    context = '<localleader>c', -- :NodecodeContext (in the context buffer: re-export)
    chat = '<localleader>n', -- :Nodecode (the chat and its input area)
    restore = '<localleader>m', -- context buffer: pick a removed message, insert its header
    help = '?', -- chat, input area, context buffer: a float listing that buffer's keys
    -- The pickers (prompt, insert and normal mode), in every backend; the
    -- defaults are keys none of telescope, fzf-lua, snacks and mini.pick uses:
    picker = {
      open = '<CR>', -- recall: the whole entry in a scratch buffer (others: choose)
      insert = '<M-y>', -- (recall-entry N) at the cursor of the window you came from
      restore = '<M-u>', -- the message back into the context buffer
      toggle = '<M-e>', -- this session's log <-> every session (full-text search)
      kinds = '<M-o>', -- recall: show (or hide again) the export and request rows of the log
      rename = '<M-n>', -- sessions: give the session a title of your own
      delete = '<M-x>', -- sessions: delete the session (after a confirmation)
      -- The built-in picker only (the others keep their own):
      next = '<C-n>',
      prev = '<C-p>',
      close = '<Esc>',
      help = '<C-/>', -- a float listing the picker's keys
    },
    -- The tree buffer (:NodecodeTree), normal mode, on a turn's line:
    tree_buffer = {
      continue = 'c', -- head to this turn, files stay
      rewind = 'r', -- head to this turn, files return to their state after it
      rewind_force = 'R', -- the same, overwriting files changed since (saved as blobs)
      fork = 'f', -- a new session from this turn
      open = '<CR>', -- this turn's messages in a scratch buffer
      close = 'q',
      help = '?',
    },
    -- The approval window (approve = 'diff'), normal mode:
    approval = {
      accept = 'a',
      reject = 'r',
      reason = 'R', -- reject, saying why: the reason is the call's result
      always = 'A', -- accept, and every later request of this kind in the session
      close = 'q', -- reject
      help = '?',
      -- A write's hunks, one by one (the hunk under the cursor):
      next_hunk = ']c',
      prev_hunk = '[c',
      take_hunk = 'y',
      reject_hunk = 'x',
      reject_hunk_reason = 'X', -- reject it, saying why (the result says it)
      edit_hunk = 'e', -- its new lines in a scratch buffer: :w keeps the edit
      confirm = '<CR>', -- write the hunks taken (one not chosen is left out)
    },
  },
}

-- Keys whose default is nil (absent from the table above).
local OPTIONAL = { python = true, home = true }
local POSITIONS = { right = true, left = true, below = true, tab = true, current = true }
local CONTEXT_POSITIONS = { chat = true, current = true, split = true, vsplit = true, tab = true }
local BACKENDS = {
  auto = true,
  telescope = true,
  ['fzf-lua'] = true,
  snacks = true,
  ['mini.pick'] = true,
  builtin = true,
  select = true,
}
local APPROVE = { diff = true, confirm = true, select = true }
local APPROVAL_WINDOWS = { float = true, split = true }

---@type nodecode.Config
local current = vim.deepcopy(M.defaults)

--- vim.validate(name, value, types, optional) on 0.11, its table form on 0.10.
local function check(name, value, types, optional)
  if vim.fn.has('nvim-0.11') == 1 then
    vim.validate(name, value, types, optional)
  else
    vim.validate({ [name] = { value, types, optional } })
  end
end

---@param name string
---@param value any
---@param allowed table<string, boolean>
local function check_one_of(name, value, allowed)
  if type(value) == 'string' and not allowed[value] then
    local names = vim.tbl_keys(allowed)
    table.sort(names)
    error(('%s: expected one of %s, got %q'):format(name, table.concat(names, ', '), value), 0)
  end
end

--- Warn about keys of `opts` that no default (or optional key) names.
---@param opts table
---@param defaults table
---@param prefix string
local function warn_unknown(opts, defaults, prefix)
  for key, value in pairs(opts) do
    local name = prefix .. tostring(key)
    local default = defaults[key]
    if default == nil and not (prefix == '' and OPTIONAL[key]) then
      require('nodecode.message').warn('unknown option %s (ignored)', name)
    elseif type(default) == 'table' and type(value) == 'table' then
      warn_unknown(value, default, name .. '.')
    end
  end
end

---@param c nodecode.Config
local function validate(c)
  check('python', c.python, 'string', true)
  check('home', c.home, 'string', true)
  check('store', c.store, 'string')
  check('approve', c.approve, { 'string', 'function' })
  check_one_of('approve', c.approve, APPROVE)
  check('approval', c.approval, 'table')
  check('approval.window', c.approval.window, 'string')
  check_one_of('approval.window', c.approval.window, APPROVAL_WINDOWS)
  check('chat', c.chat, 'table')
  check('chat.position', c.chat.position, 'string')
  check_one_of('chat.position', c.chat.position, POSITIONS)
  check('chat.size', c.chat.size, 'number')
  check('chat.input_height', c.chat.input_height, 'number')
  check('chat.open_on_ask', c.chat.open_on_ask, 'boolean')
  check('chat.focus_on_ask', c.chat.focus_on_ask, 'boolean')
  check('chat.progress', c.chat.progress, 'boolean')
  check('context', c.context, 'table')
  check('context.position', c.context.position, 'string')
  check_one_of('context.position', c.context.position, CONTEXT_POSITIONS)
  check('context.open_newest', c.context.open_newest, 'number')
  check('picker', c.picker, 'table')
  check('picker.backend', c.picker.backend, 'string')
  check_one_of('picker.backend', c.picker.backend, BACKENDS)
  check('keymaps', c.keymaps, 'table')
  for key, default in pairs(M.defaults.keymaps) do
    if type(default) == 'table' then
      check('keymaps.' .. key, c.keymaps[key], 'table')
      for sub in pairs(default) do
        check(('keymaps.%s.%s'):format(key, sub), c.keymaps[key][sub], { 'string', 'boolean' })
      end
    else
      check('keymaps.' .. key, c.keymaps[key], { 'string', 'boolean' })
    end
  end
end

--- Merge `opts` over the defaults, validate, and make the result current.
---@param opts? table
---@return nodecode.Config
function M.apply(opts)
  check('opts', opts, 'table', true)
  opts = opts or {}
  warn_unknown(opts, M.defaults, '')
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  validate(merged)
  current = merged
  return current
end

---@return nodecode.Config
function M.get()
  return current
end

--- The plugin's root directory (the one holding plugin/, lua/, rplugin/).
---@return string
function M.root()
  local this = debug.getinfo(1, 'S').source:sub(2)
  return vim.fn.fnamemodify(this, ':p:h:h:h')
end

--- The Python that runs the host: setup{python}, g:nodecode_python, or the
--- plugin's .venv; the second value names the setting it came from (nil: the .venv).
---@return string python, string? setting
function M.python()
  for _, from in ipairs({
    { current.python, 'setup{ python }' },
    { vim.g.nodecode_python, 'g:nodecode_python' },
  }) do
    if type(from[1]) == 'string' and from[1] ~= '' then
      return vim.fn.expand(from[1]), from[2]
    end
  end
  return M.root() .. '/.venv/bin/python', nil
end

--- Why the host's Python is missing, with the remedy: a setting to fix, or the
--- build that was never run (lazy.nvim runs no build for a `dir =` spec).
---@return string
function M.no_python()
  local py, setting = M.python()
  if setting then
    return ('no Python at %s (set by %s)'):format(py, setting)
  end
  return (
    'no .venv in %s (the plugin is not built): '
    .. 'run :Lazy build nodecode, or make install there'
  ):format(vim.fn.fnamemodify(M.root(), ':~'))
end

--- Where this Neovim works, sent with each host call; nil fields use the
--- host's own defaults ($NODECODE_HOME, …). `tab` (the current tabpage, or
--- the one given) chooses the session: each tab's chat has its own.
---@param tab? integer
---@return { home?: string, store: string, cwd: string, tab: integer }
function M.place(tab)
  return {
    home = current.home and vim.fn.expand(current.home) or nil,
    store = current.store,
    cwd = vim.fn.getcwd(),
    tab = tab or vim.api.nvim_get_current_tabpage(),
  }
end

return M
