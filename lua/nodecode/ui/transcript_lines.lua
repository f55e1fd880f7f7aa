-- The list writer of ui/transcript.lua (T.lines()): a transcript written into
-- a list of lines (`rows`) instead of a buffer, for T:prepend — the same
-- methods, with rows in place of extmarks and no windows to follow. Its cost
-- methods are ui/transcript_cost.lua's.

local M = {}

--- The list writer's class, its methods falling back to the buffer writer's.
---@param T table the buffer writer's class (ui/transcript.lua)
---@return table L
function M.class(T)
  local L = setmetatable({}, { __index = T })
  L.__index = L

  function L:count()
    return #self.rows
  end

  function L:line(row)
    return self.rows[row + 1]
  end

  function L:anchor(row)
    return row -- nothing is written above it
  end

  function L:row(anchor)
    return anchor
  end

  function L:followers()
    return {}
  end

  function L:follow_all() end

  function L:write(text)
    local parts = vim.split(text, '\n', { plain = true })
    local rows = self.rows
    rows[#rows] = rows[#rows] .. parts[1]
    for i = 2, #parts do
      rows[#rows + 1] = parts[i]
    end
  end

  function L:add_fold(first, last)
    self.folds[#self.folds + 1] = { first, last }
  end

  return L
end

return M
