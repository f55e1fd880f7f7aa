"""Concurrency (issue 7.2): several processes on one store lose and duplicate nothing.

Every process here is a real ``nodecode`` process (or the test process itself
against a subprocess), all on one store and one loopback server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import run_cli, wait_for_request, write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.context import take as takes
from nodecode.log.leases import lease_live
from nodecode.log.store import open_store

TIMEOUT = 90
ASK_KINDS = [
    "user",
    "request",
    "assistant",
    "call",
    "tool",
    "request",
    "assistant",
    "call",
    "tool",
    "request",
    "assistant",
]
TURN_KINDS = {"user", "request", "assistant", "call", "tool", "stopped", "error"}


def turn_kinds(events) -> list[str]:
    """The kinds a turn logs (other features may log events of their own beside them)."""
    return [e.kind for e in events if e.kind in TURN_KINDS]


def cli(home: Path, workspace: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    env = {**{k: v for k, v in os.environ.items() if k != "NODECODE_SESSION"}, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"a child did not finish in {TIMEOUT} s: {err[-500:]}") from None
    return proc.returncode, out, err


def new_sessions(home: Path, workspace: Path, n: int) -> list[str]:
    app = App.open(home, "default", workspace, environ={})
    sids = [app.new_session(f"s{i}") for i in range(n)]
    app.close()
    return sids


def rounds_for(word: str) -> list[dict]:
    return [
        {"match": word, "text": f"{word} one.", "calls": [{"code": '(read-file "a.txt")'}]},
        {"match": word, "text": f"{word} two.", "calls": [{"code": "(list-files)"}]},
        {"match": word, "text": f"{word} done " + "word " * 40},
    ]


# An eval loop in one process: cli.main per cell, as `nodecode eval` runs it.
EVAL_LOOP = """
import sys
from nodecode.cli import main
home, cwd, n, sids = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
codes = [main(["--home", home, "--cwd", cwd, "--session", sids[i % len(sids)], "eval",
               f'(recall-log :limit 1) ;; eval {i}']) for i in range(n)]
