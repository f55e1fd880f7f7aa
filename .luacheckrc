-- luacheck (make test runs `luacheck .`): the Lua runs in Neovim's LuaJIT, whose
-- one global of its own is `vim`. Its editor-state tables are written to by
-- design (vim.g.x = 1, vim.bo[buf].modifiable = false, vim.wo[win][0].wrap =
-- true), so those fields are writable; the rest of `vim` is read-only.
std = 'luajit'

local editor_state = {}
local names =
  { 'g', 'b', 'w', 't', 'v', 'env', 'o', 'go', 'bo', 'wo', 'opt', 'opt_local', 'opt_global' }
for _, name in ipairs(names) do
  editor_state[name] = { read_only = false, other_fields = true }
end
read_globals = { vim = { other_fields = true, fields = editor_state } }

-- A method that does not need its object (one writer of two that share an
-- interface, as transcript.lua's buffer and list writers do) is no finding.
self = false

-- StyLua keeps code to its column_width; comments and strings are held to it here.
max_line_length = 100

-- What .gitignore ignores: the venv (Neovim's own runtime among it), the demo's
-- and the tests' Neovim state, the benchmarks' cache.
exclude_files = { '.venv', '.demo', '.nvimdata', 'bench/.cache', 'build' }

-- Plain output for logs: the codes, no colours, only files with findings.
codes = true
color = false
quiet = 1
