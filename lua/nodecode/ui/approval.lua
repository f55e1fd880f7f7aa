-- Approvals shown the way a person checks them (approve = 'diff', the
-- default): a float (or a split) `nodecode://approval` holding a write as its
-- unified diff (filetype diff, so it is highlighted as one) or a command with
-- the directory it runs in, and keys to accept, reject, reject with a reason
-- (the reason becomes the call's result, so the agent learns why) or allow the
-- kind for the rest of the session.

local M = {}

local api = vim.api
local NAME = 'nodecode://approval'

---@class nodecode.ApprovalEvent
---@field job integer
---@field id integer
---@field approval string write | shell
---@field detail string the path, or the command
---@field diff? string a write's unified diff
---@field cwd? string where a command runs

--- The window showing the open approval, if any (tests look at it).
---@type integer?
M.win = nil

---@param v any
local function text(v)
  return type(v) == 'string' and v or ''
end

--- What the window shows: a write's diff, or a command and its directory.
---@param ev nodecode.ApprovalEvent
---@return string[] lines, string filetype, string title
function M.lines(ev)
  if ev.approval == 'write' then
    local diff = text(ev.diff)
    local lines = diff ~= '' and vim.split(diff, '\n', { plain = true }) or { '(no change)' }
    return lines, 'diff', ('write %s'):format(ev.detail)
  end
  local lines = {}
  if text(ev.cwd) ~= '' then
    lines[1] = 'cwd: ' .. ev.cwd
  end
  for i, l in ipairs(vim.split(text(ev.detail), '\n', { plain = true })) do
    lines[#lines + 1] = (i == 1 and '$ ' or '  ') .. l
  end
  return lines, 'nodecode-approval', 'run a command'
end

--- The keys of the approval window, as configured (false: unmapped).
---@return table<string, string|false>
local function keys()
  return require('nodecode.config').get().keymaps.approval
end

--- The footer: each configured key and what it does.
---@param kind string
---@return string
function M.footer(kind)
  local k, parts = keys(), {}
  for _, a in ipairs(M.choices(kind)) do
    if type(k[a.name]) == 'string' and k[a.name] ~= '' then
      parts[#parts + 1] = ('%s %s'):format(k[a.name], a.label)
    end
  end
  return ' ' .. table.concat(parts, ' · ') .. ' '
end

--- The choices, in the order shown (names are keys of keymaps.approval).
---@param kind string
---@return { name: string, label: string }[]
function M.choices(kind)
  return {
    { name = 'accept', label = 'accept' },
    { name = 'reject', label = 'reject' },
    { name = 'reason', label = 'reject with a reason' },
    {
      name = 'always',
      label = ('always %s this session'):format(kind == 'shell' and 'run' or kind),
    },
    { name = 'help', label = 'keys' },
  }
end

---@param buf integer
---@param lines string[]
---@param ft string
local function fill(buf, lines, ft)
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable, vim.bo[buf].bufhidden = false, 'wipe'
  vim.bo[buf].filetype = ft
end

--- Open the window over `buf` per the `approval.window` option.
---@param buf integer
---@param lines string[]
---@param title string
---@param footer string
---@return integer win
local function window(buf, lines, title, footer)
  if require('nodecode.config').get().approval.window == 'split' then
    vim.cmd(('botright %dsplit'):format(math.min(#lines + 1, math.floor(vim.o.lines / 2))))
    local win = api.nvim_get_current_win()
    api.nvim_win_set_buf(win, buf)
    vim.wo[win][0].winbar = ' ' .. title .. ' ·' .. footer
    return win
  end
  local width = vim.fn.strdisplaywidth(footer) + 2
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l) + 2)
  end
  width = math.min(width, vim.o.columns - 4)
  local height = math.max(1, math.min(#lines, vim.o.lines - 6))
  return api.nvim_open_win(buf, true, {
    relative = 'editor',
    border = 'rounded',
    style = 'minimal',
    title = ' ' .. title .. ' ',
    footer = footer,
    footer_pos = 'center',
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
  })
end

--- Show approval `ev` and send the answer; `said` gets what the chat should
--- say of it ("approved", "refused: REASON", …).
---@param ev nodecode.ApprovalEvent
---@param said fun(text: string)
---@return integer win
function M.open(ev, said)
  local lines, ft, title = M.lines(ev)
  local from = api.nvim_get_current_win()
  local buf = api.nvim_create_buf(false, true)
  pcall(api.nvim_buf_set_name, buf, NAME)
  fill(buf, lines, ft)
  local win = window(buf, lines, title, M.footer(ev.approval))
  M.win = win
  local answered = false

  local function answer(yes, extra, what)
    if answered then
      return
    end
    answered = true
    M.win = nil
    pcall(api.nvim_win_close, win, true)
    if api.nvim_win_is_valid(from) then
      pcall(api.nvim_set_current_win, from)
    end
    local ok, err = pcall(require('nodecode.rpc').call, 'approval', ev.job, ev.id, yes, extra)
    said(what .. (ok and '' or (' (' .. require('nodecode.message').reason(err) .. ')')))
  end

  local always = ev.approval == 'shell' and 'run' or ev.approval
  local actions = {
    accept = function()
      answer(true, nil, 'approved')
    end,
    reject = function()
      answer(false, nil, 'refused')
    end,
    reason = function()
      vim.ui.input({ prompt = 'nodecode: why not? ' }, function(why)
        if why and vim.trim(why) ~= '' then
          answer(false, { reason = vim.trim(why) }, 'refused: ' .. vim.trim(why))
        end
      end)
    end,
    always = function()
      answer(true, { always = true }, ('approved (%s always allowed this session)'):format(always))
    end,
    help = function()
      require('nodecode.ui.hints').open('approval')
    end,
  }
  actions.close = actions.reject
  for name, lhs in pairs(keys()) do
    if type(lhs) == 'string' and lhs ~= '' and actions[name] then
      vim.keymap.set(
        'n',
        lhs,
        actions[name],
        { buffer = buf, nowait = true, desc = 'nodecode approval: ' .. name }
      )
    end
  end
  -- Closing the window any other way refuses: nothing runs unseen.
  api.nvim_create_autocmd('BufWipeout', {
    buffer = buf,
    once = true,
    callback = function()
      vim.schedule(function()
        answer(false, nil, 'refused')
      end)
    end,
  })
  return win
end

return M
