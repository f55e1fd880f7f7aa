"""A plugin manager's reload (lazy.nvim's :Lazy reload nodecode: deactivate,
unload lua/nodecode/*, clear g:loaded_nodecode, re-source plugin/, setup)
leaves no host, no autocommand and no buffer of the old load behind, and the
next ask works in the same chat buffer."""

from __future__ import annotations

import json
import os

import pynvim
from helpers import run_cli

from .conftest import chat, configure, open_context, wait_for
from .ui_helpers import messages_of

# What lazy.nvim's loader does on reload (lua/lazy/core/loader.lua: deactivate, reload).
RELOAD = """
  local main = require('nodecode')
  if main.deactivate then main.deactivate() end
  for name in pairs(package.loaded) do
    if name == 'nodecode' or name:find('^nodecode%.') then package.loaded[name] = nil end
  end
  vim.g.loaded_nodecode = nil
  vim.cmd('runtime plugin/nodecode.lua')
  require('nodecode').setup({})
"""


def host_pid(nv: pynvim.Nvim) -> int:
    return nv.exec_lua("return vim.fn.jobpid(vim.fn['remote#host#Require']('nodecode'))")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited: only its parent has not reaped it yet.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


def chat_buffers(nv: pynvim.Nvim) -> int:
    return nv.exec_lua("""
        local n = 0
        for _, b in ipairs(vim.api.nvim_list_bufs()) do
          if vim.api.nvim_buf_get_name(b) == 'nodecode://chat' then n = n + 1 end
        end
        return n""")


def nodecode_autocmds(nv: pynvim.Nvim) -> list[str]:
    return nv.exec_lua("""
        local out = {}
        for _, au in ipairs(vim.api.nvim_get_autocmds({})) do
          if (au.group_name or ''):find('^nodecode') then table.insert(out, au.group_name .. ' ' .. au.event) end
        end
        table.sort(out)
        return out""")


def test_reload_stops_the_old_host_and_the_next_ask_works_in_the_same_chat(nvim, home, loopback):
    configure(home, loopback([{"text": "first reply"}, {"text": "second reply"}]))
    nvim.command("Nodecode first")
    wait_for(lambda: "first reply" in chat(nvim))
    nvim.command("NodecodeTree")
    old = host_pid(nvim)
    autocmds = nodecode_autocmds(nvim)

    nvim.exec_lua(RELOAD)

    assert wait_for(lambda: not alive(old))
    assert nvim.call("remote#host#IsRunning", "nodecode") == 0
    nvim.command("Nodecode second")
    wait_for(lambda: "second reply" in chat(nvim))
    assert chat_buffers(nvim) == 1
    assert chat(nvim).count("first reply") == 1  # the history, drawn once
    assert host_pid(nvim) != old
    nvim.command("NodecodeTree")
    assert nodecode_autocmds(nvim) == autocmds
    assert "E95" not in messages_of(nvim) and "Error" not in messages_of(nvim)


def test_reload_during_a_turn_stops_it(nvim, home, workspace, loopback):
    long = " ".join(f"word{i}" for i in range(200))
    configure(home, loopback([{"text": long}, {"text": "after the reload"}], chunk_delay=0.2))
    nvim.command("Nodecode tell me a long story")
    wait_for(lambda: "word3" in chat(nvim))
    old = host_pid(nvim)

    nvim.exec_lua(RELOAD)

    assert wait_for(lambda: not alive(old))
    nvim.command("Nodecode again")
    wait_for(lambda: "after the reload" in chat(nvim))
    wait_for(lambda: nvim.exec_lua("return require('nodecode.ui.chat').job()") is None)
    turns = json.loads(run_cli("tree", "--json", home=home, cwd=workspace).stdout)
    assert [t["status"] for t in turns] == ["stopped", "done"]


def test_a_context_buffer_open_across_a_reload_still_writes_through_nodecode(
    nvim, home, workspace, loopback
):
    from .test_context_write import said
    from .ui_helpers import make_session, notified

    srv = loopback([{"text": "first answer"}, {"text": "second answer"}])
    configure(home, srv)
    make_session(home, workspace, ["first question"])
    notified(nvim)
    open_context(nvim)
    buf = nvim.current.buffer
    at = next(i for i, line in enumerate(buf) if line == "first question")
    buf[at] = "the question, rewritten before the reload"  # not written yet

    nvim.exec_lua(RELOAD)
    nvim.command("write")

    assert "rewrite 1" in said(nvim, "saved: ")  # nodecode's :w, not a plain write
    assert nvim.eval("&modified") == 0
    nvim.command("Nodecode next")
    wait_for(lambda: len(srv.model_requests) == 2)
    sent = json.dumps(srv.model_requests[1].body)
    assert "the question, rewritten before the reload" in sent
    assert "first question" not in sent


def test_an_event_of_the_old_host_arriving_after_a_reload_starts_no_host(nvim, home, loopback):
    configure(home, loopback([{"text": "first reply"}]))
    nvim.command("Nodecode first")
    wait_for(lambda: "first reply" in chat(nvim))
    nvim.command("NodecodeTree")  # a tree buffer: a finished turn's event redraws it
    old = host_pid(nvim)

    nvim.exec_lua(RELOAD)
    wait_for(lambda: not alive(old))
    # What a loaded machine does: the turn's last event reaches the new load.
    nvim.exec_lua("""
      require('nodecode.rpc')._on_event({ kind = 'done', job = 99, status = 'done' })
      vim.wait(300, function() return false end)
    """)

    assert nvim.call("remote#host#IsRunning", "nodecode") == 0
