-- The telescope backend of ui/picker.lua: one nodecode.PickerSource shown
-- with telescope (dynamic sources re-asked per keystroke, the toggle key
-- refreshing the finder, each action on its own key in both modes).

local M = {}

---@param source nodecode.PickerSource
---@return string
local function title_of(source)
  return type(source.title) == 'function' and source.title() or source.title
end

---@param source nodecode.PickerSource
local function finder(source)
  local finders = require('telescope.finders')
  local function entry(it)
    local text = source.text(it):gsub('\n', ' ')
    return { value = it, display = text, ordinal = text }
  end
  if type(source.items) == 'function' then
    return finders.new_dynamic({ fn = source.items, entry_maker = entry })
  end
  return finders.new_table({ results = source.items, entry_maker = entry })
end

--- Show `source` in telescope.
---@param source nodecode.PickerSource
---@param opts? table telescope picker options
function M.pick(source, opts)
  opts = opts or {}
  local pickers = require('telescope.pickers')
  local previewers = require('telescope.previewers')
  local sorters = require('telescope.sorters')
  local conf = require('telescope.config').values
  local actions = require('telescope.actions')
  local state = require('telescope.actions.state')
  local dynamic = type(source.items) == 'function'
  pickers.new(opts, {
    prompt_title = title_of(source),
    default_text = source.query,
    finder = finder(source),
    sorter = dynamic and sorters.highlighter_only(opts) or conf.generic_sorter(opts),
    previewer = source.preview and previewers.new_buffer_previewer({
      title = 'entry',
      define_preview = function(self, entry)
        local ok, lines = pcall(source.preview, entry.value)
        vim.api.nvim_buf_set_lines(self.state.bufnr, 0, -1, false, ok and lines or { tostring(lines) })
      end,
    }) or nil,
    attach_mappings = function(prompt_bufnr, map)
      local function run(a)
        return function()
          local sel = state.get_selected_entry()
          actions.close(prompt_bufnr)
          if sel then
            vim.schedule(function()
              a.fn(sel.value)
            end)
          end
        end
      end
      actions.select_default:replace(run(source.actions[1]))
      for _, a in ipairs(source.actions) do
        if type(a.key) == 'string' and a.key ~= '' then
          map({ 'i', 'n' }, a.key, run(a))
        end
      end
      if source.toggle and type(source.toggle.key) == 'string' then
        map({ 'i', 'n' }, source.toggle.key, function()
          source.toggle.fn()
          local picker = state.get_current_picker(prompt_bufnr)
          picker:refresh(finder(source), { reset_prompt = false })
          pcall(function()
            picker.prompt_border:change_title(title_of(source))
          end)
        end)
      end
      return true
    end,
  }):find()
end

return M
