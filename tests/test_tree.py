"""The turn tree (doc/design.md "Checkpoints"): rendering, continue, rewind — and the request after each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli
from nodecode.checkpoints import moves as checkpoints
from nodecode.errors import UserError
from nodecode.log import sessions
from nodecode.views import tree
from test_checkpoints import AFTER, START, needs_git, s  # noqa: F401  (s: fixture)

TURN_1 = [
    ("user", "read a"),
    ("assistant", "Working."),
    ("tool_use", ';; read a\n(read-file "a.txt")'),
    ("tool_result", "alpha\n[seq 5]"),
    ("assistant", "Done."),
]
TREE = (
    "1  read a · seq 1–7 · done\n"
    "├─ 2  change things · seq 8–18 · done (undone)\n"
    "└─ 3  write c · seq 20–26 · done ← head"
)


@pytest.fixture
def branched(s):  # noqa: F811
    """Turn 2 undone (seq 19), then turn 3 asked from turn 1: a tree with an undone branch."""
    checkpoints.undo(s.app.workspace, s.sid)
    s.turn("write c\nand say so", ';; c\n(write-file "c.txt" "c")')
    return s


@needs_git
def test_tree_draws_branches_with_spans_status_head_and_undone(branched):
    assert tree.render(tree.nodes(branched.store, branched.sid)) == TREE


def test_tree_keeps_a_long_chain_in_one_column_and_cuts_long_asks():
    nodes = [
        tree.Node(
            n, n - 1 or None, "s", "x" * 70 if n == 2 else f"ask {n}", n, n, "done", True, n == 3
        )
        for n in range(1, 4)
    ]
    assert tree.render(nodes) == "\n".join(
        [
            "1  ask 1 · seq 1–1 · done",
            "2  " + "x" * 60 + "… · seq 2–2 · done",
            "3  ask 3 · seq 3–3 · done ← head",
        ]
    )


@needs_git
def test_continue_moves_the_head_files_stay_and_the_next_request_reads_that_branch(branched):
    files = branched.files()
    moved = checkpoints.continue_(branched.app.workspace, branched.sid, 2)
    assert (moved.source, moved.target, moved.lines) == (3, 2, [])
    assert branched.files() == files
    assert branched.turn("go on from 2") == 4
    sent = branched.sent()
    assert sent[:5] == TURN_1 and sent[5] == ("user", "change things")
    assert ("user", "write c\nand say so") not in sent and sent[-1] == ("user", "go on from 2")
    assert [n.number for n in tree.nodes(branched.store, branched.sid) if n.on_path] == [1, 2, 4]


@needs_git
def test_rewind_returns_files_to_their_state_after_that_turn(branched):
    moved = checkpoints.rewind(branched.app.workspace, branched.sid, 2)
    assert moved.lines == [
        "restored a.txt",
        "deleted c.txt",
        "deleted gone.txt",
        "recreated made.txt",
        "recreated new.txt",
    ]
    assert branched.files() == AFTER
    checkpoints.rewind(branched.app.workspace, branched.sid, 3)
    assert branched.files() == {**START, "build/out": b"junk", "c.txt": b"c"}
    checkpoints.rewind(branched.app.workspace, branched.sid, 1)
    assert branched.files() == {**START, "build/out": b"junk"}
    branched.turn("fresh")
    assert branched.sent() == TURN_1 + [("user", "fresh")]


@needs_git
def test_rewind_skips_what_the_person_changed(branched):
    (Path(branched.app.cwd) / "c.txt").write_bytes(b"edited by hand")
    moved = checkpoints.rewind(branched.app.workspace, branched.sid, 2)
    assert "skipped c.txt: changed since turn 3" in moved.lines
    assert (Path(branched.app.cwd) / "c.txt").read_bytes() == b"edited by hand"
    assert (Path(branched.app.cwd) / "new.txt").read_bytes() == b"x"


@needs_git
def test_rewind_force_after_a_skip_finishes_that_rewind_and_redo_force_its_redo(branched):
    ws, sid, c = branched.app.workspace, branched.sid, Path(branched.app.cwd) / "c.txt"
    c.write_bytes(b"edited by hand")
    assert checkpoints.rewind(ws, sid, 2).pending == ["c.txt"]
    finished = checkpoints.rewind(ws, sid, 2, force=True)
    assert (finished.finished, finished.target, finished.pending) == (True, 2, [])
    assert not c.exists() and branched.files() == AFTER
    assert checkpoints.rewind(ws, sid, 2, force=True).lines == []  # nothing left: a plain move

    checkpoints.undo(ws, sid)
    (Path(branched.app.cwd) / "made.txt").write_bytes(b"mine")
    assert checkpoints.redo(ws, sid).pending == ["made.txt"]
    finished = checkpoints.redo(ws, sid, force=True)
    assert finished.finished and branched.files() == AFTER


@needs_git
def test_continue_and_rewind_clear_the_redo_stack(s):  # noqa: F811
    checkpoints.undo(s.app.workspace, s.sid)
    checkpoints.continue_(s.app.workspace, s.sid, 1)
    with pytest.raises(UserError, match="nothing to redo"):
        checkpoints.redo(s.app.workspace, s.sid)


def test_unknown_turn_is_a_user_error(s):  # noqa: F811
    with pytest.raises(UserError, match=r"rewind: no turn 9 in session .* \(its turns are 1–2\)"):
        checkpoints.rewind(s.app.workspace, s.sid, 9)


@needs_git
def test_cli_tree_undo_redo_continue(branched):
    home, ws = branched.app.home, branched.app.cwd
    out = run_cli("tree", home=home, cwd=ws)
    assert out.returncode == 0 and out.stdout == TREE + "\n"
    rows = json.loads(run_cli("tree", "--json", home=home, cwd=ws).stdout)
    assert [(r["number"], r["parent"], r["on_path"], r["head"], r["span"]) for r in rows] == [
        (1, None, True, False, "seq 1–7"),
        (2, 1, False, False, "seq 8–18"),
        (3, 1, True, True, "seq 20–26"),
    ]
    out = run_cli("undo", home=home, cwd=ws)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "undid turn 3; the head is turn 1\nwrite c\nand say so\n"
    assert out.stderr == "deleted c.txt\n"
    out = run_cli("continue", "7", home=home, cwd=ws)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "continue: no turn 7" in out.stderr
    out = run_cli("redo", home=home, cwd=ws)
    assert (out.returncode, out.stdout) == (0, "redid turn 3\n")
    assert sessions.get(branched.store, branched.sid).head == 3
