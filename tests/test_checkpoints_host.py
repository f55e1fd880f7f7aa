"""The host methods Neovim's tree, undo, redo and fork call: plain values back."""

from __future__ import annotations

import pytest
from nodecode.errors import UserError
from nodecode.host import Host
from test_checkpoints import START, needs_git, s  # noqa: F401  (s: fixture)


class Port:
    def emit(self, event):
        pass


@needs_git
def test_host_undo_redo_tree_rewind_and_fork(s, monkeypatch):  # noqa: F811
    monkeypatch.delenv("NODECODE_SESSION", raising=False)
    host = Host(Port())
    ctx = {"home": str(s.app.home), "cwd": str(s.app.cwd)}
    rows = host.tree(ctx)
    assert [(r["number"], r["ask"], r["span"], r["on_path"], r["head"]) for r in rows] == [
        (1, "read a", "seq 1–7", True, False),
        (2, "change things", "seq 8–18", True, True),
    ]
    undone = host.undo(ctx)
    assert (undone["from"], undone["to"], undone["ask"]) == (2, 1, "change things")
    assert "deleted new.txt" in undone["lines"] and s.files() == {**START, "build/out": b"junk"}
    assert [r["on_path"] for r in host.tree(ctx)] == [True, False]
    assert host.redo(ctx)["to"] == 2
    assert host.rewind(ctx, 1)["lines"][0] == "restored a.txt"
    assert host.continue_(ctx, 2)["to"] == 2
    with pytest.raises(UserError, match="nothing to redo"):
        host.redo(ctx)
    forked = host.fork(ctx, 1)
    assert forked["parent"] == s.sid and host.session(ctx)["id"] == forked["id"]
    assert [r["number"] for r in host.tree(ctx)] == [1]


@needs_git
def test_host_undo_says_how_to_finish_a_partial_undo_and_the_bang_finishes_it(s, monkeypatch):  # noqa: F811
    monkeypatch.delenv("NODECODE_SESSION", raising=False)
    host = Host(Port())
    ctx = {"home": str(s.app.home), "cwd": str(s.app.cwd)}
    (s.app.cwd / "made.txt").write_bytes(b"mine")
    undone = host.undo(ctx)
    assert undone["pending"] == ["made.txt"] and undone["lines"][-1] == (
        "to finish undoing turn 2: :NodecodeUndo! (overwrites made.txt; "
        "your version is kept as a blob)"
    )
    finished = host.undo(ctx, True)
    assert (finished["finished"], finished["to"], finished["pending"]) == (True, 1, [])
    assert s.files() == {**START, "build/out": b"junk"}
