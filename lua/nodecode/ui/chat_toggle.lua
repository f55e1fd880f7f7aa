-- :NodecodeToggle: hide the chat (and its input area) in this tab, or show
-- it again where it was (ui/chat.lua installs it).

local T = {}

--- 'chat' or 'input' for a chat or an input area of any tab (`nodecode://chat`,
--- `nodecode://chat/N`, …), else nil (a turn the tree opened is no chat).
---@param buf integer
---@return 'chat'|'input'|nil
function T.kind(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  for _, kind in ipairs({ 'chat', 'input' }) do
    local base = 'nodecode://' .. kind
    if name == base or name:match('^' .. vim.pesc(base) .. '/%d+$') then
      return kind
    end
  end
end

---@class nodecode.ChatParts
---@field buf fun(): integer this tab's chat buffer, made when missing
---@field chat_of fun(): nodecode.ChatState this tab's chat
---@field setup_win fun(state: nodecode.ChatState, win: integer)

---@param M table the chat module
---@param parts nodecode.ChatParts
function T.install(M, parts)
  --- The window next to `win` in direction `dir` ('k' above, 'j' below) in the
  --- same column (same left edge and width); nil when there is none.
  ---@param win integer
  ---@param dir 'k'|'j'
  ---@return integer?
  local function column_neighbour(win, dir)
    local other = vim.api.nvim_win_call(win, function()
      return vim.fn.win_getid(vim.fn.winnr(dir))
    end)
    if other == 0 or other == win then
      return nil
    end
    local same = vim.fn.win_screenpos(other)[2] == vim.fn.win_screenpos(win)[2]
      and vim.api.nvim_win_get_width(other) == vim.api.nvim_win_get_width(win)
    return same and other or nil
  end

  ---@type table<integer, { win: integer, dir: 'k'|'j', height: integer }>
  local hidden = {} -- per tab: where :NodecodeToggle hid the chat

  --- Show the chat again where :NodecodeToggle hid it: in its column, next to
  --- the window it shared that column with (the context buffer opened above
  --- it). A new split across the whole screen would squeeze that column.
  ---@param tab integer
  ---@return boolean shown
  local function show_where_hidden(tab)
    local h = hidden[tab]
    hidden[tab] = nil
    if not (h and vim.api.nvim_win_is_valid(h.win)) then
      return false
    end
    if vim.api.nvim_win_get_tabpage(h.win) ~= tab then
      return false
    end
    local height = math.min(h.height, math.max(1, vim.api.nvim_win_get_height(h.win) - 2))
    local win = vim.api.nvim_open_win(parts.buf(), true, {
      split = h.dir == 'k' and 'below' or 'above',
      win = h.win,
      height = height,
    })
    local state = parts.chat_of()
    parts.setup_win(state, win)
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(state.buf), 0 })
    require('nodecode.ui.status').refresh()
    return true
  end

  --- :NodecodeToggle — hide the chat (and its input area) in this tab, or show
  --- it where it was.
  function M.toggle()
    local tab = vim.api.nvim_get_current_tabpage()
    local wins, chat, input = {}, nil, nil
    for _, w in ipairs(vim.api.nvim_tabpage_list_wins(tab)) do
      local kind = T.kind(vim.api.nvim_win_get_buf(w))
      if kind then
        wins[#wins + 1] = w
        chat = kind == 'chat' and (chat or w) or chat
        input = kind == 'input' and w or input
      end
    end
    if #wins == 0 then
      if show_where_hidden(tab) then
        return
      end
      return M.open()
    end
    if chat then
      local above = column_neighbour(chat, 'k')
      local below = not above and column_neighbour(input or chat, 'j') or nil
      if above or below then
        local height = vim.api.nvim_win_get_height(chat)
        hidden[tab] = { win = above or below, dir = above and 'k' or 'j', height = height }
      end
    end
    for _, w in ipairs(wins) do
      if #vim.api.nvim_tabpage_list_wins(tab) > 1 then
        vim.api.nvim_win_close(w, false)
      else -- the last window: it shows another buffer instead
        vim.api.nvim_win_call(w, function()
          local alt = vim.fn.bufnr('#')
          local ours = alt > 0 and T.kind(alt) == 'chat'
          vim.cmd(alt > 0 and not ours and 'buffer #' or 'enew')
        end)
      end
    end
  end
end

return T
