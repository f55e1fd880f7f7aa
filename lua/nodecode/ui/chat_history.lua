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
---@param state nodecode.ChatState
---@return fun() load ask for the history (a history asked for before is dropped)
function H.install(M, state)
  --- Ask the host for the session's history, which arrives in parts, newest
  --- first (M.on_history). A history asked for before is dropped.
  local function load_history()
    state.token = (state.token or 0) + 1
    local ok, err = pcall(require('nodecode.rpc').notify, 'history', state.token, 1)
    if not ok then
      state.token = nil
      state.view:quote('error', message().reason(err))
      message().caught(err)
    end
  end

  --- Is the session's history still arriving? (Tests and :checkhealth look.)
  ---@return boolean
  function M.loading()
    return state.token ~= nil
  end

  --- The host died before it answered: the history asked for never comes.
  ---@param why string
  function M.without_host(why)
    if state.token and state.buf and vim.api.nvim_buf_is_valid(state.buf) then
      state.token = nil
      state.view:quote('error', why)
    end
  end

  --- A part of the history (the host's `history` event): drawn above what the
  --- chat shows, then the next older part is asked for.
  ---@param ev { token: integer, part: integer, rows?: table[], last: boolean, error?: string }
  function M.on_history(ev)
    if ev.token ~= state.token or not (state.buf and vim.api.nvim_buf_is_valid(state.buf)) then
      return -- asked for by a chat since reloaded or wiped
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
    local ok, err = pcall(require('nodecode.rpc').notify, 'history', ev.token, ev.part + 1)
    if not ok then
      state.token = nil
      message().caught(err)
    end
  end

  return load_history
end

return H
