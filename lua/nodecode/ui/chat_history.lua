-- Loading the session's history into the chat (ui/chat.lua): the host sends
-- it in parts, newest first (M.on_history), each drawn above what the chat
-- shows: Neovim never waits for the host to start nor for a long history to
-- be read and drawn. M.install gives the chat its functions for it.

local H = {}

local Transcript = require('nodecode.ui.transcript')

local function message()
  return require('nodecode.message')
end

---@param M table the chat module
---@param chats table<integer, nodecode.ChatState> every tab's chat
---@return fun(state: nodecode.ChatState) load asks for a chat's history
function H.install(M, chats)
  local tokens = 0 -- one count for every chat: a token names its chat

  ---@param token integer
  ---@return nodecode.ChatState?
  local function chat_of_token(token)
    for _, state in pairs(chats) do
      if state.token == token then
        return state
      end
    end
  end

  ---@param state nodecode.ChatState
  ---@param part integer
  local function ask_part(state, part)
    local rpc = require('nodecode.rpc')
    return pcall(rpc.within, state.tab, rpc.notify, 'history', state.token, part)
  end

  --- Ask the host for a chat's session's history, which arrives in parts,
  --- newest first (M.on_history). A history asked for before is dropped.
  ---@param state nodecode.ChatState
  local function load_history(state)
    tokens = tokens + 1
    state.token = tokens
    local ok, err = ask_part(state, 1)
    if not ok then
      state.token = nil
      state.view:quote('error', message().reason(err))
      message().caught(err)
    end
  end

  --- Is a chat's history still arriving? (Tests and :checkhealth look.)
  ---@return boolean
  function M.loading()
    for _, state in pairs(chats) do
      if state.token ~= nil then
        return true
      end
    end
    return false
  end

  --- The host died before it answered: the histories asked for never come.
  ---@param why string
  function M.without_host(why)
    for _, state in pairs(chats) do
      if state.token and state.buf and vim.api.nvim_buf_is_valid(state.buf) then
        state.token = nil
        state.view:quote('error', why)
      end
    end
  end

  --- A part of the history (the host's `history` event): drawn above what the
  --- chat shows, then the next older part is asked for.
  ---@param ev { token: integer, part: integer, rows?: table[], last: boolean, error?: string }
  function M.on_history(ev)
    local state = chat_of_token(ev.token)
    if not (state and state.buf and vim.api.nvim_buf_is_valid(state.buf)) then
      return -- asked for by a chat since reloaded, wiped or closed
    end
    if type(ev.error) == 'string' then
      state.token = nil
      state.view:quote('error', ev.error)
      return message().error('%s', ev.error)
    end
    local older = Transcript.lines()
    older:history(ev.rows or {})
    state.view:prepend(older)
    if ev.last then
      state.token = nil
      return require('nodecode.ui.hints').empty_chat(state.buf)
    end
    local ok, err = ask_part(state, ev.part + 1)
    if not ok then
      state.token = nil
      message().caught(err)
    end
  end

  return load_history
end

return H