print("CODES", *codes)
"""


def test_two_asks_on_two_sessions_and_an_eval_loop_lose_and_duplicate_nothing(
    loopback, home, workspace
):
    (workspace / "a.txt").write_text("alpha\n")
    srv = loopback(rounds_for("alpha") + rounds_for("beta"), chunk_delay=0.01)
    write_config(home, srv)
    sid_a, sid_b = new_sessions(home, workspace, 2)
    evals = 30
    procs = [
        cli(home, workspace, "--session", sid_a, "ask", "alpha task"),
        cli(home, workspace, "--session", sid_b, "ask", "beta task"),
        subprocess.Popen(
            [sys.executable, "-c", EVAL_LOOP, str(home), str(workspace), str(evals), sid_a, sid_b],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
    ]
    (rc_a, out_a, err_a), (rc_b, out_b, err_b), (rc_e, out_e, err_e) = map(finish, procs)
    assert (rc_a, rc_b, rc_e) == (0, 0, 0), (err_a, err_b, err_e)
    assert "alpha done" in out_a and "beta done" in out_b
    assert out_e.splitlines()[-1].split() == ["CODES"] + ["0"] * evals, out_e + err_e

    store = open_store(home, "default")
    for sid, word in ((sid_a, "alpha"), (sid_b, "beta")):
        events = store.events(sid)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert turn_kinds(events) == ASK_KINDS
        cells = [e.text for e in events if e.kind == "cell"]
        assert len(cells) == evals // 2 and len(set(cells)) == len(cells)
        assert [e.text for e in events if e.kind == "assistant"][-1].startswith(f"{word} done")
    assert len(srv.model_requests) == 6
    store.close()


def test_two_asks_on_the_same_session_one_is_refused_as_busy(loopback, home, workspace):
    srv = loopback(
        [{"text": "first " + "word " * 300}, {"text": "second " + "word " * 300}], chunk_delay=0.06
    )
    write_config(home, srv)
    (sid,) = new_sessions(home, workspace, 1)
    results = [
        finish(p) for p in [cli(home, workspace, "ask", "one"), cli(home, workspace, "ask", "two")]
    ]
    codes = sorted(r[0] for r in results)
    assert codes == [0, 1], [r[2] for r in results]
    loser = next(r for r in results if r[0] == 1)
    assert loser[1] == ""
    lines = loser[2].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nodecode: session busy"), loser[2]
    store = open_store(home, "default")
    assert turn_kinds(store.events(sid)) == ["user", "request", "assistant"]
    assert store.read("SELECT number, status FROM turns WHERE session = ?", (sid,)) == [(1, "done")]
    assert len(srv.model_requests) == 1
    store.close()


def test_a_killed_asks_lease_does_not_hold_the_session(loopback, home, workspace):
    srv = loopback([{"text": "w " * 400}, {"text": "after the kill"}], chunk_delay=0.05)
    write_config(home, srv)
    (sid,) = new_sessions(home, workspace, 1)
    proc = cli(home, workspace, "ask", "long")
    wait_for_request(srv)  # streaming: the lease is held
    store = open_store(home, "default")
    assert lease_live(store, sid)
    proc.kill()
    proc.wait(timeout=10)
    proc.stdout.close()
    proc.stderr.close()
    [(expires,)] = store.read("SELECT expires FROM leases WHERE session = ?", (sid,))
    assert expires > time.time() + 10  # not expired: the dead pid is what frees it
    assert not lease_live(store, sid)
    store.close()

    done = run_cli("ask", "again", home=home, cwd=workspace, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "after the kill" in done.stdout
    store = open_store(home, "default")
    assert store.read(
        "SELECT number, status FROM turns WHERE session = ? ORDER BY number", (sid,)
    ) == [(1, "stopped"), (2, "done")]
    store.close()


def test_an_edit_of_an_older_export_saved_after_a_take_is_refused_as_stale(
    loopback, home, workspace
):
    """This process exports and edits; `nodecode ask` processes take."""
    (workspace / "a.txt").write_text("alpha\n")
    srv = loopback(
        [
            {"text": "Reading.", "calls": [{"code": '(read-file "a.txt")'}]},
            {"text": "a.txt says alpha."},
            {"text": "noted"},
            {"text": "again"},
        ]
    )
    write_config(home, srv, auto_approve=True)
    app = App.open(home, "default", workspace, environ={})
    sid = app.new_session()
    Agent(app, sid).ask("read a", TurnCallbacks())

    path = takes.export(app.workspace, sid)
    old = path.read_text()  # the person keeps export 1 open in an editor
    takes.export(app.workspace, sid)
    path.write_text(path.read_text() + "[[note]]\nnote on export 2\n")
    took = run_cli("ask", "go on", home=home, cwd=workspace, timeout=TIMEOUT)
    assert took.returncode == 0, took.stderr
    assert "taken at seq" in takes.receipt_file(app.workspace, sid).read_text()

    stale = old.replace("a.txt says alpha.", "rewritten on export 1")
    assert stale != old
    path.write_text(stale)  # saved over the newer export, after its take
    check = takes.validate(app.workspace, sid, stale)
    assert not check["ok"] and takes.STALE in json.dumps(check["errors"])
    refused = run_cli("ask", "and again", home=home, cwd=workspace, timeout=TIMEOUT)
    assert refused.returncode == 0, refused.stderr
    receipt = takes.receipt_file(app.workspace, sid).read_text()
    assert "refused at seq" in receipt and takes.STALE in receipt
    sent = json.dumps(srv.model_requests[-1].body)
    assert "rewritten on export 1" not in sent and "a.txt says alpha." in sent
    assert "note on export 2" in sent and takes.STALE in sent  # the notice reached the agent
    app.close()


NOTE_LOOP = """
import sys
from nodecode.cli import main
home, cwd, sid, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
codes = [main(["--home", home, "--cwd", cwd, "--session", sid, "eval",
               f'(context :note "{tag} note {i}")']) for i in range(n)]
