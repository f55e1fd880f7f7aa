-- Writing the context buffer (its BufWriteCmd): line 1 against the file on
-- disk, then the core's dry run of the edit; problems become diagnostics and
-- nothing is written, else the file is written byte for byte.

local M = {}

local api = vim.api

local function rpc()
  return require('nodecode.rpc')
end

local function message()
  return require('nodecode.message')
end

local function ns_diag()
  return require('nodecode.ui.context').ns_diag
end

---@param path string
---@return string?
local function disk_first_line(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local line = f:read('*l')
  f:close()
  return line
end

--- `export 3` for the line 1 of an export (the line itself when it is none).
---@param first string
---@return string
function M.export_name(first)
  local n = first:match('^%[%[export %S+ (%d+) %w+%]%]$')
  return n and ('export ' .. n) or first
end

--- What to tell the person about a modified context buffer before a new
--- export: each way out it names works from where they are.
---@param st nodecode.ContextState
---@return string
function M.unsaved_words(st)
  local disk = disk_first_line(st.path)
  if disk and disk ~= st.first then
    return (
      'the context buffer edits %s but %s is on disk: :e! loads it (yank your '
      .. 'unsaved changes first)'
    ):format(M.export_name(st.first), M.export_name(disk))
  end
  return 'the context buffer has unsaved changes: :w saves them as an edit, :e! drops them'
end

---@param path string
---@param text string
---@return boolean ok, string? err
local function write_bytes(path, text)
  local fd, err = vim.uv.fs_open(path, 'w', 384) -- 0600: new files only
  if not fd then
    return false, err
  end
  local ok, werr = vim.uv.fs_write(fd, text, 0)
  vim.uv.fs_close(fd)
  return ok ~= nil, werr
end

--- Refuse the write: every problem a diagnostic, one error message. The
--- message is scheduled, so it is not an error inside BufWriteCmd (which Vim
--- would head with "Error detected while processing"); 'modified' stays set,
--- which is what keeps :wq and :x from quitting.
---@param buf integer
---@param problems { [1]: integer, [2]: string }[]
local function refuse(buf, problems)
  local diags = {}
  for _, p in ipairs(problems) do
    local lnum = math.max(0, math.min((tonumber(p[1]) or 1) - 1, api.nvim_buf_line_count(buf) - 1))
    diags[#diags + 1] = {
      lnum = lnum,
      col = 0,
      severity = vim.diagnostic.severity.ERROR,
      message = tostring(p[2]),
      source = 'nodecode',
    }
  end
  vim.diagnostic.set(ns_diag(), buf, diags)
  local first = problems[1]
  message().error(
    'not written, %d problem%s; line %d: %s',
    #problems,
    #problems == 1 and '' or 's',
    first[1],
    first[2]
  )
end

---@param ids any
---@return string
local function listed(word, ids)
  if type(ids) == 'number' then
    return ids > 0 and ('%s %d'):format(word, ids) or nil
  end
  ids = type(ids) == 'table' and ids or {}
  if #ids == 0 then
    return nil
  end
  return ('%s %d (%s)'):format(word, #ids, table.concat(vim.tbl_map(tostring, ids), ' '))
end

--- What a validated edit will do, in one line.
---@param s table
---@return string
function M.describe(s)
  local parts = vim.tbl_filter(function(x)
    return x ~= nil
  end, {
    listed('delete', s.deleted),
    listed('rewrite', s.rewrote),
    listed('note', s.notes),
    listed('restore', s.restored),
  })
  if #parts == 0 then
    return 'saved, unchanged: the next request reads the context as exported'
  end
  local pairs_ = type(s.pairs) == 'table'
      and #s.pairs > 0
      and ('; pairs: ' .. table.concat(s.pairs, '; '))
    or ''
  return 'saved: the next request will ' .. table.concat(parts, ' · ') .. pairs_
end

---@param buf integer
---@param target string
local function write(buf, target)
  local st = require('nodecode.ui.context').state(buf)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local bo = vim.bo[buf]
  local eol = (bo.eol or (bo.fixeol and not bo.binary)) and '\n' or ''
  local text = table.concat(lines, '\n') .. eol
  local name = api.nvim_buf_get_name(buf)
  if target ~= '' and vim.fn.fnamemodify(target, ':p') ~= name then
    local ok, err = write_bytes(target, text) -- a copy elsewhere is no edit
    return ok and message().info('wrote a copy to %s', target)
      or message().error('%s', tostring(err))
  end
  local pinned = rpc().call('info').id
  if st.session ~= pinned then
    return refuse(buf, {
      {
        1,
        (
          'this buffer is the context of session %s, but this Neovim works in '
          .. 'session %s now: yank your changes, then :NodecodeContext opens its context'
        ):format(st.session, pinned),
      },
    })
  end
  local disk = disk_first_line(name)
  if disk and disk ~= st.first then
    local export = M.export_name
    return refuse(buf, {
      {
        1,
        (
          'a newer export is on disk (%s; this buffer edits %s): '
          .. ':e! loads it, dropping your unsaved changes (yank them first)'
        ):format(export(disk), export(st.first)),
      },
    })
  end
  local ok, r = pcall(rpc().call, 'validate', text)
  if not ok then
    return refuse(buf, { { 1, message().reason(r) } })
  end
  if not r.ok then
    return refuse(buf, r.errors)
  end
  local wrote, err = write_bytes(name, text)
  if not wrote then
    return message().error('write failed: %s', tostring(err))
  end
  bo.modified = false
  vim.diagnostic.reset(ns_diag(), buf)
  if type(r.summary) == 'table' and r.summary.cache then
    st.cache, st.changed_from = require('nodecode.ui.context').cache_of(r.summary.cache), nil
  end
  require('nodecode.ui.context.view').refresh(buf)
  local said = M.describe(r.summary or {})
  local cost = type(r.summary) == 'table' and type(r.summary.cost) == 'table' and r.summary.cost
  if cost and type(cost.line) == 'string' then -- what the edit does to the next request's cost
    said = said .. '\n' .. cost.line
  end
  message().info('%s', said)
end

--- BufWriteCmd: validate, then write byte for byte (or refuse), in the
--- session of the tab that opened the buffer (a chat per tab).
---@param buf integer
---@param target string
function M.write(buf, target)
  return rpc().within(require('nodecode.ui.context').tab_of(buf), write, buf, target)
end

return M
