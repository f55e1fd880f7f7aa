-- The session tree `nodecode://tree`: one line per turn, the branch the head
-- is on drawn straight down, other branches indented under the turn they
-- leave from:
--
--   ○ 1  fix the parser                 seq 1–9
--   ○ 2  now the tests                  seq 10–17
--   ├─ · 3  try it with a regex         seq 18–25  undone
--   ● 4  use the tokenizer instead      seq 26–31  head
--
-- Keys on a turn's line: continue, rewind, rewind!, fork, open its messages.

local M = {}

local api = vim.api
local NAME = 'nodecode://tree'
local ns = api.nvim_create_namespace('nodecode_tree')

---@class nodecode.TreeState
---@field buf? integer
---@field rows table<integer, integer> line → turn number
local state = { rows = {} }

local function rpc()
  return require('nodecode.rpc')
end

---@param v any
local function nonil(v)
  return v ~= vim.NIL and v or nil
end

---@param span any
---@return string
local function span_text(span)
  span = nonil(span)
  if type(span) == 'table' then
    local a, b = nonil(span[1] or span.first), nonil(span[2] or span.last)
    return b and ('seq %s–%s'):format(a, b) or ('seq %s–'):format(a)
  end
  return span and tostring(span) or ''
end

---@param t table a tree row
---@return string left, string right, string hl
local function label(t)
  -- The title the core made of the ask (no fences, no #file markup), as in
  -- `nodecode tree` and the sessions picker.
  local ask = vim.split(tostring(nonil(t.title) or nonil(t.ask) or ''), '\n', { plain = true })[1]
  if vim.fn.strchars(ask) > 60 then
    ask = vim.fn.strcharpart(ask, 0, 59) .. '…'
  end
  local marker = t.head and '●' or (t.on_path and '○' or '·')
  local tags = {}
  if type(nonil(t.spent)) == 'string' then -- what its requests cost, when priced
    tags[#tags + 1] = t.spent
  end
  local status = nonil(t.status)
  if status and status ~= 'done' then
    tags[#tags + 1] = tostring(status)
  end
  if not t.on_path then
    tags[#tags + 1] = 'undone'
  end
  if t.head then
    tags[#tags + 1] = 'head'
  end
  local right = span_text(t.span) .. (#tags > 0 and ('  ' .. table.concat(tags, ' · ')) or '')
  return ('%s %d  %s'):format(marker, t.number, ask),
    right,
    t.head and 'NodecodeHead' or (t.on_path and 'Normal' or 'NodecodeUndone')
end

--- The tree's lines: {text, hl, turn} in drawing order.
---@param items table[] rpc.call('tree')
---@return { [1]: string, [2]: string, [3]: integer }[]
function M.render(items)
  local by, kids, roots = {}, {}, {}
  for _, t in ipairs(items) do
    by[t.number] = t
  end
  for _, t in ipairs(items) do
    local p = nonil(t.parent)
    if p and by[p] then
      kids[p] = kids[p] or {}
      table.insert(kids[p], t)
    else
      roots[#roots + 1] = t
    end
  end
  local out = {}
  -- The child on the head's path (else the newest) continues straight down;
  -- the others are branches, drawn first and indented.
  local function walk(t, first, rest)
    local left, right, hl = label(t)
    out[#out + 1] = { first .. left, hl, t.number, right }
    local children = kids[t.number] or {}
    table.sort(children, function(a, b)
      return a.number < b.number
    end)
    local main = children[#children]
    for _, c in ipairs(children) do
      if c.on_path then
        main = c
      end
    end
    for _, c in ipairs(children) do
      if c ~= main then
        walk(c, rest .. '├─ ', rest .. '│  ')
      end
    end
    if main then
      walk(main, rest, rest)
    end
  end
  for _, r in ipairs(roots) do
    walk(r, '', '')
  end
  local width = 0 -- spans line up in one column
  for _, r in ipairs(out) do
    width = math.max(width, vim.fn.strdisplaywidth(r[1]))
  end
  for _, r in ipairs(out) do
    r[1] = r[1] .. (' '):rep(width - vim.fn.strdisplaywidth(r[1]) + 2) .. table.remove(r, 4)
  end
  return out
end

---@return integer?
local function tree_buf()
  if state.buf and api.nvim_buf_is_valid(state.buf) then
    return state.buf
  end
end

--- Draw the tree into the buffer; returns the head's line.
---@param buf integer
---@return integer?
local function draw(buf)
  local rows = M.render(rpc().call('tree'))
  local lines, head = {}, nil
  state.rows = {}
  for i, r in ipairs(rows) do
    lines[i], state.rows[i] = r[1], r[3]
    if r[2] == 'NodecodeHead' then
      head = i
    end
  end
  if #lines == 0 then
    lines = { 'no turns yet: ask something with :Nodecode' }
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for i, r in ipairs(rows) do
    api.nvim_buf_set_extmark(buf, ns, i - 1, 0, { end_col = #r[1], hl_group = r[2] })
  end
  return head
end

--- The session's title on the tree's winbar: the words the sessions picker
--- and `nodecode sessions` show (a rename, the automatic title, the first ask).
---@param buf integer
local function winbar(buf)
  local info = rpc().call('info')
  local title = tostring(nonil(info.title) or '')
  local text = (' %s  · %s'):format(title ~= '' and title or 'untitled', info.id)
  for _, w in ipairs(vim.fn.win_findbuf(buf)) do
    vim.wo[w][0].winbar = (text:gsub('%%', '%%%%'))
  end
end

--- The turn on the cursor's line.
---@return integer
function M.turn_at_cursor()
  local n = state.rows[api.nvim_win_get_cursor(0)[1]]
  if not n then
    error('nodecode: no turn on this line', 0)
  end
  return n
end

--- A turn's messages in a scratch buffer, drawn like the chat.
---@param turn integer
function M.open_turn(turn)
  local name = ('nodecode://turn/%d'):format(turn)
  local old = vim.fn.bufnr(name)
  if old ~= -1 then
    api.nvim_buf_delete(old, { force = true })
  end
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_name(buf, name)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].filetype = 'nodecode-chat'
  local Transcript = require('nodecode.ui.transcript')
  local view, all = Transcript.new(buf), Transcript.lines()
  all:history(rpc().call('turn_messages', turn))
  view:prepend(all)
  vim.cmd('botright split')
  local win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  local wo = vim.wo[win][0]
  wo.foldmethod, wo.foldlevel, wo.wrap = 'manual', 0, true
  wo.foldtext = "v:lua.require'nodecode.ui.transcript'.foldtext()"
  view:refold(win)
  vim.keymap.set(
    'n',
    'q',
    '<cmd>close<cr>',
    { buffer = buf, nowait = true, desc = 'nodecode: close' }
  )
end

---@param fn fun(turn: integer)
---@return fun()
local function on_turn(fn)
  return require('nodecode.actions').guard(function()
    fn(M.turn_at_cursor())
  end)
end

---@param buf integer
local function keymaps(buf)
  local actions = require('nodecode.actions')
  local k = require('nodecode.config').get().keymaps.tree_buffer
  local function moved(r, fallback)
    local lines = actions.lines(r)
    require('nodecode.message').info('%s', #lines > 0 and table.concat(lines, '\n') or fallback)
    actions.after_change()
  end
  local maps = {
    continue = on_turn(function(n)
      moved(rpc().call('continue', n), ('head at turn %d (files stay)'):format(n))
    end),
    rewind = on_turn(function(n)
      moved(rpc().call('rewind', n, false), ('rewound to turn %d'):format(n))
    end),
    rewind_force = on_turn(function(n)
      moved(rpc().call('rewind', n, true), ('rewound to turn %d'):format(n))
    end),
    fork = on_turn(actions.fork),
    open = on_turn(M.open_turn),
    close = function()
      vim.cmd('close')
    end,
    help = function()
      require('nodecode.ui.hints').open('tree')
    end,
  }
  for name, fn in pairs(maps) do
    if type(k[name]) == 'string' and k[name] ~= '' then
      vim.keymap.set(
        'n',
        k[name],
        fn,
        { buffer = buf, nowait = true, desc = 'nodecode tree: ' .. name }
      )
    end
  end
end

--- :NodecodeTree — open (or redraw) the tree, the cursor on the head.
---@return integer buf
function M.open()
  require('nodecode.ui.highlights').setup()
  local buf = tree_buf()
  if not buf then
    buf = require('nodecode.ui.buffers').named(NAME)
    vim.bo[buf].filetype = 'nodecode-tree'
    vim.bo[buf].bufhidden = 'hide'
    keymaps(buf)
    state.buf = buf
  end
  local head = draw(buf)
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    vim.cmd(
      ('botright %dsplit'):format(math.min(math.max(api.nvim_buf_line_count(buf) + 1, 5), 15))
    )
    win = api.nvim_get_current_win()
    api.nvim_win_set_buf(win, buf)
    vim.wo[win][0].number, vim.wo[win][0].wrap, vim.wo[win][0].cursorline = false, false, true
  end
  winbar(buf)
  api.nvim_set_current_win(win)
  api.nvim_win_set_cursor(win, { head or 1, 0 })
  return buf
end

--- Redraw the tree if it is open (after a move, a turn begun or ended). A
--- cursor on the head follows the head; one on another turn stays on it.
function M.refresh()
  local buf = tree_buf()
  local win = buf and vim.fn.bufwinid(buf) or -1
  if win == -1 then
    return
  end
  local row = api.nvim_win_get_cursor(win)[1]
  local was_head = api.nvim_buf_get_lines(buf, row - 1, row, false)[1]
  local on = (was_head or ''):find('●', 1, true) == nil and state.rows[row] or nil
  local head = draw(buf)
  winbar(buf)
  local at = head or 1
  for line, turn in pairs(state.rows) do
    if turn == on then
      at = line
    end
  end
  api.nvim_win_set_cursor(win, { at, 0 })
end

---@type table<integer, boolean>
local seen = {}

--- Host events: a job's first event (its turn exists now) and its end redraw the tree.
---@param ev table
function M.on_event(ev)
  local first = ev.job ~= nil and not seen[ev.job]
  if ev.job ~= nil then
    seen[ev.job] = ev.kind ~= 'done' or nil
  end
  if (first or ev.kind == 'done') and tree_buf() then
    vim.schedule(function()
      if not require('nodecode.rpc').running() then
        return -- the host stopped meanwhile (a reload): refreshing would start another
      end
      local ok, err = pcall(M.refresh)
      if not ok then
        require('nodecode.message').caught(err)
      end
    end)
  end
end

return M
