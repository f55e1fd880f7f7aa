"""Crash safety (issue 7.1): SIGKILL mid-stream and mid-take loses nothing committed.

After each kill the store is reopened: it passes ``PRAGMA integrity_check``,
holds every event read just before the kill byte for byte, numbers seqs
1..N, and marks the interrupted turn stopped. context.txt and
context.receipt.txt are each absent or a whole, valid file (atomic replace).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import ROOT, wait_for_request, write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.context import rendered
from nodecode.context import take as takes
from nodecode.context.fileformat import parse_first, split

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git on PATH")
DRIVER = ROOT / "tests" / "reliability_take_driver.py"
ROW_COLUMNS = "session, seq, kind, role, turn, text, payload, time"


def rows(db: Path) -> dict[tuple[str, int], tuple]:
    """Every committed event, read by a connection of its own (as another process would)."""
    con = sqlite3.connect(db, timeout=30)
    try:
        return {(r[0], r[1]): r for r in con.execute(f"SELECT {ROW_COLUMNS} FROM events")}
    finally:
        con.close()


def ask_process(home: Path, workspace: Path, text: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nodecode",
            "--home",
            str(home),
            "--cwd",
            str(workspace),
            "ask",
            text,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def read_until(proc: subprocess.Popen, marker: str, limit: float = 30.0) -> str:
    """Read the child's stdout until ``marker`` shows; a watchdog kills a stuck child."""
    watchdog = threading.Timer(limit, proc.kill)
    watchdog.start()
    seen = ""
    try:
        while marker not in seen:
            char = proc.stdout.read(1)
            assert char, f"the child ended before printing {marker!r} (got {seen[-200:]!r})"
            seen += char
    finally:
        watchdog.cancel()
    return seen


def kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(timeout=10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe:
            pipe.close()


def check_store(home: Path, before: dict[tuple[str, int], tuple]) -> App:
    """Reopen after a kill: integrity, nothing committed lost or changed, seqs 1..N."""
    app = App.open(home, "default", home, environ={})
    assert app.store.read("PRAGMA integrity_check") == [("ok",)]
    after = rows(app.store.path)
    lost = [key for key in before if key not in after]
    changed = [key for key in before if key in after and after[key] != before[key]]
    assert not lost and not changed, f"lost {lost[:5]}, changed {changed[:5]}"
    for sid in {key[0] for key in after}:
        seqs = sorted(seq for s, seq in after if s == sid)
        assert seqs == list(range(1, len(seqs) + 1)), f"seq gaps or duplicates in {sid}"
    assert not app.store.read("SELECT session, number FROM turns WHERE status = 'running'")
    for e in app.store.events(app.current_session(), kinds=("export", "edit")):
        assert rendered.file_bytes(app.store, e.payload["blob"]) is not None, (
            f"the bytes of seq {e.seq} cannot be read back"
        )
    return app


# -- a streaming turn ---------------------------------------------------------------


def test_sigkill_mid_stream_keeps_every_committed_event_and_marks_the_turn_stopped(
    loopback, home, workspace
):
    (workspace / "a.txt").write_text("alpha\n")
    words = " ".join(f"w{i}" for i in range(400))
    srv = loopback(
        [
            {"text": "Reading.", "calls": [{"code": ';; read a\n(read-file "a.txt")'}]},
            {"text": words},
        ],
        chunk_delay=0.03,
    )
    write_config(home, srv)
    app = App.open(home, "default", workspace, environ={})
    sid = app.new_session()
    app.close()

    proc = ask_process(home, workspace, "read a, then talk")
    wait_for_request(srv, 2)  # the second round is streaming
    before = rows(home / "store" / "default.db")
    kill(proc)

    kinds_before = [row[2] for _, row in sorted(before.items())]
    assert kinds_before[0] == "user" and kinds_before[-1] == "tool"  # round 1 committed
    app = check_store(home, before)
    events = app.store.events(sid)
    assert [e.kind for e in events] == kinds_before + ["stopped"]
    assert events[-1].turn == 1
    assert app.store.read("SELECT status, last_seq FROM turns WHERE session = ?", (sid,)) == [
        ("stopped", events[-1].seq)
    ]
    app.close()
    again = App.open(home, "default", workspace, environ={})  # recovery happens once
    assert len(again.store.events(sid)) == len(events)
    again.close()


def test_sigkill_at_random_moments_of_multi_round_turns(loopback, home, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    srv = loopback([], chunk_delay=0.005)
    write_config(home, srv)
    app = App.open(home, "default", workspace, environ={})
    sid = app.new_session()
    app.close()
    rng = random.Random(7)
    for attempt in range(3):
        srv.add_rounds(
            [
                {
                    "text": f"round {r} " + "word " * 20,
                    "calls": [{"code": f';; step {r}\n(read-file "a.txt")'}],
                }
                for r in range(8)
            ]
            + [{"text": "finished"}]
        )
        sent = len(srv.model_requests)
        proc = ask_process(home, workspace, f"attempt {attempt}")
        wait_for_request(srv, sent + 1)
        time.sleep(rng.uniform(0.0, 0.8))
        before = rows(home / "store" / "default.db")
        kill(proc)
        app = check_store(home, before)
        turns = app.store.read(
            "SELECT number, status, last_seq FROM turns WHERE session = ? ORDER BY number", (sid,)
        )
        assert [t[0] for t in turns] == list(range(1, attempt + 2))
        number, status, last = turns[-1]
        last_event = app.store.event(sid, last)
        assert status in ("stopped", "done") and last_event.turn == number
        if status == "stopped":
            assert last_event.kind == "stopped"
        app.close()


# -- a take -------------------------------------------------------------------------


def context_file_is_whole(app: App, sid: str, path: Path) -> None:
    """context.txt is absent, or names a logged export and every block parses."""
    if not path.exists():
        return
    text = path.read_bytes().decode("utf-8")
    first = text.split("\n", 1)[0]
    exports = {e.text: e for e in app.store.events(sid, kinds=("export",))}
    assert first in exports, f"context.txt names no logged export: {first!r}"
    parsed = parse_first(first)
    assert parsed is not None and parsed[2] == exports[first].payload["number"]
    found = split(text, parsed[3])
    assert not found.errors and found.blocks, found.errors
    kept = {
        e.payload["blob"]
        for e in app.store.events(sid, kinds=("export", "edit"))
        if "blob" in e.payload
    }
    if hashlib.sha256(text.encode()).hexdigest() not in kept:
        # An edit not recorded yet: the driver only ever edits the newest export.
        assert exports[first].seq == max(e.seq for e in exports.values())


def receipt_file_is_whole(app: App, sid: str, path: Path) -> None:
    """context.receipt.txt is absent, or every receipt in it is a logged receipt event."""
    if not path.exists():
        return
    text = path.read_bytes().decode("utf-8")
    assert text.startswith("[[receipt ") and text.endswith("\n")
    logged = {e.text for e in app.store.events(sid, kinds=("receipt",))}
    for part in text[:-1].split("\n\n"):
        assert part in logged, f"a receipt that is not in the log: {part[:200]!r}"


def no_spurious_refusal(app: App, sid: str) -> None:
    """The driver never changes line 1: a crash must not turn a file it did not
    edit (an export the log lost, or the previous export) into a refused edit."""
    for e in app.store.events(sid, kinds=("receipt",)):
        assert "first line changed" not in e.text, e.text


def test_sigkill_mid_take_never_leaves_a_half_written_file(loopback, home, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    srv = loopback(
        [
            {"text": "Reading.", "calls": [{"code": ';; read a\n(read-file "a.txt")'}]},
            {"text": "a.txt says alpha."},
        ]
    )
    write_config(home, srv, auto_approve=True)
    app = App.open(home, "default", workspace, environ={})
    sid = app.new_session()
    Agent(app, sid).ask("read a", TurnCallbacks())
    app.close()
    context = home / "context" / "default" / sid / "context.txt"
    receipt = context.with_name("context.receipt.txt")

    rng = random.Random(2024)
    takes_seen = 0
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), str(home), str(workspace), sid],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        read_until(proc, "ready\n")
        time.sleep(rng.uniform(0.05, 0.6))
        before = rows(home / "store" / "default.db")
        kill(proc)
        app = check_store(home, before)
        context_file_is_whole(app, sid, context)
        receipt_file_is_whole(app, sid, receipt)
        takes.take(app.workspace, sid, None)  # the store stays usable: a take after the crash works
        context_file_is_whole(app, sid, context)
        receipt_file_is_whole(app, sid, receipt)
        no_spurious_refusal(app, sid)
        takes_seen += len(app.store.events(sid, kinds=("receipt",)))
        app.close()
    assert takes_seen > 0  # the kills landed while the driver was taking


# -- a shell cell dies with its turn ------------------------------------------------

WRITER = (
    ";; keep writing\n"
    '(shell "echo $$ > {pid}; printf x > made.txt; i=0; '
    'while :; do i=$((i+1)); echo write $i > out.txt; sleep 0.02; done" :timeout 120)'
)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (a zombie does not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone while we looked
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def wait_for(condition, what: str, limit: float = 20.0) -> None:
    """Wait for something another process does; fail naming it if it never happens."""
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


def writing_ask(loopback, home: Path, workspace: Path, pid_file: Path) -> tuple:
    """`nodecode ask --yes` running a shell loop that keeps rewriting out.txt;
    returns the CLI process and the loop's process group once it writes."""
    (workspace / "out.txt").write_text("original\n")
    srv = loopback(
        [{"text": "Writing.", "calls": [{"code": WRITER.format(pid=pid_file)}]}, {"text": "no"}]
    )
    write_config(home, srv)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace)]
        + ["ask", "--yes", "write out.txt"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: (workspace / "out.txt").read_text().startswith("write"), "the loop")
    return proc, int(pid_file.read_text())


