-- Approvals shown the way a person checks them (approve = 'diff', the
-- default): a float (or a split) `nodecode://approval` holding a write as its
-- unified diff (filetype diff, so it is highlighted as one) or a command with
-- the directory it runs in, and keys to accept, reject, reject with a reason
-- (the reason becomes the call's result, so the agent learns why) or allow the
-- kind for the rest of the session. A write's hunks may also be taken or
-- rejected one by one, and edited, before a confirm key writes the hunks
-- taken (ui/approval_hunks.lua).

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
---@field hunks? nodecode.ApprovalHunk[] a write's hunks

--- The window showing the open approval, if any (tests look at it).
---@type integer?
M.win = nil

--- The hunk review of the open write, if any (tests look at it).
---@type nodecode.HunkReview?
M.review = nil

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

--- The footer: each configured key and what it does; a write of two hunks or
--- more adds the hunk keys, in short when the long form would not fit.
---@param kind string
---@param hunks? integer how many hunks the write has
---@return string
function M.footer(kind, hunks)
  local k = keys()
  local function line(choices)
    local parts = {}
    for _, a in ipairs(choices) do
      if type(k[a.name]) == 'string' and k[a.name] ~= '' then
        parts[#parts + 1] = ('%s %s'):format(k[a.name], a.label)
      end
    end
    return ' ' .. table.concat(parts, ' · ') .. ' '
  end
  local long = line(M.choices(kind, hunks))
  if (hunks or 0) < 2 or vim.fn.strdisplaywidth(long) <= vim.o.columns - 6 then
    return long
  end
  return line({
    { name = 'accept', label = 'all' },
    { name = 'reject', label = 'none' },
    { name = 'take_hunk', label = 'take' },
    { name = 'reject_hunk', label = 'reject' },
    { name = 'edit_hunk', label = 'edit' },
    { name = 'confirm', label = 'write' },
    { name = 'help', label = 'keys' },
  })
end

--- The choices, in the order shown (names are keys of keymaps.approval).
---@param kind string
---@param hunks? integer how many hunks a write has (2 or more: the hunk keys too)
---@return { name: string, label: string }[]
function M.choices(kind, hunks)
  local out = {
    { name = 'accept', label = 'accept' },
    { name = 'reject', label = 'reject' },
    { name = 'reason', label = 'reject with a reason' },
    {
      name = 'always',
      label = ('always %s this session'):format(kind == 'shell' and 'run' or kind),
    },
  }
  if (hunks or 0) >= 2 then
    vim.list_extend(out, {
      { name = 'take_hunk', label = 'take hunk' },
      { name = 'reject_hunk', label = 'reject hunk' },
      { name = 'edit_hunk', label = 'edit hunk' },
      { name = 'next_hunk', label = 'next hunk' },
      { name = 'confirm', label = 'write the hunks taken' },
    })
  end
  out[#out + 1] = { name = 'help', label = 'keys' }
  return out
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

--- The keys of a write's hunks (ui/approval_hunks.lua) added to `actions`.
---@param actions table<string, fun()>
---@param review nodecode.HunkReview
---@param answer fun(yes: boolean, extra: table?, what: string)
local function hunk_actions(actions, review, answer)
  local H = require('nodecode.ui.approval_hunks')
  actions.next_hunk = function()
    H.move(review, 1)
  end
  actions.prev_hunk = function()
    H.move(review, -1)
  end
  actions.take_hunk = function()
    H.choose(review, true)
  end
  actions.reject_hunk = function()
    H.choose(review, false)
  end
  actions.reject_hunk_reason = function()
    local h = H.current(review)
    vim.ui.input({ prompt = ('nodecode: why not hunk %d? '):format(h.n) }, function(why)
      if why then -- nil: the prompt was cancelled, nothing is chosen
        H.choose(review, false, vim.trim(why) ~= '' and vim.trim(why) or nil, h)
      end
    end)
  end
  actions.edit_hunk = function()
    H.edit(review)
  end
  actions.confirm = function()
    local extra, said, took = H.answer(review)
    if not extra then
      local k = keys()
      return require('nodecode.message').warn(
        'no hunk taken or rejected yet: %s takes the hunk under the cursor, %s rejects it '
          .. '(%s and %s answer the whole change)',
        k.take_hunk or '-',
        k.reject_hunk or '-',
        k.accept or '-',
        k.reject or '-'
      )
    end
    answer(true, extra, took and said or ('refused: ' .. said))
  end
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
  local hunks = ev.approval == 'write' and type(ev.hunks) == 'table' and ev.hunks or {}
  local win = window(buf, lines, title, M.footer(ev.approval, #hunks))
  M.win = win
  M.review = #hunks > 0 and require('nodecode.ui.approval_hunks').start(buf, win, ev.detail, hunks)
    or nil
  local answered = false

  local function answer(yes, extra, what)
    if answered then
      return
    end
    answered = true
    M.win, M.review = nil, nil
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
  if M.review then
    hunk_actions(actions, M.review, answer)
  end
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
