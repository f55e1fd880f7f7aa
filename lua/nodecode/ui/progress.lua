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

---@class nodecode.Progress one running job's
---@field started integer vim.uv.now() when its first event came
---@field phase? string

---@type table<integer, nodecode.Progress> by job: every tab's running turn
local jobs = {}
local frame = 1
---@type uv.uv_timer_t?
local timer = nil

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

local function chat()
  return require('nodecode.ui.chat')
end

--- The indicator's text of `job` (this tab's chat's turn), `⠋ streaming ·
--- 2.1s` ('' when nothing runs).
---@param job? integer
---@return string
function M.text(job)
  if next(jobs) == nil then
    return '' -- (the statusline asks before any chat is loaded)
  end
  local p = jobs[job or chat().job() or -1]
  if not p then
    return ''
  end
  local phase = PHASES[p.phase] or p.phase or 'starting'
  return ('%s %s · %s'):format(FRAMES[frame], phase, elapsed(vim.uv.now() - p.started))
end

--- The statusline part (the indicator of this tab's turn, '' when idle).
---@return string
function M.statusline()
  M.wanted = true
  return M.text()
end

--- Draw `job`'s indicator after its chat's last line (or remove it when idle).
---@param job integer
local function draw(job)
  local tab = chat().tab_of(job)
  local buf = tab and chat().buf(tab)
  if not buf then
    return
  end
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  if jobs[job] and require('nodecode.config').get().chat.progress then
    local last = api.nvim_buf_line_count(buf) - 1
    api.nvim_buf_set_extmark(buf, ns, last, 0, {
      virt_text = { { ' ' .. M.text(job), 'NodecodeProgress' } },
      virt_text_pos = 'eol',
    })
  end
end

local function tick()
  frame = frame % #FRAMES + 1
  for job in pairs(jobs) do
    draw(job)
  end
  if M.wanted then
    pcall(vim.cmd, 'redrawstatus')
  end
end

---@param job integer
local function begin(job)
  require('nodecode.ui.highlights').setup()
  jobs[job] = { started = vim.uv.now() }
  if not timer then
    timer = vim.uv.new_timer()
    frame = 1
    timer:start(100, 100, vim.schedule_wrap(tick))
  end
end

---@param job integer
local function finish(job)
  jobs[job] = nil
  if timer and next(jobs) == nil then
    timer:stop()
    timer:close()
    timer = nil
  end
  draw(job)
  if M.wanted then
    pcall(vim.cmd, 'redrawstatus')
  end
end

--- The indicator shown in this tab's chat now, if any (tests look at it).
---@return string?
function M.shown()
  local buf = chat().buf()
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
  if ev.kind ~= 'done' and not jobs[ev.job] then
    begin(ev.job)
  end
  if ev.kind == 'phase' then
    jobs[ev.job].phase = ev.phase
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
    if jobs[ev.job] then
      finish(ev.job)
    end
    M.fire(
      'NodecodeTurnFinished',
      nonil({ job = ev.job, status = ev.status, turn = ev.turn, error = ev.error })
    )
    return
  end
  draw(ev.job)
end

return M
