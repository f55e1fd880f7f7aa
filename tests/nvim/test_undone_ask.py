"""The undone ask comes back into the input area without taking the cursor:
focus and mode stay where the person was; redo and a session switch clear it."""

from __future__ import annotations

import pynvim

from .conftest import buffer_lines, configure, wait_for
from .ui_helpers import make_session


def where(nv: pynvim.Nvim) -> tuple[str, str]:
    """(the current buffer's name, the mode)."""
    return nv.current.buffer.name, nv.api.get_mode()["mode"]


def asked_twice(home, workspace, loopback) -> str:
    configure(home, loopback([{"text": "one"}, {"text": "two"}]))
    return make_session(home, workspace, ["the first ask", "the second ask"])


def test_undo_fills_the_input_but_focus_and_mode_stay(nvim, home, workspace, loopback):
    asked_twice(home, workspace, loopback)
    nvim.command("edit notes.txt")
    nvim.exec_lua("require('nodecode.ui.chat').open()")
    nvim.command("wincmd p")  # back in notes.txt, normal mode
    assert where(nvim) == (str(workspace / "notes.txt"), "n")

    nvim.command("NodecodeUndo")

    assert buffer_lines(nvim, "nodecode://input") == ["the second ask"]
    assert nvim.funcs.bufwinid("nodecode://input") != -1  # shown under the chat
    assert where(nvim) == (str(workspace / "notes.txt"), "n")
    nvim.input(":NodecodeRedo<CR>")  # typed next: a command, not part of the ask
    wait_for(lambda: buffer_lines(nvim, "nodecode://input") == [""])
    assert where(nvim) == (str(workspace / "notes.txt"), "n")


def test_undo_from_the_tree_stays_in_the_tree(nvim, home, workspace, loopback):
    asked_twice(home, workspace, loopback)
    nvim.command("NodecodeTree")
    tree = nvim.current.buffer.name

    nvim.command("NodecodeUndo")

    assert buffer_lines(nvim, "nodecode://input") == ["the second ask"]
    assert where(nvim) == (tree, "n")


def test_a_session_switch_clears_the_undone_ask(nvim, home, workspace, loopback):
    other = make_session(home, workspace, [])
    asked_twice(home, workspace, loopback)
    nvim.command("NodecodeUndo")
    assert buffer_lines(nvim, "nodecode://input") == ["the second ask"]

    nvim.command(f"NodecodeSessions {other}")

    assert buffer_lines(nvim, "nodecode://input") == [""]


def test_the_persons_own_draft_is_kept_when_undo_brings_an_ask_back(
    nvim, home, workspace, loopback
):
    asked_twice(home, workspace, loopback)
    nvim.exec_lua("require('nodecode.ui.chat').open({ input = true })")
    nvim.input("my draft<Esc>")
    wait_for(lambda: buffer_lines(nvim, "nodecode://input") == ["my draft"])

    nvim.command("NodecodeUndo")

    assert buffer_lines(nvim, "nodecode://input") == ["my draft"]  # never overwritten
    nvim.command("NodecodeRedo")
    assert buffer_lines(nvim, "nodecode://input") == ["my draft"]  # nor cleared
