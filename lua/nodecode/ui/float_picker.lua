-- The built-in picker (no dependencies): a prompt, a list and a preview in
-- three floating windows. Typing filters live: a static list by substring,
-- a dynamic source (items = function(query)) by asking it again. Each action
-- of the source has its own key; the toggle key switches the source's mode.

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('nodecode_float_picker')

---@class nodecode.PickerAction
---@field name string
---@field key string|false
---@field desc? string what the key hints say it does (else its name)
---@field extra? boolean an action vim.ui.select leaves out (picker.backend 'select')
---@field fn fun(item: table)

---@class nodecode.PickerSource
---@field title string|fun(): string
---@field items table[]|fun(query: string): table[]
---@field text fun(item: table): string
---@field preview? fun(item: table): string[]
---@field actions nodecode.PickerAction[]
---@field toggle? { key: string|false, fn: fun(), desc?: string }
---@field query? string
---@field hints? string[] key hints (`<M-e> this / every session`), shown where a backend has room

--- The picker open now (tests look at it), if any.
---@type table?
M.current = nil

local function scratch()
  local b = api.nvim_create_buf(false, true)
  vim.bo[b].bufhidden = 'wipe'
  return b
end

---@param source nodecode.PickerSource
local function title_of(source)
  local t = type(source.title) == 'function' and source.title() or source.title
  return ' ' .. tostring(t) .. ' '
end

---@param source nodecode.PickerSource
---@param query string
---@return table[]
local function filtered(source, query)
  if type(source.items) == 'function' then
    local ok, items = pcall(source.items, query)
    return ok and items or { { _error = tostring(items) } }
  end
  local q = query:lower()
  return vim.tbl_filter(function(it)
    return q == '' or source.text(it):lower():find(q, 1, true) ~= nil
  end, source.items)
end

