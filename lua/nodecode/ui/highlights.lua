-- nodecode's highlight groups, each a default link to a standard group that
-- a colorscheme can override (:help nodecode-highlights lists them). Defined
-- when the plugin loads, and again after every :colorscheme.

local M = {}

---@type table<string, string>
M.LINKS = {
  NodecodeExport = 'Comment', -- context.txt line 1
  NodecodeHeader = 'Title', -- [[m:NONCE ID ROLE]] headers and fold text
  NodecodeNote = 'Special', -- [[note]] lines
  NodecodeTokens = 'Comment', -- token counts on headers
  NodecodeCached = 'DiagnosticHint', -- the line where the cached prefix ends
  NodecodeHead = 'DiagnosticOk', -- the head in the tree
  NodecodeUndone = 'Comment', -- turns off the head's path
  NodecodeMatch = 'Search', -- the built-in picker: the selected row
  NodecodeProgress = 'DiagnosticInfo', -- the chat's spinner, phase and elapsed time
}

local done = false

local function apply()
  for group, link in pairs(M.LINKS) do
    vim.api.nvim_set_hl(0, group, { link = link, default = true })
  end
end

--- Define the groups (once; again after every :colorscheme).
function M.setup()
  if done then
    return
  end
  done = true
  apply()
  vim.api.nvim_create_autocmd('ColorScheme', {
    group = vim.api.nvim_create_augroup('nodecode_highlights', { clear = true }),
    callback = apply,
  })
end

return M
