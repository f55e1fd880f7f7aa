-- The fzf-lua backend of ui/picker.lua: a nodecode.PickerSource shown with
-- fzf-lua. A dynamic source is fzf_live (asked again for each query), a
-- fixed one fzf_exec (fzf filters it). Each line is `INDEX<Tab>TEXT`, fzf shows
-- the text; the index finds the item again. Keys are written as Neovim keys
-- (keymaps.picker) and turned into fzf's names (<M-y> → alt-y).

local M = {}

local NAMED = {
  cr = 'enter',
  esc = 'esc',
  tab = 'tab',
  ['s-tab'] = 'btab',
  bs = 'bspace',
  space = 'space',
  up = 'up',
  down = 'down',
  left = 'left',
  right = 'right',
  del = 'del',
  home = 'home',
  ['end'] = 'end',
}

--- A Neovim key (`<M-y>`, `<C-x>`, `<CR>`, `<F2>`) in fzf's spelling.
---@param key string
---@return string
function M.fzf_key(key)
  local inner = key:match('^<(.+)>$')
  if not inner then
    return key
  end
  local lower = inner:lower()
  local mod, rest = lower:match('^([mac])%-(.+)$')
  if mod then
    local name = NAMED[rest] or (#rest == 1 and inner:sub(-1)) or rest
    return (mod == 'c' and 'ctrl-' or 'alt-') .. name
  end
  return NAMED[lower] or lower
end

---@param source nodecode.PickerSource
---@return string
local function title_of(source)
  return type(source.title) == 'function' and source.title() or source.title
end

--- The previewer class: the source's preview in fzf-lua's preview window.
---@param source nodecode.PickerSource
---@param item_of fun(line: string): table?
local function previewer(source, item_of)
  local P = require('fzf-lua.previewer.builtin').base:extend()
  function P:populate_preview_buf(entry)
    local it = item_of(entry)
    local lines = { '' }
    if it then
      local ok, got = pcall(source.preview, it)
      lines = ok and got or { tostring(got) }
    end
    local buf = self:get_tmp_buffer()
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    self:set_preview_buf(buf)
    if self.win and self.win.update_preview_title then
      self.win:update_preview_title(' entry ')
    end
  end
  return {
    _ctor = function() -- fzf-lua makes the instance: P(previewer_opts, opts)
      return P
    end,
  }
end

--- Show `source` in fzf-lua.
---@param source nodecode.PickerSource
---@param opts? table fzf-lua options laid over nodecode's
function M.pick(source, opts)
  local fzf = require('fzf-lua')
  local shown = {} ---@type table[] the items of the lines fzf has now
  local function lines(query)
    local rows = source.items
    if type(rows) == 'function' then
      local ok, got = pcall(rows, query or '')
      rows = ok and got or {}
    end
    shown = rows
    local out = {}
    for i, it in ipairs(rows) do
      out[i] = ('%d\t%s'):format(i, (source.text(it):gsub('[\n\t]', ' ')))
    end
    return out
  end
  local function item_of(line)
    return shown[tonumber((line or ''):match('^(%d+)\t'))]
  end
  local actions = {}
  for i, a in ipairs(source.actions) do
    local key = i == 1 and 'enter' or (type(a.key) == 'string' and a.key ~= '' and M.fzf_key(a.key))
    if key then
      actions[key] = function(selected)
        local it = item_of(selected and selected[1])
        if it then
          vim.schedule(function()
            a.fn(it)
          end)
        end
      end
    end
  end
  if source.toggle and type(source.toggle.key) == 'string' and source.toggle.key ~= '' then
    actions[M.fzf_key(source.toggle.key)] = {
      fn = function()
        source.toggle.fn()
        local win = require('fzf-lua.win').__SELF() -- the title says what is searched now
        if win and win.update_main_title then
          pcall(win.update_main_title, win, ' ' .. title_of(source) .. ' ')
        end
      end,
      reload = true,
    }
  end
  -- The title is the window's (as the prompt it would push the typed query
  -- out of sight); the key hints are fzf's header line, the window's width.
  local hints = source.hints and #source.hints > 0 and table.concat(source.hints, ' · ') or nil
  local spec = vim.tbl_deep_extend('force', {
    prompt = '> ',
    query = source.query,
    winopts = { title = ' ' .. title_of(source) .. ' ' },
    fzf_opts = {
      ['--delimiter'] = '\t',
      ['--with-nth'] = '2..',
      ['--no-multi'] = true,
      ['--header'] = hints,
    },
    actions = actions,
    previewer = source.preview and previewer(source, item_of) or nil,
  }, opts or {})
  if type(source.items) == 'function' then
    return fzf.fzf_live(function(args)
      local query = type(args) == 'table' and args[1] or args
      return lines(query)
    end, spec)
  end
  return fzf.fzf_exec(lines(''), spec)
end

return M
