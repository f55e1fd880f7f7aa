""":NodecodeTree: the turn tree with the head marked, and its keys moving the
head (continue, rewind), forking, and opening a turn's messages."""

from __future__ import annotations

from pathlib import Path

import pynvim
import pytest
from nodecode.agent.loop import Agent
from nodecode.app import App
from nodecode.host import Host

from .conftest import configure, wait_for
from .ui_helpers import make_session


def test_the_host_has_the_tree_methods():
    for name in ("tree", "continue_", "rewind", "fork"):
        assert callable(getattr(Host, name, None)), f"Host.{name} is missing"


def write_round(name: str, text: str) -> dict:
    return {"calls": [{"code": f';; write {name}\n(write-file "{name}" "{text}")'}]}


@pytest.fixture
def branched(home: Path, workspace: Path, loopback):
    """Turns 1 and 2 write a.txt (v1, v2); turn 2 is undone, turn 3 asks again."""
    srv = loopback(
        [
            write_round("a.txt", "v1"),
            {"text": "wrote v1"},
            write_round("a.txt", "v2"),
            {"text": "wrote v2"},
            {"text": "third answer"},
        ]
    )
    configure(home, srv, auto_approve=["write", "shell"])
    sid = make_session(home, workspace, ["write v1", "write v2"])
    from nodecode.checkpoints import moves as checkpoints

    app = App.open(home=home, cwd=workspace)
    checkpoints.undo(app.workspace, sid)
    Agent(app, sid).ask("something else")
    app.close()
    return sid


def tree_lines(nv: pynvim.Nvim) -> list[str]:
    return nv.exec_lua(
        "return vim.api.nvim_buf_get_lines(vim.fn.bufnr('nodecode://tree'), 0, -1, false)"
    )


def head(nv: pynvim.Nvim) -> int:
    return nv.exec_lua("""
        for _, t in ipairs(require('nodecode.rpc').call('tree')) do
          if t.head then return t.number end
        end""")


def goto_turn(nv: pynvim.Nvim, number: int) -> None:
    lines = tree_lines(nv)
    row = next(i for i, line in enumerate(lines, 1) if f" {number}  " in line)
    nv.current.window.cursor = (row, 0)


def test_render_keeps_the_head_branch_straight_and_indents_the_others(nvim):
    rows = nvim.exec_lua("""
        local function t(n, parent, ask, span, status, on_path, head)
          return { number = n, parent = parent, ask = ask, span = span, status = status,
                   on_path = on_path, head = head }
        end
        return vim.tbl_map(function(r) return r[1] end, require('nodecode.ui.tree').render({
          t(1, vim.NIL, 'first', 'seq 1–4', 'done', true, false),
          t(2, 1, 'undone\\nsecond line', 'seq 5–8', 'done', false, false),
          t(3, 1, 'again', 'seq 9–12', 'stopped', true, true),
        }))
    """)
    assert [r.split("  seq")[0].rstrip() for r in rows] == [
        "○ 1  first",
        "├─ · 2  undone",
        "● 3  again",
    ]
    assert rows[1].endswith("seq 5–8  undone") and rows[2].endswith("seq 9–12  stopped · head")


def test_tree_marks_the_head_and_shows_the_undone_branch(nvim, branched):
    nvim.command("NodecodeTree")

    lines = tree_lines(nvim)
    assert nvim.current.buffer.name == "nodecode://tree"
    assert [line.split("  ")[0] for line in lines] == ["○ 1", "├─ · 2", "● 3"]
    assert "write v2" in lines[1] and lines[2].endswith("head")
    assert nvim.current.window.cursor[0] == 3


def test_continue_moves_the_head_and_files_stay(nvim, branched, workspace):
    nvim.command("NodecodeTree")
    goto_turn(nvim, 2)

    nvim.input("c")

    wait_for(lambda: head(nvim) == 2)
    assert (workspace / "a.txt").read_text() == "v1"
    wait_for(lambda: tree_lines(nvim)[-1].startswith("● 2"))  # the head's branch, straight


def test_rewind_moves_the_head_and_files_follow(nvim, branched, workspace):
    nvim.command("edit a.txt")
    nvim.command("NodecodeTree")
    goto_turn(nvim, 2)

    nvim.input("r")

    wait_for(lambda: head(nvim) == 2)
    wait_for(lambda: (workspace / "a.txt").read_text() == "v2")
    wait_for(
        lambda: (
            nvim.exec_lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('a.txt'), 0, -1, false)")
            == ["v2"]
        )
    )


def test_fork_key_makes_a_child_session_this_neovim_works_in(nvim, branched):
    nvim.command("NodecodeTree")
    goto_turn(nvim, 1)

    nvim.input("f")

    def other_session() -> str | None:
        sid = nvim.exec_lua("return require('nodecode.rpc').call('info').id")
        return sid if sid != branched else None

    child = wait_for(other_session)
    assert child.startswith("s-")
    wait_for(lambda: "● 1" in "\n".join(tree_lines(nvim)))


def test_open_key_shows_the_turns_messages(nvim, branched):
    nvim.command("NodecodeTree")
    goto_turn(nvim, 2)

    nvim.input("<CR>")

    wait_for(lambda: nvim.current.buffer.name == "nodecode://turn/2")
    text = "\n".join(nvim.current.buffer[:])
    assert text.startswith("## you\nwrite v2") and '(write-file "a.txt" "v2")' in text
    assert "wrote v2" in text
