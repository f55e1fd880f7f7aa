"""`make demo`: its scripted model answers three questions, its edit and test
run ask approval, and it has a small known window, so the 85% warning and an
eviction show in two asks; its home stays between runs, so the session comes
back (offered the questions left); `make demo-clean` starts it afresh."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pynvim
import pytest
from nodecode.demo.__main__ import HERE, prepare

from .conftest import NVIM, buffer_lines, chat, shutdown, wait_for
from .ui_helpers import notes, notified


def start(prepared, monkeypatch: pytest.MonkeyPatch) -> pynvim.Nvim:
    """Neovim as the demo starts it (its init, environment and workspace), headless."""
    for key, value in prepared.env.items():
        monkeypatch.setenv(key, value)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "NODECODE_SESSION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(prepared.workspace)
    nv = pynvim.attach(
        "child",
        argv=[NVIM, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(HERE / "init.lua")],
    )
    wait_for(lambda: nv.funcs.bufwinid("nodecode://chat") != -1)
    return nv


def idle(nv: pynvim.Nvim) -> bool:
    return nv.exec_lua("return require('nodecode.ui.chat').job()") is None


@pytest.fixture
def demo_dir(tmp_path: Path, nvim_env, monkeypatch: pytest.MonkeyPatch):
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path / ".demo"


def approve(nv: pynvim.Nvim, kind: str) -> None:
    """Wait for the approval float whose title names ``kind`` and accept it with `a`."""
    title = """local win = require('nodecode.ui.approval').win
        if not (win and vim.api.nvim_win_is_valid(win)) then return '' end
        local t = vim.api.nvim_win_get_config(win).title
        return type(t) == 'table' and t[1][1] or ''"""
    wait_for(lambda: kind in nv.exec_lua(title), timeout=30)
    nv.input("a")


def test_the_demo_asks_approvals_answers_three_questions_and_comes_back(demo_dir, monkeypatch):
    first = prepare(demo_dir, {})
    try:
        nv = start(first, monkeypatch)
        assert "fix the bug in calc.py" in chat(nv)  # the welcome suggests it
        notified(nv)
        nv.command("Nodecode fix the bug in calc.py")
        approve(nv, "write calc.py")
        approve(nv, "run a command")
        wait_for(lambda: idle(nv) and "Done: `mean`" in chat(nv), timeout=30)
        assert "> write: approved" in chat(nv) and "all tests passed" in chat(nv)
        warned = [n for n in notes(nv) if "context at" in n]
        assert warned and ":NodecodeEvict" in warned[0], notes(nv)

        nv.command("Nodecode what does mean do with an empty list?")

        wait_for(lambda: idle(nv) and "ZeroDivisionError" in chat(nv), timeout=30)
        assert "_evicted at seq " in chat(nv)
        nv.command("Nodecode add a median function")
        approve(nv, "write median.py")
        wait_for(lambda: idle(nv) and "Added median.py" in chat(nv), timeout=30)
        assert "no more rounds" not in chat(nv)
        shutdown(nv)
    finally:
        first.stop()

    again = prepare(demo_dir, {})
    try:
        nv = start(again, monkeypatch)
        lines = buffer_lines(nv, "nodecode://chat")
        text = "\n".join(lines)
        assert "fix the bug in calc.py" in text and "_evicted at seq " in text
        assert "len(values) - 1" not in (again.workspace / "calc.py").read_text()  # kept too
        welcome = next(i for i, x in enumerate(lines) if x.startswith("> Welcome"))
        assert lines[welcome - 1] == "", lines[welcome - 2 : welcome + 1]  # set apart
        assert "calc.py is fixed already" in text
        assert ":Nodecode what does mean do with an empty list?" in lines[welcome + 2]
        shutdown(nv)
    finally:
        again.stop()


def typed(nv: pynvim.Nvim, text: str) -> None:
    """Type ``text`` into the chat's input area and send it, as a person would."""
    nv.command("Nodecode")
    nv.input(text + "<C-s>")


def test_slash_commands_typed_in_the_demos_chat_work(demo_dir, monkeypatch):
    prepared = prepare(demo_dir, {})
    try:
        nv = start(prepared, monkeypatch)
        assert "/help lists the slash commands" in chat(nv)
        nv.command("Nodecode fix the bug in calc.py")
        approve(nv, "write calc.py")
        approve(nv, "run a command")
        wait_for(lambda: idle(nv) and "Done: `mean`" in chat(nv), timeout=30)
        fixed = (prepared.workspace / "calc.py").read_text()

        typed(nv, "/help")
        wait_for(lambda: "> /context " in chat(nv) and "> /undo " in chat(nv))

        typed(nv, "/tree")
        wait_for(lambda: nv.current.buffer.name == "nodecode://tree")
        assert "fix the bug in calc.py" in nv.current.buffer[0]
        nv.input("q")

        typed(nv, "/context")
        wait_for(lambda: nv.eval("&filetype") == "nodecode-status")
        assert nv.current.buffer[0].startswith("session s-")
        assert any(line.startswith("window: 1570 tokens") for line in nv.current.buffer[:])
        nv.input("q")

        typed(nv, "/undo")
        wait_for(lambda: buffer_lines(nv, "nodecode://input") == ["fix the bug in calc.py"])
        assert (prepared.workspace / "calc.py").read_text() != fixed
        assert "_undone_" in chat(nv)
        assert chat(nv).count("## you") == 1  # none of them was sent as an ask
        shutdown(nv)
    finally:
        prepared.stop()


def test_demo_clean_starts_afresh(demo_dir):
    prepare(demo_dir, {}).stop()
    assert (demo_dir / "home" / "config.jsonc").exists()

    done = subprocess.run(
        [sys.executable, "-m", "nodecode.demo", "--clean"],
        env={"NODECODE_DEMO_DIR": str(demo_dir), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert not demo_dir.exists() and str(demo_dir) in done.stdout


def test_the_demos_calc_py_has_its_filetype_and_a_range_ask_names_it(demo_dir, monkeypatch):
    prepared = prepare(demo_dir, {})
    try:
        nv = start(prepared, monkeypatch)
        nv.command("wincmd t")  # calc.py, as the demo opened it
        assert nv.current.buffer.name.endswith("calc.py")

        assert nv.eval("&filetype") == "python"
        block = nv.exec_lua("return require('nodecode.ask').block(0, 1, 2)")
        assert block.startswith("```python calc.py:1-2\n"), block
        shutdown(nv)
    finally:
        prepared.stop()