def undo_restores_what_the_loop_did(home: Path, workspace: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace), "undo"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "undid turn 1; the head is the start (no turn)\nwrite out.txt\n"
    assert sorted(out.stderr.splitlines()) == ["deleted made.txt", "restored out.txt"]
    assert (workspace / "out.txt").read_text() == "original\n"
    assert not (workspace / "made.txt").exists()


@needs_git
def test_sigkill_of_nodecode_kills_the_shell_and_undo_restores_its_changes(
    loopback, home, workspace, tmp_path
):
    proc, pgid = writing_ask(loopback, home, workspace, tmp_path / "writer.pid")
    try:
        kill(proc)
        wait_for(lambda: not group_alive(pgid), "the shell's process group to die")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    undo_restores_what_the_loop_did(home, workspace)


@needs_git
def test_stopping_the_turn_kills_the_shell_and_undo_restores_its_changes(
    loopback, home, workspace, tmp_path
):
    proc, pgid = writing_ask(loopback, home, workspace, tmp_path / "writer.pid")
    try:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the turn stops
        assert proc.wait(timeout=20) == 130
        assert "nodecode: stopped" in proc.stderr.read()
        wait_for(lambda: not group_alive(pgid), "the shell's process group to die")
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    undo_restores_what_the_loop_did(home, workspace)


@needs_git
def test_undo_of_a_killed_shell_names_a_file_edited_after_the_kill(
    loopback, home, workspace, tmp_path
):
    proc, pgid = writing_ask(loopback, home, workspace, tmp_path / "writer.pid")
    try:
        kill(proc)
        wait_for(lambda: not group_alive(pgid), "the shell's process group to die")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    (workspace / "out.txt").write_text("the person's fix\n")
    later = time.time() + 60  # edited a minute after the kill
    os.utime(workspace / "out.txt", (later, later))

    out = subprocess.run(
        [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace), "undo"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        "deleted made.txt",
        "shell changes of turn 1 were not tracked: out.txt changed again after the turn "
        "was killed; left as it is",
    ]
    assert (workspace / "out.txt").read_text() == "the person's fix\n"
    assert not (workspace / "made.txt").exists()
