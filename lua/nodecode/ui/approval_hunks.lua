-- A write's hunks in the approval window (ui/approval.lua), each taken or
-- rejected on its own: a mark at the end of each `@@` line says what was
-- chosen, a rejection may carry a reason, and a hunk's proposed lines may be
-- edited in a scratch buffer (`:w` keeps the edit) before anything is written.
-- The confirm key sends the choices; the host writes exactly the hunks taken
-- (python/nodecode/cells/hunks.py) and the result tells the model which.

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('nodecode_approval_hunks')

---@class nodecode.ApprovalHunk
---@field n integer its number, as the result names it
---@field at integer the 1-based diff line of its @@
---@field lines string[] its proposed lines
---@field editable boolean false when its lines were redacted
---@field take? boolean nil: not chosen yet
---@field reason? string why it was rejected
---@field edited? string[] the person's lines in place of `lines`
---@field mark? integer its extmark on the @@ line

---@class nodecode.HunkReview
---@field buf integer
---@field win integer
---@field path string
---@field hunks nodecode.ApprovalHunk[]

--- The @@ line (0-based) of hunk `h`, where its mark now is.
---@param r nodecode.HunkReview
---@param h nodecode.ApprovalHunk
---@return integer
local function row(r, h)
  return api.nvim_buf_get_extmark_by_id(r.buf, ns, h.mark, {})[1]
end

--- What the mark of hunk `h` says, and its highlight.
---@param h nodecode.ApprovalHunk
---@param total integer
---@return string, string
local function label(h, total)
  local name = ('hunk %d of %d'):format(h.n, total)
  if h.take == nil then
    return '  · ' .. name, 'Comment'
  elseif h.take then
    return ('  ✓ %s: take%s'):format(name, h.edited and ', as edited' or ''),
      h.edited and 'DiagnosticWarn' or 'DiagnosticOk'
  end
  return ('  ✗ %s: reject%s'):format(name, h.reason and (': ' .. h.reason) or ''),
    'DiagnosticError'
end

