-- What an ask carries besides its words: a range or a selection as a fenced
-- block headed by the file's path in the workspace and the lines
-- (```python calc.py:3-5), `#buffer` (the current buffer, the same way) and
-- `#file:PATH` (a workspace file). They are expanded once, before the ask is
-- shown, logged and sent, so the chat, the log and context.txt hold the same
-- text, which an edit can remove like any message. Inside a fenced block
-- nothing is expanded (selected code may well say `#buffer`).

local M = {}

local api = vim.api
local MAX_BYTES = 1024 * 1024 -- a #file larger than this is refused, not sent

---@type integer? the last file buffer left (the one `#buffer` means from the chat)
local origin = nil

--- Is `buf` a buffer of a file the person edits (not the chat, input, tree…)?
---@param buf integer
---@return boolean
local function is_file_buffer(buf)
  if not api.nvim_buf_is_valid(buf) or vim.bo[buf].buftype ~= '' then
    return false
  end
  local name = api.nvim_buf_get_name(buf)
  return not vim.startswith(vim.bo[buf].filetype, 'nodecode')
    and not vim.startswith(name, 'nodecode://')
end

--- Remember the file buffer the person leaves (BufLeave, set up by commands.register).
---@param buf integer
function M.left(buf)
  if is_file_buffer(buf) then
    origin = buf
  end
end

--- The buffer `#buffer` names: the current one when it is a file's, else the
--- last file buffer left (an ask typed in the input area).
---@return integer
function M.current_buffer()
  local buf = api.nvim_get_current_buf()
  if is_file_buffer(buf) then
    return buf
  end
  if origin and api.nvim_buf_is_loaded(origin) then
    return origin
  end
  error('nodecode: #buffer: no file buffer to put in the ask (open a file first)', 0)
end

--- `path` as the ask shows it: relative to the workspace when inside it.
---@param path string absolute
---@return string
function M.shown_path(path)
  local cwd = vim.fs.normalize(vim.fn.getcwd())
  path = vim.fs.normalize(path)
  if vim.startswith(path, cwd .. '/') then
    return path:sub(#cwd + 2)
  end
  return vim.fn.fnamemodify(path, ':~')
end

--- A fenced block of `lines` headed `PATH:FIRST-LAST` (after the language,
--- when known); the fence is longer than any backtick run the lines start with.
---@param path string as shown
---@param first integer
---@param last integer
---@param lines string[]
---@param ft? string
---@return string
function M.fence(path, first, last, lines, ft)
  local ticks = 3
  for _, l in ipairs(lines) do
    local run = l:match('^%s*(`+)')
    if run and #run >= ticks then
      ticks = #run + 1
    end
  end
  local fence = ('`'):rep(ticks)
  local lang = (ft and ft ~= '') and (ft .. ' ') or ''
  local head = ('%s%s%s:%d-%d'):format(fence, lang, path, first, last)
  return table.concat({ head, table.concat(lines, '\n'), fence }, '\n')
end

--- Lines `first`–`last` of buffer `buf` as a block.
---@param buf integer
---@param first integer 1-based
---@param last integer
---@return string
function M.block(buf, first, last)
  buf = buf == 0 and api.nvim_get_current_buf() or buf
  local lines = api.nvim_buf_get_lines(buf, first - 1, last, false)
  local name = api.nvim_buf_get_name(buf)
  local path = name ~= '' and M.shown_path(vim.fn.fnamemodify(name, ':p'))
    or ('[buffer %d]'):format(buf)
  return M.fence(path, first, last, lines, vim.bo[buf].filetype)
end

--- The block of `#buffer`: the whole current buffer.
---@return string
local function buffer_block()
  local buf = M.current_buffer()
  return M.block(buf, 1, api.nvim_buf_line_count(buf))
end

--- The lines of workspace file `path`: its loaded buffer's (what you see),
--- else the file's; one error line when it cannot go into an ask.
---@param path string as typed after #file:
---@return string[] lines, string abs
local function file_lines(path)
  local what = '#file:' .. path
  local abs = vim.fn.fnamemodify(vim.fs.normalize(path), ':p')
  local real = vim.uv.fs_realpath(abs)
  if not real then
    error(('nodecode: %s: no such file in the workspace %s'):format(what, vim.fn.getcwd()), 0)
  end
  local root = vim.uv.fs_realpath(vim.fn.getcwd()) or vim.fn.getcwd()
  if real ~= root and not vim.startswith(real, root .. '/') then
    error(('nodecode: %s is outside the workspace %s'):format(what, root), 0)
  end
  local stat = vim.uv.fs_stat(real)
  if not stat or stat.type ~= 'file' then
    error(
      ('nodecode: %s is a %s, not a file'):format(what, stat and stat.type or 'missing file'),
      0
    )
  end
  for _, buf in ipairs(api.nvim_list_bufs()) do -- the exact name (bufnr() takes a pattern)
    if api.nvim_buf_is_loaded(buf) and vim.uv.fs_realpath(api.nvim_buf_get_name(buf)) == real then
      return api.nvim_buf_get_lines(buf, 0, -1, false), abs
    end
  end
  if stat.size > MAX_BYTES then
    error(
      ('nodecode: %s is too big for an ask (%d bytes; at most %d)'):format(
        what,
        stat.size,
        MAX_BYTES
      ),
      0
    )
  end
  local fd = assert(vim.uv.fs_open(real, 'r', 0))
  local data = vim.uv.fs_read(fd, stat.size, 0) or ''
  vim.uv.fs_close(fd)
  if data:find('\0', 1, true) then
    error(('nodecode: %s is a binary file (%d bytes)'):format(what, stat.size), 0)
  end
  local lines = vim.split((data:gsub('\r\n', '\n'):gsub('\n$', '')), '\n', { plain = true })
  return lines, abs
end

--- The block of `#file:PATH`; a path followed by punctuation (`#file:a.py,`)
--- loses it when only the shorter name exists. Returns the block and what of
--- the token was not part of the path.
---@param path string
---@return string block, string rest
local function file_block(path)
  local short, punct = path:match('^(.-)([.,;:!?)]+)$')
  if short and short ~= '' and not vim.uv.fs_stat(vim.fs.normalize(path)) then
    path = short
  else
    punct = ''
  end
  local lines, abs = file_lines(path)
  local ft = vim.filetype.match({ filename = abs }) or ''
  return M.fence(M.shown_path(abs), 1, math.max(#lines, 1), lines, ft), punct
end

--- The next token in `line` from `init`: start, end and its expansion.
---@param line string
---@param init integer
---@return integer? s, integer? e, fun(): string, string
local function next_token(line, init)
  local best
  for _, p in ipairs({ '#buffer', '#file:%S+' }) do
    local s, e = line:find(p, init)
    while
      s
      and (
        s > 1 and not line:sub(s - 1, s - 1):match('[%s(]')
        or (p == '#buffer' and line:sub(e + 1, e + 1):match('[%w_]'))
      )
    do
      s, e = line:find(p, e + 1)
    end
    if s and (not best or s < best[1]) then
      best = { s, e, p }
    end
  end
  if not best then
    return nil
  end
  local s, e, p = best[1], best[2], best[3]
  if p == '#buffer' then
    return s, e, function()
      return buffer_block(), ''
    end
  end
  return s, e, function()
    return file_block(line:sub(s + 6, e))
  end
end

--- One line of the ask with its tokens expanded: each block on lines of its own.
---@param line string
---@param out string[]
local function expand_line(line, out)
  local pos, text = 1, ''
  while true do
    local s, e, expand = next_token(line, pos)
    if not s then
      break
    end
    local block, rest = expand()
    text = vim.trim(text .. line:sub(pos, s - 1))
    if text ~= '' then
      out[#out + 1] = text
    end
    vim.list_extend(out, vim.split(block, '\n', { plain = true }))
    text, pos = rest, e + 1
  end
  local tail = pos == 1 and line or vim.trim(text .. line:sub(pos))
  if pos == 1 or tail ~= '' then
    out[#out + 1] = tail
  end
end

--- `text` with `#buffer` and `#file:PATH` expanded outside fenced blocks.
---@param text string
---@return string
function M.expand(text)
  local out, fence = {}, nil
  for _, line in ipairs(vim.split(text, '\n', { plain = true })) do
    local run = line:match('^%s*(```+)')
    if fence then
      out[#out + 1] = line
      if run and #run >= #fence and line:match('^%s*`+%s*$') then
        fence = nil
      end
    elseif run then
      fence = run
      out[#out + 1] = line
    else
      expand_line(line, out)
    end
  end
  return table.concat(out, '\n')
end

--- The blocks this module makes in `text` (0-based line offsets of their
--- fences), for the chat to fold.
---@param text string
---@return { [1]: integer, [2]: integer }[]
function M.blocks(text)
  local out, open = {}, nil
  for i, line in ipairs(vim.split(text, '\n', { plain = true })) do
    if open then
      if line:match('^`+$') and #line == open.ticks then
        out[#out + 1] = { open.row, i - 1 }
        open = nil
      end
    else
      local ticks = line:match('^(```+)%S-%s?%S+:%d+%-%d+$')
      if ticks then
        open = { row = i - 1, ticks = #ticks }
      end
    end
  end
  return out
end

-- Commands and keys ---------------------------------------------------------

--- Put `block` into the input area (after what is there), ready to type the ask.
---@param block string
local function into_input(block)
  local chat = require('nodecode.ui.chat')
  require('nodecode.ui.input').open(chat.open(), block .. '\n\n', true)
end

--- :[range]Nodecode [text]: the range as a block, then the text (none: the
--- input area opens with the block); without a range, ask or open the chat.
---@param o { args: string, range: integer, line1: integer, line2: integer }
function M.command(o)
  local text = vim.trim(o.args or '')
  local chat = require('nodecode.ui.chat')
  if (o.range or 0) > 0 then
    local block = M.block(0, o.line1, o.line2)
    if text == '' then
      return into_input(block)
    end
    return chat.ask(block .. '\n\n' .. text) -- (nothing inside the block is expanded)
  end
  if text == '' then
    return chat.open({ input = true })
  end
  chat.ask(text)
end

--- <Plug>(nodecode-ask-selection): the selected lines into the input area.
function M.selection()
  local a, b = vim.fn.line('v'), vim.fn.line('.')
  api.nvim_feedkeys(api.nvim_replace_termcodes('<Esc>', true, false, true), 'nx', false)
  into_input(M.block(0, math.min(a, b), math.max(a, b)))
end

--- Completion items for `base` (`#…`): `#buffer`, `#file:` and workspace files.
---@param base string
---@return { word: string, menu: string }[]
function M.candidates(base)
  local items = {}
  if vim.startswith('#buffer', base) then
    items[#items + 1] = { word = '#buffer', menu = 'the current buffer' }
  end
  local prefix = vim.startswith(base, '#file:') and base:sub(7)
    or (vim.startswith('#file:', base) and '' or nil)
  if prefix then
    for _, f in ipairs(vim.fn.getcompletion(prefix, 'file')) do
      items[#items + 1] = { word = '#file:' .. f, menu = 'a workspace file' }
    end
  end
  return items
end

--- 'omnifunc' of the input area: <C-x><C-o> after `#` offers the above, and
--- at the start of the input after `/` the slash commands (nodecode.slash).
---@param findstart integer
---@param base string
---@return integer|table
function M.omnifunc(findstart, base)
  local slash = require('nodecode.slash')
  if findstart == 1 then
    if slash.typed() then
      return 0
    end
    local col = api.nvim_win_get_cursor(0)[2]
    local s = api.nvim_get_current_line():sub(1, col):find('#[^%s]*$')
    return s and s - 1 or -3
  end
  if vim.startswith(base, '/') then
    return slash.candidates(base)
  end
  return M.candidates(base)
end

--- Completion of :Nodecode's arguments: the `#` words, else file names.
---@param lead string
---@return string[]
function M.complete(lead)
  if vim.startswith(lead, '#') then
    return vim.tbl_map(function(i)
      return i.word
    end, M.candidates(lead))
  end
  return vim.fn.getcompletion(lead, 'file')
end

return M