--- The footers of the results and preview windows: the source's key hints
--- and the help key, in order, each whole, as many as fit in `widths`.
---@param source nodecode.PickerSource
---@param help string|false
---@param widths integer[]
---@return string[] footers (an empty one: none)
local function footers(source, help, widths)
  local parts = vim.list_extend({}, source.hints or {})
  if type(help) == 'string' and help ~= '' then
    parts[#parts + 1] = help .. ' keys'
  end
  local out, w = { '' }, 1
  for _, p in ipairs(parts) do
    local more = out[w] == '' and p or (out[w] .. ' · ' .. p)
    if vim.fn.strdisplaywidth(more) + 2 > widths[w] and out[w] ~= '' and widths[w + 1] then
      w, more = w + 1, p -- the next window's footer
      out[w] = ''
    end
    if vim.fn.strdisplaywidth(more) + 2 <= widths[w] then
      out[w] = more
    end
  end
  return out
end

--- Open the picker for `source`; returns its state.
---@param source nodecode.PickerSource
---@param keys { next: string|false, prev: string|false, close: string|false, help?: string|false }
---@return table
function M.open(source, keys)
  local W, H = vim.o.columns, vim.o.lines
  local width, height = math.max(40, math.floor(W * 0.9)), math.max(8, math.floor(H * 0.7))
  local col, row = math.floor((W - width) / 2), math.floor((H - height) / 2) - 1
  local lw = math.floor(width * 0.5)
  local st =
    { source = source, shown = {}, sel = 1, closed = false, from = api.nvim_get_current_win() }
  st.cursor = api.nvim_win_get_cursor(st.from)
  st.pbuf, st.lbuf, st.vbuf = scratch(), scratch(), scratch()
  local common = { relative = 'editor', border = 'rounded', style = 'minimal' }
  st.lwin = api.nvim_open_win(
    st.lbuf,
    false,
    vim.tbl_extend(
      'force',
      common,
      { row = row + 3, col = col, width = lw, height = height - 3, title = ' results ' }
    )
  )
  st.vwin = api.nvim_open_win(
    st.vbuf,
    false,
    vim.tbl_extend('force', common, {
      row = row,
      col = col + lw + 2,
      width = width - lw - 2,
      height = height,
      title = ' preview ',
    })
  )
  st.pwin = api.nvim_open_win(
    st.pbuf,
    true,
    vim.tbl_extend(
      'force',
      common,
      { row = row, col = col, width = lw, height = 1, title = title_of(source) }
    )
  )
  for i, text in ipairs(footers(source, keys.help, { lw, width - lw - 2 })) do
    if text ~= '' then
      local win = i == 1 and st.lwin or st.vwin
      api.nvim_win_set_config(win, { footer = ' ' .. text .. ' ', footer_pos = 'center' })
    end
  end
  vim.wo[st.lwin].cursorline, vim.wo[st.lwin].wrap = true, false
  vim.wo[st.lwin].winhighlight = 'CursorLine:NodecodeMatch'
  require('nodecode.ui.highlights').setup()
  vim.wo[st.vwin].wrap = true
  vim.bo[st.pbuf].filetype = 'nodecode-prompt'

  local previews = {}
  local function render()
    local lines = {}
    for i, it in ipairs(st.shown) do
      lines[i] = it._error and ('error: ' .. it._error) or source.text(it):gsub('\n', ' ')
    end
    api.nvim_buf_set_lines(st.lbuf, 0, -1, false, #lines > 0 and lines or { '(no matches)' })
    api.nvim_buf_clear_namespace(st.lbuf, ns, 0, -1)
    local it = st.shown[st.sel]
    local preview = {}
    if it and not it._error then
      api.nvim_win_set_cursor(st.lwin, { st.sel, 0 })
      if source.preview then
        previews[it] = previews[it] or select(2, pcall(source.preview, it))
        preview = type(previews[it]) == 'table' and previews[it] or { tostring(previews[it]) }
      end
    end
    api.nvim_buf_set_lines(st.vbuf, 0, -1, false, preview)
  end

  function st.filter(query)
    st.query = query or ''
    st.shown = filtered(source, st.query)
    st.sel = math.min(math.max(st.sel, 1), math.max(#st.shown, 1))
    render()
  end

  function st.move(d)
    if #st.shown > 0 then
      st.sel = ((st.sel - 1 + d) % #st.shown) + 1
      render()
    end
  end

  function st.close(then_fn)
    if st.closed then
      return
    end
    st.closed = true
    vim.cmd('stopinsert')
    for _, w in ipairs({ st.pwin, st.lwin, st.vwin }) do
      if api.nvim_win_is_valid(w) then
        api.nvim_win_close(w, true)
      end
    end
    if api.nvim_win_is_valid(st.from) then
      api.nvim_set_current_win(st.from)
    end
    M.current = nil
    -- Leaving insert mode happens after this returns, in the window we went
    -- back to, and moves its cursor: put it back before anything else runs.
    vim.schedule(function()
      if api.nvim_win_is_valid(st.from) then
        pcall(api.nvim_win_set_cursor, st.from, st.cursor)
      end
      if then_fn then
        then_fn()
      end
    end)
  end

  --- Run action `a` on the selected item (after the picker closed).
  function st.run(a)
    local query = api.nvim_buf_get_lines(st.pbuf, 0, 1, false)[1] or ''
    if query ~= st.query then -- typed ahead faster than TextChangedI fired
      st.filter(query)
    end
    local it = st.shown[st.sel]
    if it and not it._error then
      st.close(function()
        a.fn(it)
      end)
    end
  end

  function st.toggle()
    source.toggle.fn()
    api.nvim_win_set_config(st.pwin, { title = title_of(source) })
    st.sel = 1
    st.filter(st.query)
  end

  api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    buffer = st.pbuf,
    callback = function()
      st.filter(api.nvim_buf_get_lines(st.pbuf, 0, 1, false)[1])
    end,
  })
  api.nvim_create_autocmd('BufLeave', {
    buffer = st.pbuf,
    once = true,
    callback = function()
      st.close()
    end,
  })
  local function map(lhs, fn, desc)
    if type(lhs) == 'string' and lhs ~= '' then
      vim.keymap.set({ 'i', 'n' }, lhs, fn, { buffer = st.pbuf, nowait = true, desc = desc })
    end
  end
  map(keys.next, function()
    st.move(1)
  end, 'next')
  map('<Down>', function()
    st.move(1)
  end, 'next')
  map(keys.prev, function()
    st.move(-1)
  end, 'previous')
  map('<Up>', function()
    st.move(-1)
  end, 'previous')
  map(keys.close, function()
    st.close()
  end, 'close')
  map('<C-c>', function()
    st.close()
  end, 'close')
  for _, a in ipairs(source.actions) do
    map(a.key, function()
      st.run(a)
    end, a.name)
  end
  if source.toggle then
    map(source.toggle.key, st.toggle, 'toggle')
  end
  local function hints()
    require('nodecode.ui.hints').open('picker', source)
  end
  map(keys.help, hints, 'keys')
  if keys.help == '<C-/>' then
    map('<C-_>', hints, 'keys') -- what most terminals send for Ctrl-/
  end

  local query = source.query or ''
  api.nvim_buf_set_lines(st.pbuf, 0, -1, false, { query })
  st.filter(query)
  api.nvim_win_set_cursor(st.pwin, { 1, #query })
  vim.cmd('startinsert!')
  M.current = st
  return st
end

return M
