-- Key hints: the help key (`?`; `<C-/>` in the picker) opens a float listing
-- the keys of the buffer it was pressed in, made from the configured keymaps so
-- remaps show; the float takes no focus and the next key closes it (only). An empty
-- chat shows a one-line hint of how to ask.

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('nodecode_hints')

--- The float open now, if any (tests look at it).
---@type integer?
M.win = nil

local function keymaps()
  return require('nodecode.config').get().keymaps
end

local TREE = {
  { 'continue', 'continue from this turn (files stay)' },
  { 'rewind', 'rewind to this turn (files follow)' },
  { 'rewind_force', 'rewind, overwriting files changed since' },
  { 'fork', 'fork a new session at this turn' },
  { 'open', "open this turn's messages" },
  { 'close', 'close the tree' },
  { 'help', 'these keys' },
}

local APPROVAL = {
  { 'accept', 'accept' },
  { 'reject', 'reject' },
  { 'reason', 'reject, saying why (the agent reads it)' },
  { 'always', 'accept, and this kind for the rest of the session' },
  { 'close', 'close (reject)' },
  { 'next_hunk', "a write's next hunk" },
  { 'prev_hunk', 'its previous hunk' },
  { 'take_hunk', 'take the hunk under the cursor' },
  { 'reject_hunk', 'reject the hunk under the cursor' },
  { 'reject_hunk_reason', 'reject it, saying why (the agent reads it)' },
  { 'edit_hunk', "edit the hunk's new lines (:w keeps them)" },
  { 'confirm', 'write the hunks taken (the rest are left out)' },
  { 'help', 'these keys' },
}