print("CODES", *codes)
"""


def test_form_edits_from_two_processes_are_all_taken(loopback, home, workspace):
    srv = loopback([{"text": "hello"}, {"text": "seen"}])
    write_config(home, srv)
    (sid,) = new_sessions(home, workspace, 1)
    assert run_cli("--session", sid, "ask", "hi", home=home, cwd=workspace).returncode == 0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", NOTE_LOOP, str(home), str(workspace), sid, tag, "8"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("left", "right")
    ]
    for proc in procs:
        rc, out, err = finish(proc)
        assert rc == 0 and out.splitlines()[-1].split() == ["CODES"] + ["0"] * 8, out + err
    done = run_cli("--session", sid, "ask", "go", home=home, cwd=workspace, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    sent = json.dumps(srv.model_requests[-1].body)
    missing = [
        f"{tag} note {i}"
        for tag in ("left", "right")
        for i in range(8)
        if f"{tag} note {i}" not in sent
    ]
    assert not missing
    store = open_store(home, "default")
    [receipt] = store.events(sid, kinds=("receipt",))
    assert "refused" not in receipt.text and receipt.text.count("noted 1 (") == 16, receipt.text
    store.close()


# -- the lease is held for the whole turn --------------------------------------------

SHORT_LEASE = {"NODECODE_LEASE_SECONDS": "1"}


def wait_until(condition, what: str, limit: float = 30.0) -> None:
    """Wait for something another process does; fail naming it if it never happens."""
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


def lease_expiry(home: Path, sid: str) -> float:
    store = open_store(home, "default")
    try:
        [(expires,)] = store.read("SELECT expires FROM leases WHERE session = ?", (sid,))
    finally:
        store.close()
    return expires


def waiting_turn(loopback, home: Path, workspace: Path, flags: Path):
    """A session whose first ask runs a cell that waits (past its lease and past
    shell_timeout) until the test creates ``flags/go``; it touches ``flags/started``."""
    started, go = flags / "started", flags / "go"
    cell = f'(shell "touch {started}; while [ ! -e {go} ]; do sleep 0.05; done" :timeout 60)'
    srv = loopback(
        [
            {"text": "Waiting.", "calls": [{"code": ";; wait for go\n" + cell}]},
            {"text": "done waiting"},
            {"text": "the second ask ran"},
        ]
    )
    write_config(home, srv, shell_timeout=1)
    (sid,) = new_sessions(home, workspace, 1)
    first = cli(home, workspace, "ask", "--yes", "one", env=SHORT_LEASE)
    wait_until(started.exists, "the cell to start")
    return srv, sid, first, go


def assert_one_whole_turn(home: Path, sid: str, srv) -> None:
    """The session holds the first turn only, done, with no false ``stopped``."""
    store = open_store(home, "default")
    events = store.events(sid)
    kinds = turn_kinds(events)
    assert kinds == ["user", "request", "assistant", "call", "tool", "request", "assistant"]
    assert "stopped" not in [e.kind for e in events]
    assert store.read("SELECT number, status FROM turns WHERE session = ?", (sid,)) == [(1, "done")]
    assert len(srv.model_requests) == 2
    store.close()


def test_a_cell_that_outlives_the_lease_keeps_the_session_busy(loopback, home, workspace, tmp_path):
    srv, sid, first, go = waiting_turn(loopback, home, workspace, tmp_path)
    try:
        expires = lease_expiry(home, sid)
        wait_until(lambda: time.time() > expires + 0.2, "the lease taken before the cell to lapse")
        second = run_cli("ask", "two", home=home, cwd=workspace, env=SHORT_LEASE, timeout=TIMEOUT)
        renewed = lease_expiry(home, sid)
    finally:
        go.touch()  # the first turn's cell ends, whatever happened
    assert second.returncode == 1 and second.stdout == ""
    assert second.stderr.startswith("nodecode: session busy"), second.stderr
    assert renewed > expires  # renewed while the cell waited

    rc, out, err = finish(first)
    assert rc == 0, err
    assert out.endswith("done waiting\n")
    assert_one_whole_turn(home, sid, srv)


def test_a_lapsed_lease_of_a_live_process_is_not_taken(loopback, home, workspace, tmp_path):
    """A suspended nodecode (Ctrl-Z, a laptop asleep) renews nothing, yet its turn lives."""
    srv, sid, first, go = waiting_turn(loopback, home, workspace, tmp_path)
    os.kill(first.pid, signal.SIGSTOP)
    try:
        expires = lease_expiry(home, sid)
        wait_until(lambda: time.time() > expires + 0.2, "the suspended process's lease to lapse")
        second = run_cli("ask", "two", home=home, cwd=workspace, env=SHORT_LEASE, timeout=TIMEOUT)
    finally:
        os.kill(first.pid, signal.SIGCONT)
        go.touch()
    assert second.returncode == 1, second.stdout + second.stderr
    assert second.stderr.startswith("nodecode: session busy"), second.stderr

    rc, _, err = finish(first)
    assert rc == 0, err
    assert_one_whole_turn(home, sid, srv)


def test_a_save_landing_while_an_export_runs_is_taken_not_overwritten(
    loopback, home, workspace, monkeypatch
):
    # Issue "Trust, third round" 4: the export read context.txt, rendered, then
    # wrote over whatever the person had saved meanwhile, which no event recorded.
    srv = loopback([{"text": "Hello."}, {"text": "Again."}])
    write_config(home, srv)
    app = App.open(home, "default", workspace, environ={})
    sid = app.new_session()
    Agent(app, sid).ask("hi", TurnCallbacks())
    path = takes.export(app.workspace, sid)
    saved = path.read_text().replace("\nHello.\n", "\nHello.\n[[note]]\nsaved mid-export\n")
    render = takes.fileformat.render

    def render_then_save(*args, **kw):  # the person's :w lands while the export renders
        out = render(*args, **kw)
        path.write_text(saved)
        return out

    monkeypatch.setattr(takes.fileformat, "render", render_then_save)
    takes.export(app.workspace, sid)
    monkeypatch.undo()
    Agent(app, sid).ask("go on", TurnCallbacks())
    receipt = takes.receipt_file(app.workspace, sid).read_text()
    assert "taken at seq" in receipt and "noted 1" in receipt, receipt
    assert "saved mid-export" in json.dumps(srv.model_requests[-1].body)
    app.close()
