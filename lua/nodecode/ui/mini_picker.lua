-- The mini.pick backend of ui/picker.lua: a nodecode.PickerSource shown with
-- mini.pick's start. A dynamic source sets the items itself on each query (as
-- mini.pick's grep_live does); a fixed one is matched by mini.pick. The first
-- action is mini.pick's choose (<CR>); the others and the toggle are custom
-- mappings. The preview is mini.pick's own (its toggle_preview key, <Tab>).
-- The key hints follow the title in mini.pick's footer when both fit.

local M = {}

-- The module, required rather than read from the MiniPick global its setup()
-- sets: the same table, without leaning on a global.
local function pick()
  return require('mini.pick')
end

---@param source nodecode.PickerSource
---@return string
local function title_of(source)
  return type(source.title) == 'function' and source.title() or source.title
end

-- Room kept in the footer for mini.pick's match counts (` 12|340|340 `).
local COUNTS = 14

--- The name mini.pick shows in its footer: the title, then the key hints
--- (`title · <M-e> this / every session · …`) when the picker's window has
--- room for both and the counts; else the title alone, as mini.pick cuts a
--- longer name at its start.
---@param source nodecode.PickerSource
---@return string
local function name_of(source)
  local title = title_of(source)
  local hints = source.hints and #source.hints > 0 and table.concat(source.hints, ' · ')
  local win = hints and pick().is_picker_active() and pick().get_picker_state().windows.main
  if not (win and vim.api.nvim_win_is_valid(win)) then
    return title
  end
  local both = title .. ' · ' .. hints
  return vim.fn.strchars(' ' .. both .. ' ') + COUNTS <= vim.api.nvim_win_get_width(win) and both
    or title
end

---@param source nodecode.PickerSource
---@param rows table[]
local function items(source, rows)
  local out = {}
  for i, it in ipairs(rows) do
    out[i] = { text = (source.text(it):gsub('\n', ' ')), value = it }
  end
  return out
end

--- Run `fn` on the current match once the picker has stopped.
---@param fn fun(item: table)
local function on_current(fn)
  return function()
    local current = (pick().get_picker_matches() or {}).current
    if current then
      vim.schedule(function()
        fn(current.value)
      end)
    end
    return true
  end
end

---@param source nodecode.PickerSource
local function mappings(source)
  local out = {}
  for i, a in ipairs(source.actions) do
    if i > 1 and type(a.key) == 'string' and a.key ~= '' then
      out['nodecode_' .. a.name] = { char = a.key, func = on_current(a.fn) }
    end
  end
  -- mini.pick's <C-s>/<C-v>/<C-t> open a split or tab, then choose: our
  -- actions open their own window, so that split would stay empty. Those
  -- keys run the first action instead (as <CR> does).
  local keys = pick().config.mappings
  for _, name in ipairs({ 'choose_in_split', 'choose_in_vsplit', 'choose_in_tabpage' }) do
    if type(keys[name]) == 'string' and keys[name] ~= '' then
      out[name] = ''
      out['nodecode_' .. name] = { char = keys[name], func = on_current(source.actions[1].fn) }
    end
  end
  if source.toggle and type(source.toggle.key) == 'string' and source.toggle.key ~= '' then
    out.nodecode_toggle = {
      char = source.toggle.key,
      func = function()
        source.toggle.fn()
        pick().set_picker_opts({ source = { name = name_of(source) } })
        pick().set_picker_query(pick().get_picker_query()) -- asks the source again
      end,
    }
  end
  return out
end

--- Show `source` in mini.pick (it returns when the picker stops).
---@param source nodecode.PickerSource
---@param opts? table mini.pick's start options laid over nodecode's
function M.pick(source, opts)
  local mini = pick()
  local first = source.actions[1].fn
  local spec = {
    source = {
      name = title_of(source),
      choose = function(item)
        if item then
          vim.schedule(function()
            first(item.value)
          end)
        end
      end,
      preview = source.preview and function(buf, item)
        local ok, lines = pcall(source.preview, item.value)
        vim.api.nvim_buf_set_lines(buf, 0, -1, false, ok and lines or { tostring(lines) })
      end or nil,
    },
    mappings = mappings(source),
  }
  if type(source.items) == 'function' then
    spec.source.items = {}
    spec.source.match = function(_, _, query)
      local ok, rows = pcall(source.items, table.concat(query))
      mini.set_picker_items(items(source, ok and rows or {}), { do_match = false })
    end
  else
    spec.source.items = items(source, source.items)
  end
  local query = source.query or ''
  vim.schedule(function()
    if mini.is_picker_active() then
      mini.set_picker_opts({ source = { name = name_of(source) } }) -- its window is open now
      mini.set_picker_query(vim.split(query, ''))
    end
  end)
  return mini.start(vim.tbl_deep_extend('force', spec, opts or {}))
end

return M
