-- The folds of ui/transcript.lua's buffer writer (T): manual folds,
-- remembered as extmark pairs so every window showing the buffer can get them
-- back (T:refold); T:prepend puts a list writer's lines, folds and costs above
-- the text; T.foldtext is the chat's 'foldtext'. M.install gives T these.

local M = {}

local ns = vim.api.nvim_create_namespace('nodecode_transcript')

---@param T table the buffer writer's class
function M.install(T)
  --- Fold rows [first, last] (0-based) in every window showing the buffer.
  ---@param first integer
  ---@param last integer
  function T:add_fold(first, last)
    local a = vim.api.nvim_buf_set_extmark(self.buf, ns, first, 0, {})
    local b = vim.api.nvim_buf_set_extmark(self.buf, ns, last, 0, {})
    table.insert(self.folds, { a, b })
    local follow = self:followers()
    for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
      vim.api.nvim_win_call(win, function()
        vim.cmd(('%d,%dfold'):format(first + 1, last + 1))
      end)
    end
    self:show_end(follow)
  end

  --- Recreate every fold in `win` (a window that just started showing the buffer).
  ---@param win integer
  function T:refold(win)
    vim.api.nvim_win_call(win, function()
      vim.cmd('normal! zE')
      for _, pair in ipairs(self.folds) do
        local a = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, pair[1], {})
        local b = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, pair[2], {})
        if a[1] and b[1] and b[1] > a[1] then
          vim.cmd(('%d,%dfold'):format(a[1] + 1, b[1] + 1))
        end
      end
    end)
  end

  --- Put `older` (a T.lines() transcript of what came before) above the text,
  --- with its folds, in one change; each window keeps what it showed (a
  --- following one, the end). The join is the blank line an ask starts with.
  ---@param older nodecode.Transcript
  function T:prepend(older)
    local n, last = self:tail()
    local empty = n == 1 and last == ''
    if empty then -- nothing here yet: the buffer takes older's state as well
      self.need_header, self.after_block = older.need_header, older.after_block
    else
      older:paragraph()
    end
    local rows = older.rows
    if not empty then
      rows[#rows] = nil -- the line the text here starts on
    end
    if #rows == 0 then
      return
    end
    local follow = self:followers()
    vim.bo[self.buf].modifiable = true
    vim.api.nvim_buf_set_lines(self.buf, 0, empty and -1 or 0, true, rows)
    vim.bo[self.buf].modifiable = false
    local commands = {}
    for _, f in ipairs(older.folds) do
      table.insert(self.folds, { self:anchor(f[1]), self:anchor(f[2]) })
      commands[#commands + 1] = ('%d,%dfold'):format(f[1] + 1, f[2] + 1)
    end
    require('nodecode.ui.transcript_cost').draw(self.buf, older.costs or {})
    for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
      vim.api.nvim_win_call(win, function()
        for _, c in ipairs(commands) do
          vim.cmd(c)
        end
      end)
    end
    self:show_end(follow)
  end

  --- Fold text: `▸ call #5  ;; what it is for  · 7 lines` (for 'foldtext').
  ---@return table chunks
  function T.foldtext()
    local s, e = vim.v.foldstart, vim.v.foldend
    local lines = vim.api.nvim_buf_get_lines(0, s - 1, math.min(s + 1, e), false)
    local label = (lines[1] or ''):match('^```%S*%s*(.-)%s*$') or ''
    return {
      { '▸ ', 'Comment' },
      { label, 'Title' },
      { '  ' .. vim.trim(lines[2] or ''), 'Normal' },
      { ('  · %d lines'):format(e - s + 1), 'Comment' },
    }
  end
end

return M
