"""Cells inside a real turn: a stop reaches a running cell, a huge read is logged capped.

The turn runs through the real CLI (a subprocess) or the real agent against the
loopback server; the assertions read what a person sees: the exit status,
stderr, the session log, the request the provider received.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import run_cli, write_config
from nodecode.cells.env import MAX_OUTPUT
from nodecode.log.store import open_store

# grep no longer hangs (ripgrep runs in linear time); a stop killing a running rg is
# in test_cells_files.py.
HANGING = {
    "shell": '(shell "sleep 600" :timeout 600)',
}


def ask(home: Path, workspace: Path, text: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace)]
        + ["ask", "--yes", text],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_line_with(proc: subprocess.Popen, marker: str, limit: float = 30.0) -> str:
    """Read the child's stderr up to the line holding ``marker``; a watchdog ends a stuck child."""
    watchdog = threading.Timer(limit, proc.kill)
    watchdog.start()
    try:
        while True:
            line = proc.stderr.readline()
            assert line, f"the child ended before printing {marker!r}"
            if marker in line:
                return line
    finally:
        watchdog.cancel()


@pytest.mark.parametrize("cell", HANGING.values(), ids=HANGING.keys())
def test_ctrl_c_stops_a_running_cell_and_the_turn(cell, loopback, home, workspace):
    srv = loopback([{"text": "Looking.", "calls": [{"code": cell}]}, {"text": "never sent"}])
    write_config(home, srv)
    sid = run_cli("new", home=home).stdout.strip()
    proc = ask(home, workspace, "find it")
    try:
        read_line_with(proc, "── call [seq")
        assert proc.stderr.readline().strip() == cell  # the cell is being evaluated now
        proc.send_signal(signal.SIGINT)
        # A generous bound: not a timing, only "does not hang" (the cell alone would
        # run for minutes).
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "nodecode: stopped"
    store = open_store(home, "default")
    events = store.events(sid)
    assert [e.kind for e in events][-3:] == ["call", "tool", "stopped"]
    assert "stopped by the person" in events[-2].text
    assert store.read("SELECT status FROM turns")[0][0] == "stopped"
    store.close()
    assert len(srv.model_requests) == 1  # nothing was sent after the stop


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_huge_read_is_logged_up_to_the_cap_and_the_agent_is_told(
    ptype, loopback, home, workspace
):
    line = b"x" * 99 + b"\n"
    (workspace / "big.txt").write_bytes(line * 200_000)  # 20 MB
    srv = loopback(
        [{"text": "Reading.", "calls": [{"code": '(read-file "big.txt")'}]}, {"text": "Done."}]
    )
    write_config(home, srv, ptype)
    sid = run_cli("new", home=home).stdout.strip()
    done = run_cli("ask", "--yes", "read it", home=home, cwd=workspace)
    assert done.returncode == 0, done.stderr

    shown = MAX_OUTPUT // len(line)
    header = (
        f";; cut at the 8 MiB cap of a result: lines 1–{shown} of a 20000000-byte file; "
        f'read on with (read-file "big.txt" :from {shown + 1})'
    )
    store = open_store(home, "default")
    [tool] = [e for e in store.events(sid) if e.kind == "tool"]
    logged = tool.payload["output"]
    assert logged.startswith(header + "\n") and len(logged.encode()) < MAX_OUTPUT + 1024
    store.close()
    # The store holds the capped read, not the 20 MB file.
    db = sum(p.stat().st_size for p in (home / "store").iterdir() if p.is_file())
    assert db < 20_000_000, db

    second = srv.model_requests[1].body["messages"]
    if ptype == "anthropic":
        result = second[-1]["content"][0]["content"]
    else:
        result = [m for m in second if m["role"] == "tool"][0]["content"]
    assert result.startswith(header + "\n")


def test_a_stop_during_a_cells_first_form_runs_none_of_the_rest(loopback, home, workspace):
    # Issue "Trust, third round" 1: the stop ended the running shell, then the
    # evaluator went on to the next form, writing and editing after the stop (and
    # 3,000 more commands took 40 s to run out).
    (workspace / "keep.txt").write_text("keep\n")
    rest = '(shell "echo ran >> ran.txt")' * 3000
    cell = (
        '(shell "touch started; sleep 3")(write-file "x.txt" "new")'
        '(edit-file "keep.txt" "keep" "changed")' + rest
    )
    srv = loopback([{"text": "Working.", "calls": [{"code": cell}]}, {"text": "never sent"}])
    write_config(home, srv)
    sid = run_cli("new", home=home).stdout.strip()
    log = workspace.parent / "stderr.txt"
    with open(log, "w") as err_file:  # the echoed cell is longer than a pipe holds
        proc = subprocess.Popen(
            [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace)]
            + ["ask", "--yes", "go"],
            stdout=subprocess.DEVNULL,
            stderr=err_file,
        )
    try:
        deadline = time.monotonic() + 30
        while not (workspace / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (workspace / "started").exists(), "the first form never ran"
        proc.send_signal(signal.SIGINT)
        # Generous: "does not run on", not a timing (3,000 commands took 40 s).
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    finally:
        running = proc.poll() is None
        proc.kill()
        proc.wait()
    assert not (workspace / "x.txt").exists()
    assert (workspace / "keep.txt").read_text() == "keep\n"
    assert not (workspace / "ran.txt").exists()
    assert not running, "the turn was still running its cell 10 s after the stop"
    assert proc.returncode == 130, log.read_text()
    store = open_store(home, "default")
    tool = [e for e in store.events(sid) if e.kind == "tool"][-1]
    store.close()
    assert "[stopped by the person]" in tool.text
    assert "3002 forms not run" in tool.text
