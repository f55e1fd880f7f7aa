-- Progress of the running turn, from the host's events: a spinner with the
-- elapsed time and the phase (sending, thinking, streaming, running a cell,
-- waiting for approval) at the end of the chat, the same text for statuslines
-- (require('nodecode').status()), and the User autocommands a statusline,
-- fidget or one's own config can follow (:help nodecode-events).

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('nodecode_progress')
local FRAMES = { '⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏' }
local PHASES = {
  sending = 'sending',
  thinking = 'thinking',
  streaming = 'streaming',
  retrying = 'waiting to retry',
  running = 'running a cell',
  approval = 'waiting for approval',
}

---@class nodecode.Progress
---@field job? integer the job shown
---@field started? integer vim.uv.now() when its first event came
---@field phase? string
---@field frame integer
---@field timer? uv.uv_timer_t
local state = { frame = 1 }

--- Whether a statusline has asked (only then is it redrawn on every tick).
M.wanted = false

---@param v any
local function nonil(v)
  if v == vim.NIL then
    return nil
  end
  if type(v) == 'table' then
    local out = {}
    for k, x in pairs(v) do
      out[k] = nonil(x)
    end
    return out
  end
  return v
end

--- Fire `User {name}` with `data` (errors in others' handlers become one message).
---@param name string
---@param data table
function M.fire(name, data)
  local ok, err =
    pcall(api.nvim_exec_autocmds, 'User', { pattern = name, data = data, modeline = false })
  if not ok then
    require('nodecode.message').error('a %s autocommand failed: %s', name, tostring(err))
  end
end

---@param ms integer
---@return string
local function elapsed(ms)
  local s = ms / 1000
  if s < 10 then
    return ('%.1fs'):format(s)
  elseif s < 60 then
    return ('%ds'):format(math.floor(s))
  end
  return ('%dm%02ds'):format(math.floor(s / 60), math.floor(s % 60))
end

--- The indicator's text, `⠋ streaming · 2.1s` ('' when nothing runs).
---@return string
function M.text()
  if not state.job then
    return ''
  end
  local phase = PHASES[state.phase] or state.phase or 'starting'
  return ('%s %s · %s'):format(FRAMES[state.frame], phase, elapsed(vim.uv.now() - state.started))
end

--- The statusline part (the indicator, '' when idle).
---@return string
function M.statusline()
  M.wanted = true
  return M.text()
end

---@return integer?
local function chat_buf()
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_get_name(b) == 'nodecode://chat' and api.nvim_buf_is_loaded(b) then
      return b
    end
  end
end

--- Draw the indicator after the chat's last line (or remove it when idle).
local function draw()
  local buf = chat_buf()
  if not buf then
    return
  end
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  if state.job and require('nodecode.config').get().chat.progress then
    local last = api.nvim_buf_line_count(buf) - 1
    api.nvim_buf_set_extmark(buf, ns, last, 0, {
      virt_text = { { ' ' .. M.text(), 'NodecodeProgress' } },
      virt_text_pos = 'eol',
    })
  end
end

local function tick()
  state.frame = state.frame % #FRAMES + 1
  draw()
  if M.wanted then
    pcall(vim.cmd, 'redrawstatus')
  end
end

---@param job integer
local function begin(job)
  require('nodecode.ui.highlights').setup()
  state.job, state.started, state.phase, state.frame = job, vim.uv.now(), nil, 1
  state.timer = state.timer or vim.uv.new_timer()
  state.timer:start(100, 100, vim.schedule_wrap(tick))
end

local function finish()
  state.job, state.phase = nil, nil
  if state.timer then
    state.timer:stop()
  end
  draw()
  if M.wanted then
    pcall(vim.cmd, 'redrawstatus')
  end
end

--- The indicator shown in the chat now, if any (tests look at it).
---@return string?
function M.shown()
  local buf = chat_buf()
  if not buf then
    return nil
  end
  local marks = api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })
  local m = marks[1]
  return m and m[4].virt_text and m[4].virt_text[1][1] or nil
end

--- Host events: follow the job, draw, fire the autocommands.
---@param ev table
function M.on_event(ev)
  if ev.kind ~= 'done' and state.job ~= ev.job then
    begin(ev.job)
  end
  if ev.kind == 'phase' then
    state.phase = ev.phase
  elseif ev.kind == 'request' then
    local data = nonil(ev)
    data.kind, data.state = nil, nil
    if ev.state == 'started' then
      M.fire('NodecodeRequestStarted', data)
    else
      data.cache_read = data.usage and data.usage.cache_read or nil
      M.fire('NodecodeRequestFinished', data)
    end
  elseif ev.kind == 'notice' and ev.receipt == true then
    local refused = ev.text:find('\nrefused at seq ') ~= nil
    M.fire('NodecodeContextTaken', { job = ev.job, receipt = ev.text, refused = refused })
  elseif ev.kind == 'done' then
    if state.job == ev.job then
      finish()
    end
    M.fire(
      'NodecodeTurnFinished',
      nonil({ job = ev.job, status = ev.status, turn = ev.turn, error = ev.error })
    )
    return
  end
  draw()
end

return M
