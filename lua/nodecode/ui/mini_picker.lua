-- The mini.pick backend of ui/picker.lua: a nodecode.PickerSource shown with
-- MiniPick.start. A dynamic source sets the items itself on each query (as
-- mini.pick's grep_live does); a fixed one is matched by mini.pick. The first
-- action is mini.pick's choose (<CR>); the others and the toggle are custom
-- mappings. The preview is mini.pick's own (its toggle_preview key, <Tab>).

local M = {}

---@param source nodecode.PickerSource
---@return string
local function title_of(source)
  return type(source.title) == 'function' and source.title() or source.title
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
    local current = (MiniPick.get_picker_matches() or {}).current
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
  if source.toggle and type(source.toggle.key) == 'string' and source.toggle.key ~= '' then
    out.nodecode_toggle = {
      char = source.toggle.key,
      func = function()
        source.toggle.fn()
        MiniPick.set_picker_opts({ source = { name = title_of(source) } })
        MiniPick.set_picker_query(MiniPick.get_picker_query()) -- asks the source again
      end,
    }
  end
  return out
end

--- Show `source` in mini.pick (it returns when the picker stops).
---@param source nodecode.PickerSource
---@param opts? table MiniPick.start options laid over nodecode's
function M.pick(source, opts)
  local pick = require('mini.pick')
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
      pick.set_picker_items(items(source, ok and rows or {}), { do_match = false })
    end
  else
    spec.source.items = items(source, source.items)
  end
  local query = source.query or ''
  vim.schedule(function()
    if pick.is_picker_active() then
      pick.set_picker_query(vim.split(query, ''))
    end
  end)
  return pick.start(vim.tbl_deep_extend('force', spec, opts or {}))
end

return M
