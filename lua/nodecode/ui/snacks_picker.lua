-- The snacks.nvim backend of ui/picker.lua: a nodecode.PickerSource shown
-- with Snacks.picker. A dynamic source is a live finder (asked again as the
-- person types); a fixed one is filtered by snacks' matcher. The first action
-- is snacks' confirm (<CR>), the others and the toggle are keys of the input
-- and list windows, in insert and normal mode.

local M = {}

---@param source nodecode.PickerSource
---@return string
local function title_of(source)
  return type(source.title) == 'function' and source.title() or source.title
end

---@param source nodecode.PickerSource
---@param it table
---@param i integer
local function item(source, it, i)
  return { idx = i, score = 0, text = source.text(it):gsub('\n', ' '), value = it }
end

---@param source nodecode.PickerSource
---@param query string
---@return table[]
local function items(source, query)
  local rows = source.items
  if type(rows) == 'function' then
    local ok, got = pcall(rows, query)
    rows = ok and got or {}
  end
  local out = {}
  for i, it in ipairs(rows) do
    out[i] = item(source, it, i)
  end
  return out
end

--- Run action `fn` on the current item once the picker has closed.
---@param fn fun(item: table)
local function run(fn)
  return function(picker, current)
    current = current or picker:current()
    picker:close()
    if current then
      vim.schedule(function()
        fn(current.value)
      end)
    end
  end
end

---@param source nodecode.PickerSource
---@return table actions, table keys
local function actions_of(source)
  local actions, keys = {}, {}
  for i, a in ipairs(source.actions) do
    local name = 'nodecode_' .. a.name
    actions[name] = run(a.fn)
    if i > 1 and type(a.key) == 'string' and a.key ~= '' then
      keys[a.key] = { name, mode = { 'i', 'n' }, desc = 'nodecode: ' .. a.name }
    end
  end
  if source.toggle and type(source.toggle.key) == 'string' and source.toggle.key ~= '' then
    actions.nodecode_toggle = function(picker)
      source.toggle.fn()
      picker.title = title_of(source)
      picker:find({ refresh = true })
    end
    keys[source.toggle.key] = { 'nodecode_toggle', mode = { 'i', 'n' }, desc = 'nodecode: toggle' }
  end
  return actions, keys
end

--- Show `source` in Snacks.picker.
---@param source nodecode.PickerSource
---@param opts? table Snacks.picker options laid over nodecode's
function M.pick(source, opts)
  local live = type(source.items) == 'function'
  local actions, keys = actions_of(source)
  local spec = {
    title = title_of(source),
    live = live,
    supports_live = live,
    finder = function(_, ctx)
      return items(source, live and ctx.filter.search or '')
    end,
    format = 'text',
    preview = function(ctx)
      local ok, lines = pcall(source.preview, ctx.item.value)
      ctx.preview:reset()
      ctx.preview:set_lines(ok and lines or { tostring(lines) })
      -- The key hints: the preview's title is the widest at 80 columns.
      ctx.preview:set_title(table.concat({ 'entry', unpack(source.hints or {}) }, ' · '))
    end,
    confirm = 'nodecode_' .. source.actions[1].name,
    actions = actions,
    win = { input = { keys = keys }, list = { keys = keys } },
  }
  if not source.preview then
    spec.preview = 'none'
  end
  if live then
    spec.search = source.query
  else
    spec.pattern = source.query
  end
  return require('snacks').picker.pick(vim.tbl_deep_extend('force', spec, opts or {}))
end

return M
