-- Two kinds of the host's events the chat (ui/chat.lua) hands on: an
-- approval the worker waits for (asked per config approve) and a notice of
-- the agent's.

local M = {}

local function config()
  return require('nodecode.config').get()
end

local function message()
  return require('nodecode.message')
end

-- Approvals -------------------------------------------------------------

---@param kind string write | shell
---@param detail string
---@param done fun(yes: boolean)
---@param ev table the approve event (with diff and cwd)
local function prompt(kind, detail, done, ev)
  local how = config().approve
  if type(how) == 'function' then
    return how(kind, detail, done, ev)
  end
  local question = ('nodecode wants to %s:\n%s'):format(kind == 'shell' and 'run' or kind, detail)
  if how == 'select' then
    vim.ui.select(
      { 'Yes', 'No' },
      { prompt = question, kind = 'nodecode_approval' },
      function(choice)
        done(choice == 'Yes')
      end
    )
  else
    done(vim.fn.confirm(question, '&Yes\n&No', 2, 'Question') == 1)
  end
end

--- Ask the person (outside the RPC callback), then answer the waiting worker;
--- what they said goes into the chat's transcript (`view()`, if any by then).
--- The turn of another tab than the current one waits until that tab is
--- entered (ui/chat_tabs.lua): its prompt is never shown over another chat.
---@param ev { job: integer, id: integer, approval: string, detail: string }
---@param view fun(): nodecode.Transcript?
---@param tab? integer the tabpage whose chat's turn asks
function M.approve(ev, view, tab)
  if tab and tab ~= require('nodecode.ui.chat').owner() then
    return require('nodecode.ui.chat_tabs').later(tab, function()
      M.approve(ev, view)
    end)
  end
  vim.schedule(function()
    if config().approve == 'diff' then
      return require('nodecode.ui.approval').open(ev, function(said)
        if view() then
          view():quote(ev.approval, said)
        end
      end)
    end
    prompt(ev.approval, ev.detail, function(yes)
      local ok, err = pcall(require('nodecode.rpc').call, 'approval', ev.job, ev.id, yes)
      local said = (yes and 'approved' or 'refused')
        .. (ok and '' or (' (' .. message().reason(err) .. ')'))
      if view() then
        view():quote(ev.approval, said)
      end
    end, ev)
  end)
end

-- Notices ---------------------------------------------------------------

--- A notice of the agent's: the whole text in the chat (as the agent read it;
--- an eviction as a marker), one line for the person as a notification.
---@param view nodecode.Transcript
---@param ev { text: string, about?: string, level?: string, say?: string }
function M.notice(view, ev)
  local evicted = ev.about == 'evicted' and ev.text:match('\n(evicted at seq [^\n]*)')
  if evicted then
    view:mark(evicted)
  elseif ev.about == 'taken' or ev.about == 'refused' then
    view:quote('receipt', ev.text)
  else
    view:quote('notice', ev.text)
  end
  if type(ev.say) == 'string' then
    local tell = ev.level == 'warn' and message().warn or message().info
    tell('%s', ev.say)
  end
end

return M