---@param r nodecode.HunkReview
---@param h nodecode.ApprovalHunk
local function mark(r, h)
  local text, hl = label(h, #r.hunks)
  h.mark = api.nvim_buf_set_extmark(r.buf, ns, h.mark and row(r, h) or h.at - 1, 0, {
    id = h.mark,
    virt_text = { { text, hl } },
    virt_text_pos = 'eol',
  })
end

--- The hunk under the cursor: the last whose @@ is at or above it (the first
--- when the cursor is above them all).
---@param r nodecode.HunkReview
---@return nodecode.ApprovalHunk
function M.current(r)
  local cur = api.nvim_win_get_cursor(r.win)[1] - 1
  local found = r.hunks[1]
  for _, h in ipairs(r.hunks) do
    if row(r, h) <= cur then
      found = h
    end
  end
  return found
end

---@param r nodecode.HunkReview
---@param step integer 1: the next hunk, -1: the previous
function M.move(r, step)
  local cur = api.nvim_win_get_cursor(r.win)[1] - 1
  local first, last = (step > 0 and 1 or #r.hunks), (step > 0 and #r.hunks or 1)
  for i = first, last, step do
    local at = row(r, r.hunks[i])
    if (step > 0 and at > cur) or (step < 0 and at < cur) then
      return api.nvim_win_set_cursor(r.win, { at + 1, 0 })
    end
  end
end

--- Take (or reject, with an optional reason) hunk `h` (nil: the one under the
--- cursor), then move to the hunk after it.
---@param r nodecode.HunkReview
---@param take boolean
---@param reason? string
---@param h? nodecode.ApprovalHunk
function M.choose(r, take, reason, h)
  if not api.nvim_win_is_valid(r.win) then
    return -- answered meanwhile (a reason typed after the window closed)
  end
  h = h or M.current(r)
  h.take, h.reason = take, reason
  mark(r, h)
  for i, o in ipairs(r.hunks) do
    if o == h and r.hunks[i + 1] then
      api.nvim_win_set_cursor(r.win, { row(r, r.hunks[i + 1]) + 1, 0 })
    end
  end
end

--- Show hunk `h` with the person's lines: its old lines (the context between
--- its changes too) as removed, then theirs as added, its context kept.
---@param r nodecode.HunkReview
---@param h nodecode.ApprovalHunk
local function render(r, h)
  local from = row(r, h) + 1
  local to = api.nvim_buf_line_count(r.buf)
  for _, o in ipairs(r.hunks) do
    if o.n > h.n then
      to = row(r, o)
      break
    end
  end
  local body = api.nvim_buf_get_lines(r.buf, from, to, false)
  for i, l in ipairs(body) do -- a cut diff ends with a line that is no diff line
    if not l:match('^[ +%-\\]') then
      body, to = vim.list_slice(body, 1, i - 1), from + i - 1
      break
    end
  end
  local first, last = #body + 1, 0
  for i, l in ipairs(body) do
    if l:match('^[+%-]') then
      first, last = math.min(first, i), i
    end
  end
  local out = vim.list_slice(body, 1, first - 1)
  for i = first, last do
    if body[i]:match('^[ %-]') then -- the old lines (not the added, nor a "\ No newline")
      out[#out + 1] = '-' .. body[i]:sub(2)
    end
  end
  for _, l in ipairs(h.edited) do
    out[#out + 1] = '+' .. l
  end
  vim.list_extend(out, vim.list_slice(body, last + 1, #body))
  vim.bo[r.buf].modifiable = true
  api.nvim_buf_set_lines(r.buf, from, to, false, out)
  vim.bo[r.buf].modifiable = false
end

--- Edit the proposed lines of the hunk under the cursor in a scratch buffer
--- over the window: `:w` keeps them (the hunk is then taken, as edited), `q`
--- drops the edit.
---@param r nodecode.HunkReview
---@return integer? win
function M.edit(r)
  local h = M.current(r)
  if not h.editable then
    require('nodecode.message').warn('hunk %d holds redacted text: it cannot be edited here', h.n)
    return
  end
  local buf = api.nvim_create_buf(false, true)
  pcall(api.nvim_buf_set_name, buf, ('nodecode://approval/hunk-%d'):format(h.n))
  api.nvim_buf_set_lines(buf, 0, -1, false, h.edited or h.lines)
  vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].modified = 'acwrite', 'wipe', false
  vim.bo[buf].filetype = vim.filetype.match({ filename = r.path }) or ''
  local width = math.min(api.nvim_win_get_width(r.win), vim.o.columns - 4)
  local height = math.max(3, math.min(api.nvim_buf_line_count(buf) + 1, vim.o.lines - 8))
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    border = 'rounded',
    title = (' hunk %d of %s: its new lines '):format(h.n, r.path),
    footer = ' :w keep the edit (take the hunk) · q drop it ',
    footer_pos = 'center',
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2),
    col = math.floor((vim.o.columns - width) / 2),
    zindex = 60,
  })
  local function back()
    pcall(api.nvim_win_close, win, true)
    if api.nvim_win_is_valid(r.win) then
      api.nvim_set_current_win(r.win)
    end
  end
  api.nvim_create_autocmd('BufWriteCmd', {
    buffer = buf,
    callback = function()
      vim.bo[buf].modified = false
      if not api.nvim_buf_is_valid(r.buf) then -- the approval was answered meanwhile
        require('nodecode.message').warn(
          'hunk %d: the approval is closed; the edit is not kept',
          h.n
        )
        return vim.schedule(back)
      end
      h.edited, h.take, h.reason = api.nvim_buf_get_lines(buf, 0, -1, false), true, nil
      render(r, h)
      mark(r, h)
      vim.schedule(back)
    end,
  })
  vim.keymap.set('n', 'q', back, { buffer = buf, nowait = true, desc = 'nodecode: drop the edit' })
  return win
end

--- The answer to send: every chosen hunk ({n, take, reason?, lines?}), and
--- what the chat says of it; nil when no hunk is chosen yet.
---@param r nodecode.HunkReview
---@return table? extra, string? said, boolean? any_taken
function M.answer(r)
  local picked, took, said, left = {}, {}, {}, {}
  for _, h in ipairs(r.hunks) do
    if h.take ~= nil then
      picked[#picked + 1] = { n = h.n, take = h.take, reason = h.reason, lines = h.edited }
    end
    if h.take then
      took[#took + 1] = h.n .. (h.edited and ' (edited)' or '')
    elseif h.take == false then
      said[#said + 1] = ('rejected hunk %d%s'):format(h.n, h.reason and (': ' .. h.reason) or '')
    else
      left[#left + 1] = tostring(h.n)
    end
  end
  if #picked == 0 then
    return nil
  end
  if #took > 0 then
    table.insert(
      said,
      1,
      ('took hunk%s %s'):format(#took > 1 and 's' or '', table.concat(took, ', '))
    )
  end
  if #left > 0 then
    said[#said + 1] = ('left out unreviewed hunk%s %s'):format(
      #left > 1 and 's' or '',
      table.concat(left, ', ')
    )
  end
  return { hunks = picked }, table.concat(said, '; '), #took > 0
end

--- Start the review of `hunks` (the approve event's) shown in `buf`/`win`.
---@param buf integer
---@param win integer
---@param path string the file, for the edit buffer's filetype and title
---@param hunks nodecode.ApprovalHunk[]
---@return nodecode.HunkReview
function M.start(buf, win, path, hunks)
  local r = { buf = buf, win = win, path = path, hunks = {} }
  for i, h in ipairs(hunks) do
    r.hunks[i] = {
      n = h.n,
      at = h.at,
      lines = h.lines or {},
      editable = h.editable ~= false,
    }
    mark(r, r.hunks[i])
  end
  return r
end

--- Every hunk's state and mark, as shown (tests look at it).
---@param r nodecode.HunkReview
---@return { n: integer, row: integer, take?: boolean, reason?: string, mark: string }[]
function M.state(r)
  return vim.tbl_map(function(h)
    return {
      n = h.n,
      row = row(r, h) + 1,
      take = h.take,
      reason = h.reason,
      mark = (label(h, #r.hunks)),
    }
  end, r.hunks)
end

return M
