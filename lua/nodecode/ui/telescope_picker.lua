-- The telescope backend of ui/picker.lua: one nodecode.PickerSource shown
-- with telescope (dynamic sources re-asked per keystroke, the toggle key
-- refreshing the finder, each action on its own key in both modes). Options
-- come from telescope's setup{ extensions = { nodecode = … } }, then from the
-- call (`:Telescope nodecode recall theme=dropdown`): layouts, themes and
-- telescope's own defaults apply as to any picker.

local M = {}

--- extensions.nodecode of telescope's setup (the extension's setup stores it).
---@type table
M.config = {}

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

--- The picker options: the extension's config under the call's, a theme
--- named in either applied (telescope applies a `theme=` of the command itself).
---@param opts? table
---@return table
function M.options(opts)
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.config), opts or {})
  local theme = merged.theme
  if type(theme) == 'string' and theme ~= '' then
    local themes = require('telescope.themes')
    local make = themes[theme] or themes['get_' .. theme]
    if not make then
      error(('nodecode: telescope has no theme %q'):format(theme), 0)
    end
    merged.theme = nil
    merged = make(merged)
  end
  return merged
end

---@param source nodecode.PickerSource
local function previewer(source)
  return require('telescope.previewers').new_buffer_previewer({
    title = 'entry',
    define_preview = function(self, entry)
      local ok, lines = pcall(source.preview, entry.value)
      vim.api.nvim_buf_set_lines(
        self.state.bufnr,
        0,
        -1,
        false,
        ok and lines or { tostring(lines) }
      )
    end,
  })
end

--- Show `source` in telescope.
---@param source nodecode.PickerSource
---@param opts? table telescope picker options
function M.pick(source, opts)
  pcall(require('telescope').load_extension, 'nodecode') -- its setup brings extensions.nodecode
  opts = M.options(opts)
  local pickers = require('telescope.pickers')
  local sorters = require('telescope.sorters')
  local conf = require('telescope.config').values
  local actions = require('telescope.actions')
  local state = require('telescope.actions.state')
  local dynamic = type(source.items) == 'function'
  pickers
    .new(opts, {
      prompt_title = title_of(source),
      results_title = source.hints and #source.hints > 0 and table.concat(source.hints, ' · ')
        or nil,
      default_text = source.query,
      finder = finder(source),
      sorter = dynamic and sorters.highlighter_only(opts) or conf.generic_sorter(opts),
      previewer = source.preview and previewer(source) or nil,
      attach_mappings = function(prompt_bufnr, map)
        -- The row under the cursor; before telescope has drawn its selection
        -- (a key typed as the first rows appear) the best row, which is the
        -- one it will select. With no row at all the picker stays open, as
        -- telescope's own select does.
        local function chosen()
          local sel = state.get_selected_entry()
          if sel then
            return sel
          end
          local picker = state.get_current_picker(prompt_bufnr)
          local manager = picker and picker.manager
          return manager and manager:num_results() > 0 and manager:get_entry(1) or nil
        end
        local function run(a)
          return function()
            local sel = chosen()
            if not sel then
              return
            end
            actions.close(prompt_bufnr)
            vim.schedule(function()
              a.fn(sel.value)
            end)
          end
        end
        actions.select_default:replace(run(source.actions[1]))
        -- Telescope's split, vsplit and tab selects would open a buffer named
        -- after the row's text: our rows are no files, they run <CR>'s action.
        actions.select_horizontal:replace(run(source.actions[1]))
        actions.select_vertical:replace(run(source.actions[1]))
        actions.select_tab:replace(run(source.actions[1]))
        for i, a in ipairs(source.actions) do
          -- The first action is telescope's own select (<CR>); the rest get their keys.
          if i > 1 and type(a.key) == 'string' and a.key ~= '' then
            map({ 'i', 'n' }, a.key, run(a), { desc = 'nodecode: ' .. a.name })
          end
        end
        if source.toggle and type(source.toggle.key) == 'string' and source.toggle.key ~= '' then
          map({ 'i', 'n' }, source.toggle.key, function()
            source.toggle.fn()
            local picker = state.get_current_picker(prompt_bufnr)
            picker:refresh(finder(source), { reset_prompt = false })
            pcall(function()
              picker.prompt_border:change_title(title_of(source))
            end)
          end, { desc = 'nodecode: toggle' })
        end
        return true
      end,
    })
    :find()
end

return M
