"""Undo and redo over a real workspace on disk, with real turns (doc/design.md "Checkpoints").

Turn 2 of the standard session writes a file, edits one and runs a shell
command that deletes one, creates one and appends to the edited one; every
test checks the files byte for byte and, where it matters, the next request.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
from helpers import run_cli, write_config
from nodecode import recall
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.checkpoints import moves as checkpoints
from nodecode.context import derived
from nodecode.errors import SessionBusy, UserError
from nodecode.log import leases, sessions, turns

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git on PATH")

START = {
    "a.txt": b"alpha\n",
    "gone.txt": b"bye\r\n",
    "keep.bin": bytes(range(256)),
    ".gitignore": b"build/\n",
}
CELLS = [
    ';; write\n(write-file "new.txt" "x")',
    ';; edit\n(edit-file "a.txt" "alpha" "ALPHA")',
    (
        ';; shell\n(shell "rm gone.txt && printf hi > made.txt && printf more >> a.txt '
        '&& mkdir -p build && printf junk > build/out")'
    ),
]
AFTER = {
    "a.txt": b"ALPHA\nmore",
    "keep.bin": bytes(range(256)),
    ".gitignore": b"build/\n",
    "new.txt": b"x",
    "made.txt": b"hi",
    "build/out": b"junk",
}


class Session:
    """One session over a real workspace, its turns run against the loopback server."""

    def __init__(self, app: App, srv, sid: str):
        self.app, self.srv, self.sid, self.store = app, srv, sid, app.store

    def turn(self, ask: str, *cells: str, reply: str = "Done."):
        calls = [{"text": "Working.", "calls": [{"code": c} for c in cells]}] if cells else []
        self.srv.add_rounds(calls + [{"text": reply}])
        result = Agent(self.app, self.sid).ask(ask, TurnCallbacks())
        assert result.status == "done", result
        return result.turn

    def files(self) -> dict[str, bytes]:
        root = Path(self.app.cwd)
        return {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }

    def sent(self) -> list[tuple[str, str]]:
        """(role, text or tool id) of every block of the last request."""
        out = []
        for msg in self.srv.model_requests[-1].body["messages"]:
            for b in msg["content"]:
                if b["type"] == "text":
                    out.append((msg["role"], b["text"]))
                elif b["type"] == "tool_use":
                    out.append(("tool_use", b["input"]["code"]))
                else:
                    out.append(("tool_result", b["content"]))
        return out

    def moves(self) -> list:
        return self.store.events(self.sid, kinds=("move",))


def make_session(tmp_path: Path, loopback, name: str = "ws", **config) -> Session:
    ws = tmp_path / name
    ws.mkdir()
    for rel, data in START.items():
        (ws / rel).write_bytes(data)
    srv = loopback([], cache_min_tokens=1)
    home = write_config(tmp_path / "home", srv, auto_approve=True, **config)
    app = App.open(home, "default", ws, environ={})
    return Session(app, srv, app.new_session("t"))


@pytest.fixture
def s(tmp_path, loopback):
    """Turn 1 reads a.txt; turn 2 changes files with file verbs and a shell command."""
    sess = make_session(tmp_path, loopback)
    sess.turn("read a", ';; read a\n(read-file "a.txt")')
    sess.turn("change things", *CELLS)
    yield sess
    sess.app.close()


@needs_git
def test_turn_records_file_verb_and_shell_changes_with_exact_bytes(s):
    assert s.files() == AFTER
    tools = [e for e in s.store.events(s.sid) if e.role == "tool" and e.turn == 2]
    shell = tools[2].payload["changes"]
    got = {
        Path(c["path"]).name: (
            s.store.blob(c["before"]) if c["before"] else None,
            s.store.blob(c["after"]) if c["after"] else None,
        )
        for c in shell
    }
    # build/ is ignored by the workspace's .gitignore: not tracked.
    assert got == {
        "a.txt": (b"ALPHA\n", b"ALPHA\nmore"),
        "gone.txt": (b"bye\r\n", None),
        "made.txt": (None, b"hi"),
    }


@needs_git
def test_undo_restores_every_file_byte_for_byte_and_offers_the_ask_back(s):
    moved = checkpoints.undo(s.app.workspace, s.sid)
    assert moved.ask == "change things" and (moved.source, moved.target) == (2, 1)
    assert moved.lines == [
        "restored a.txt",
        "recreated gone.txt",
        "deleted made.txt",
        "deleted new.txt",
    ]
    assert s.files() == {**START, "build/out": b"junk"}
    assert sessions.get(s.store, s.sid).head == 1
    [event] = s.moves()
    assert event.turn == 1 and event.payload["op"] == "undo"
    assert (event.payload["from"], event.payload["to"]) == (2, 1)


@needs_git
def test_redo_reapplies_the_undone_turn(s):
    checkpoints.undo(s.app.workspace, s.sid)
    moved = checkpoints.redo(s.app.workspace, s.sid)
    assert (moved.source, moved.target) == (1, 2)
    assert s.files() == AFTER
    with pytest.raises(UserError, match="nothing to redo"):
        checkpoints.redo(s.app.workspace, s.sid)


@needs_git
def test_redo_says_reapplied_where_undo_says_restored(s):
    undone = checkpoints.undo(s.app.workspace, s.sid)
    moved = checkpoints.redo(s.app.workspace, s.sid)
    assert "restored a.txt" in undone.lines
    assert "reapplied a.txt" in moved.lines and not any("restored" in x for x in moved.lines)


@needs_git
def test_redo_walks_forward_one_turn_per_redo(s):
    s.turn("more", ';; w\n(write-file "c.txt" "c")')
    checkpoints.undo(s.app.workspace, s.sid)
    checkpoints.undo(s.app.workspace, s.sid)
    assert sessions.get(s.store, s.sid).head == 1 and not (Path(s.app.cwd) / "c.txt").exists()
    assert checkpoints.redo(s.app.workspace, s.sid).target == 2
    assert not (Path(s.app.cwd) / "c.txt").exists()
    assert checkpoints.redo(s.app.workspace, s.sid).target == 3
    assert s.files() == {**AFTER, "c.txt": b"c"}


@needs_git
def test_a_new_ask_after_undo_takes_the_next_number_and_clears_redo(s):
    checkpoints.undo(s.app.workspace, s.sid)
    assert s.turn("something else") == 3
    with pytest.raises(UserError, match="nothing to redo"):
        checkpoints.redo(s.app.workspace, s.sid)
    # The next request read turn 1 and the new ask: nothing of the undone turn.
    assert s.sent() == [
        ("user", "read a"),
        ("assistant", "Working."),
        ("tool_use", ';; read a\n(read-file "a.txt")'),
        ("tool_result", "alpha\n[seq 5]"),
        ("assistant", "Done."),
        ("user", "something else"),
    ]
    # The undone turn stays in the log; recall marks it.
    assert recall.recall_log(s.store, s.sid, match="change things") == [
        "[seq 8 · turn 2 · user · undone] change things"
    ]


@needs_git
def test_undo_skips_a_file_the_person_changed_and_says_so(s):
    (Path(s.app.cwd) / "made.txt").write_bytes(b"mine")
    moved = checkpoints.undo(s.app.workspace, s.sid)
    assert "skipped made.txt: changed since turn 2" in moved.lines
    assert (Path(s.app.cwd) / "made.txt").read_bytes() == b"mine"
    assert (Path(s.app.cwd) / "a.txt").read_bytes() == b"alpha\n"


@needs_git
def test_forced_undo_overwrites_and_keeps_the_persons_bytes(s):
    (Path(s.app.cwd) / "a.txt").write_bytes(b"my own \x00 edit")
    moved = checkpoints.undo(s.app.workspace, s.sid, force=True)
    assert (Path(s.app.cwd) / "a.txt").read_bytes() == b"alpha\n"
    [entry] = [f for f in s.moves()[0].payload["files"] if f["path"].endswith("a.txt")]
    assert s.store.blob(entry["kept"]) == b"my own \x00 edit"
    assert moved.lines[0] == (
        "restored a.txt (forced: changed since turn 2; your version is "
        f"kept: nodecode blob {entry['kept'][:12]})"
    )
    assert checkpoints.find_blob(s.store, entry["kept"][:12]) == b"my own \x00 edit"


@needs_git
def test_undo_never_touches_another_sessions_files(s, tmp_path):
    # Another session of the same store: one in the same workspace, one elsewhere.
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "a.txt").write_bytes(b"alpha\n")
    here = Session(s.app, s.srv, s.app.new_session("same workspace"))
    apart = App.open(s.app.home, "default", tmp_path / "ws2", environ={})
    there = Session(apart, s.srv, apart.new_session("elsewhere"))
    try:
        here.turn("b", ';; w\n(write-file "b.txt" "theirs")')
        there.turn("a", ';; w\n(edit-file "a.txt" "alpha" "theirs")')
        checkpoints.undo(s.app.workspace, s.sid)
        assert s.files() == {**START, "build/out": b"junk", "b.txt": b"theirs"}
        assert (tmp_path / "ws2" / "a.txt").read_bytes() == b"theirs\n"
        checkpoints.undo(apart.workspace, there.sid)
        assert (tmp_path / "ws2" / "a.txt").read_bytes() == b"alpha\n"
        assert (Path(s.app.cwd) / "b.txt").read_bytes() == b"theirs"
    finally:
        apart.close()


@needs_git
def test_undo_says_when_shell_changes_were_not_tracked(tmp_path, loopback, monkeypatch):
    sess = make_session(tmp_path, loopback)
    monkeypatch.setattr("nodecode.checkpoints.shadow.shutil.which", lambda name: None)
    sess.turn("shell", ';; s\n(shell "printf z > z.txt")')
    moved = checkpoints.undo(sess.app.workspace, sess.sid)
    assert moved.lines == [
        ("shell changes of turn 1 were not tracked: git is not installed (not found on PATH)")
    ]
    assert (Path(sess.app.cwd) / "z.txt").exists()
    sess.app.close()


def test_undo_with_nothing_to_undo_is_a_user_error(tmp_path, loopback):
    sess = make_session(tmp_path, loopback)
    with pytest.raises(UserError, match="nothing to undo"):
        checkpoints.undo(sess.app.workspace, sess.sid)
    sess.app.close()


@needs_git
def test_a_move_waits_for_no_running_turn(s):
    lease = leases.Lease(s.store, s.sid).acquire()
    try:
        with pytest.raises(SessionBusy):
            checkpoints.undo(s.app.workspace, s.sid)
    finally:
        lease.release()


@needs_git
def test_undo_makes_older_exports_stale(s):
    before = derived.read(s.store, s.sid).takes.takes
    checkpoints.undo(s.app.workspace, s.sid)
    assert derived.read(s.store, s.sid).takes.takes == before + 1


def test_undo_refuses_paths_outside_the_workspace(tmp_path, loopback):
    sess = make_session(tmp_path, loopback)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"after")
    own = sess.app.home / "context" / "x.txt"
    own.parent.mkdir(parents=True, exist_ok=True)
    own.write_bytes(b"after")
    put = sess.store.put_blob
    turn = turns.begin(sess.store, sess.sid, sess.store.last_seq(sess.sid) + 1)
    sess.store.append(sess.sid, "user", role="user", turn=turn.number, text="forged")
    sess.store.append(
        sess.sid,
        "tool",
        role="tool",
        turn=turn.number,
        text="[seq 2]",
        payload={
            "call": 0,
            "workspace": str(sess.app.cwd.resolve()),
            "changes": [
                {"path": str(p.resolve()), "before": put(b"before"), "after": put(b"after")}
                for p in (outside, own)
            ],
        },
    )
    turns.finish(sess.store, sess.sid, turn.number, sess.store.last_seq(sess.sid), "done")
    moved = checkpoints.undo(sess.app.workspace, sess.sid)
    assert moved.lines == [
        f"skipped {p.resolve()}: outside the workspace {sess.app.cwd.resolve()}"
        for p in (own, outside)
    ]
    assert outside.read_bytes() == own.read_bytes() == b"after"
    sess.app.close()


@needs_git
def test_undo_never_writes_through_a_hard_link_to_outside(tmp_path, loopback):
    # A turn's shell command hard-links a workspace file to one outside; undoing
    # it restores the workspace file and leaves the outside file as it was.
    sess = make_session(tmp_path, loopback)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside\n")
    sess.turn("link", f';; link\n(shell "ln -f {outside} a.txt")')
    a = Path(sess.app.cwd) / "a.txt"
    assert a.stat().st_ino == outside.stat().st_ino
    moved = checkpoints.undo(sess.app.workspace, sess.sid)
    assert moved.lines == ["restored a.txt"]
    assert a.read_bytes() == b"alpha\n"
    assert outside.read_bytes() == b"outside\n"
    sess.app.close()


def test_undo_force_after_a_skip_finishes_that_turn_through_the_cli(tmp_path, loopback):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_bytes(b"start\n")
    srv = loopback(
        [
            {"text": "One.", "calls": [{"code": ';; w\n(write-file "a.txt" "one\\n")'}]},
            {"text": "Wrote one."},
            {
                "text": "Two.",
                "calls": [
                    {"code": ';; w\n(write-file "a.txt" "two\\n")\n(write-file "b.txt" "b")'}
                ],
            },
            {"text": "Wrote two."},
        ]
    )
    home = write_config(tmp_path / "home", srv)
    for ask in ("write one", "write two"):
        done = run_cli("ask", "--yes", ask, home=home, cwd=ws)
        assert done.returncode == 0, done.stderr
    (ws / "a.txt").write_bytes(b"mine\n")  # the person edits turn 2's file

    out = run_cli("undo", home=home, cwd=ws)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "undid turn 2 except 1 file; the head is turn 1\nwrite two\n"
    assert out.stderr.splitlines() == [
        "skipped a.txt: changed since turn 2",
        "deleted b.txt",
        "to finish undoing turn 2: nodecode undo --force "
        "(overwrites a.txt; your version is kept as a blob)",
    ]
    assert (ws / "a.txt").read_bytes() == b"mine\n" and not (ws / "b.txt").exists()

    out = run_cli("undo", "--force", home=home, cwd=ws)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "finished undoing turn 2; the head is turn 1\n"
    [line] = out.stderr.splitlines()
    assert line.startswith("restored a.txt (forced: changed since turn 2; your version is kept:")
    assert (ws / "a.txt").read_bytes() == b"one\n"  # turn 1's file: turn 2 is undone whole
    kept = line.rsplit("nodecode blob ", 1)[1].rstrip(")")
    assert run_cli("blob", kept, home=home, cwd=ws).stdout == "mine\n"

    out = run_cli("undo", "--force", home=home, cwd=ws)  # nothing left to finish: undo turn 1
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("undid turn 1; the head is the start (no turn)\n")
    assert (ws / "a.txt").read_bytes() == b"start\n"


def test_undo_force_after_a_new_ask_undoes_the_new_turn(tmp_path, loopback):
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = loopback(
        [
            {"text": "W.", "calls": [{"code": ';; w\n(write-file "a.txt" "one\\n")'}]},
            {"text": "Wrote."},
            {"text": "W.", "calls": [{"code": ';; w\n(write-file "a.txt" "two\\n")'}]},
            {"text": "Wrote."},
            {"text": "Just talking."},
        ]
    )
    home = write_config(tmp_path / "home", srv)
    for ask in ("one", "two"):
        assert run_cli("ask", "--yes", ask, home=home, cwd=ws).returncode == 0
    (ws / "a.txt").write_bytes(b"mine\n")
    assert "skipped a.txt" in run_cli("undo", home=home, cwd=ws).stderr
    assert run_cli("ask", "talk", home=home, cwd=ws).returncode == 0  # something happened

    out = run_cli("undo", "--force", home=home, cwd=ws)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("undid turn 3; the head is turn 1\n")
    assert (ws / "a.txt").read_bytes() == b"mine\n"


def _not_regular(path: Path, kind: str) -> None:
    """Put a FIFO, a directory or a socket where the file ``path`` was."""
    path.unlink()
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        with socket.socket(socket.AF_UNIX) as sock:
            here = os.getcwd()
            os.chdir(path.parent)  # a relative name: socket paths are short
            try:
                sock.bind(path.name)
            finally:
                os.chdir(here)


@pytest.mark.parametrize(
    ("kind", "force"), [("FIFO", False), ("directory", True), ("socket", True)]
)
def test_undo_names_a_file_that_is_no_longer_regular_and_leaves_it_once(
    tmp_path, loopback, kind, force
):
    # Issue "Trust, third round" 11: a FIFO hung undo (and --force) forever, holding
    # the session; a directory or socket failed and asked for --force, which failed
    # again and asked again.
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = loopback(
        [{"text": "W.", "calls": [{"code": '(write-file "x.txt" "one\\n")'}]}, {"text": "Ok."}]
    )
    home = write_config(tmp_path / "home", srv)
    assert run_cli("ask", "--yes", "write", home=home, cwd=ws).returncode == 0
    _not_regular(ws / "x.txt", kind)

    undo = ["undo", "--force"] if force else ["undo"]
    out = run_cli(*undo, home=home, cwd=ws, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        f"skipped x.txt: a {kind}, not a regular file (undo restores regular files only)"
    ]
    assert out.stdout.startswith("undid turn 1 except 1 file; the head is the start")
    again = run_cli("undo", "--force", home=home, cwd=ws, timeout=30)
    assert again.returncode == 1 and "nothing to undo" in again.stderr


@needs_git
def test_a_folder_swapped_for_a_symlink_during_undo_keeps_the_restore_inside(
    tmp_path, loopback, monkeypatch
):
    # The turn rewrote sub/f.txt; by the time undo restores it, sub leads outside,
    # to a file with the same bytes (so nothing looks changed by the person).
    sess = make_session(tmp_path, loopback)
    sub = Path(sess.app.cwd) / "sub"
    sub.mkdir()
    (sub / "f.txt").write_bytes(b"before\n")
    sess.turn("rewrite", ';; write\n(write-file "sub/f.txt" "after\\n")')
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_bytes(b"after\n")
    checked = checkpoints._refusal

    def check_then_swap(ws, step):
        refusal = checked(ws, step)
        sub.rename(sub.with_name("sub.moved"))
        sub.symlink_to(outside, target_is_directory=True)
        return refusal

    monkeypatch.setattr(checkpoints, "_refusal", check_then_swap)
    moved = checkpoints.undo(sess.app.workspace, sess.sid)
    assert (outside / "f.txt").read_bytes() == b"after\n"
    assert moved.lines == ["skipped sub/f.txt: now reached through a symlink"]
    sess.app.close()