--- {lhs, what} of the configured keys `names` of table `keys` (false: left out).
---@param keys table<string, string|false>
---@param names { [1]: string, [2]: string }[]
---@return { [1]: string, [2]: string }[]
local function rows_of(keys, names)
  local out = {}
  for _, n in ipairs(names) do
    local lhs = keys[n[1]]
    if type(lhs) == 'string' and lhs ~= '' then
      out[#out + 1] = { lhs, n[2] }
    end
  end
  return out
end

--- The buffer actions of keymaps.lua mapped in buffers of `kind`.
---@param kind 'chat'|'context'
---@return { [1]: string, [2]: string }[]
local function actions(kind)
  local km = require('nodecode.keymaps')
  local names = {}
  for _, name in ipairs(km.BUFFER_ACTIONS[kind]) do
    names[#names + 1] = { name, name == 'help' and 'these keys' or km.actions[name].desc }
  end
  return rows_of(keymaps(), names)
end

--- The picker's keys, from the source it shows (its actions and toggle).
---@param source? nodecode.PickerSource
---@return { [1]: string, [2]: string }[]
local function picker_rows(source)
  local k, out = keymaps().picker, {}
  for _, a in ipairs(source and source.actions or {}) do
    if type(a.key) == 'string' and a.key ~= '' then
      out[#out + 1] = { a.key, a.desc or a.name }
    end
  end
  if source and source.toggle and type(source.toggle.key) == 'string' then
    out[#out + 1] = { source.toggle.key, source.toggle.desc or 'switch what is searched' }
  end
  vim.list_extend(
    out,
    rows_of(k, {
      { 'next', 'next row' },
      { 'prev', 'previous row' },
      { 'close', 'close' },
      { 'help', 'these keys' },
    })
  )
  return out
end

--- The {lhs, what} rows of a kind of buffer: chat, input, context, tree,
--- picker (with its source) or approval.
---@param kind string
---@param source? nodecode.PickerSource
---@return { [1]: string, [2]: string }[]
function M.rows(kind, source)
  local k = keymaps()
  if kind == 'chat' or kind == 'input' then
    local own = kind == 'input'
        and {
          { 'send', 'send the whole input as the ask' },
          { 'send_insert', 'send the ask (insert mode)' },
        }
      or {}
    own[#own + 1] = { 'stop', 'stop the running turn' }
    return vim.list_extend(rows_of(k, own), actions('chat'))
  elseif kind == 'context' then
    return actions('context')
  elseif kind == 'tree' then
    return rows_of(k.tree_buffer, TREE)
  elseif kind == 'picker' then
    return picker_rows(source)
  elseif kind == 'approval' then
    return rows_of(k.approval, APPROVAL)
  end
  error(('nodecode: no key hints for %q'):format(tostring(kind)), 0)
end

--- The float's lines: each key padded to one column, then what it does.
---@param rows { [1]: string, [2]: string }[]
---@return string[]
function M.lines(rows)
  local width = 0
  for _, r in ipairs(rows) do
    width = math.max(width, vim.fn.strdisplaywidth(r[1]))
  end
  return vim.tbl_map(function(r)
    return ('%s%s  %s'):format(r[1], (' '):rep(width - vim.fn.strdisplaywidth(r[1])), r[2])
  end, rows)
end

--- The line saying what <localleader> is, when a key of `rows` uses it.
---@param rows { [1]: string, [2]: string }[]
---@return string?
function M.localleader(rows)
  for _, r in ipairs(rows) do
    if r[1]:lower():find('<localleader>', 1, true) then
      local key = vim.g.maplocalleader
      key = vim.fn.keytrans((type(key) == 'string' and key ~= '') and key or '\\')
      return ('<localleader> is %s here (:help maplocalleader)'):format(key)
    end
  end
end

local FILETYPES = {
  ['nodecode-chat'] = 'chat',
  ['nodecode-input'] = 'input',
  ['nodecode-context'] = 'context',
  ['nodecode-tree'] = 'tree',
}

---@type fun()? gives `q` back (Neovim 0.10)
local release

function M.close()
  if M.win and api.nvim_win_is_valid(M.win) then
    api.nvim_win_close(M.win, true)
  end
  M.win = nil
  local give_back = release
  release = nil
  if give_back then
    give_back()
  end
end

--- Map `q` in `buf` to close the float, until it closes (then its own
--- mapping, if it had one, comes back).
---@param buf integer
local function hold_q(buf)
  local saved = vim.fn.maparg('q', 'n', false, true)
  vim.keymap.set('n', 'q', M.close, { buffer = buf, nowait = true, desc = 'close the key hints' })
  release = function()
    if not api.nvim_buf_is_valid(buf) then
      return
    end
    pcall(vim.keymap.del, 'n', 'q', { buffer = buf })
    if saved.buffer == 1 then
      vim.fn.mapset('n', false, saved)
    end
  end
end

--- Show the keys of `kind` (nil: the current buffer's) near the cursor.
---@param kind? string
---@param source? nodecode.PickerSource
---@return integer win
function M.open(kind, source)
  kind = kind or FILETYPES[vim.bo.filetype]
  if not kind then
    error('nodecode: key hints work in the chat, input, context, tree and picker buffers', 0)
  end
  M.close()
  local rows = M.rows(kind, source)
  local lines = M.lines(rows)
  local leader = M.localleader(rows)
  if leader then
    lines[#lines + 1] = leader
  end
  local width = 10
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable, vim.bo[buf].bufhidden = false, 'wipe'
  vim.bo[buf].filetype = 'nodecode-hints'
  width = math.min(width + 2, vim.o.columns - 4)
  local height = math.max(1, math.min(#lines, vim.o.lines - 6))
  M.win = api.nvim_open_win(buf, false, {
    relative = 'editor',
    style = 'minimal',
    border = 'rounded',
    title = (' keys · %s '):format(kind),
    width = width,
    height = height,
    zindex = 250,
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
  })
  -- The next key closes it and does nothing else (`q` closes it, it does
  -- not then start a recording): an on_key callback returning '' discards
  -- the key on Neovim 0.11. 0.10 runs the key anyway: there `q` is mapped in
  -- the buffer until the float closes, so it at least does not record.
  local win = M.win
  if vim.fn.has('nvim-0.11') == 0 then
    hold_q(api.nvim_get_current_buf())
  end
  vim.on_key(function()
    vim.on_key(nil, ns)
    vim.schedule(function()
      if M.win == win then
        M.close()
      end
    end)
    return ''
  end, ns)
  return win
end

--- The one-line hint of an empty chat, gone once the chat has text.
---@param buf integer
function M.empty_chat(buf)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  if #lines > 1 or lines[1] ~= '' then
    return
  end
  local help = keymaps().help
  local text = ':Nodecode {text} asks · :Nodecode opens the input area'
    .. ((type(help) == 'string' and help ~= '') and (' · %s lists the keys'):format(help) or '')
  api.nvim_buf_set_extmark(
    buf,
    ns,
    0,
    0,
    { virt_text = { { text, 'Comment' } }, virt_text_pos = 'overlay' }
  )
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      vim.schedule(function()
        if api.nvim_buf_is_valid(buf) then
          api.nvim_buf_clear_namespace(buf, ns, 0, -1)
        end
      end)
      return true -- detach: the hint is shown once
    end,
  })
end

--- The empty chat's hint text, if shown (tests look at it).
---@param buf integer
---@return string?
function M.shown(buf)
  for _, m in ipairs(api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local vt = m[4].virt_text
    if vt then
      return vt[1][1]
    end
  end
end

return M
