"""Provider faults at the agent level (issue 7.4), against the loopback server.

Each fault is retried (and the log holds exactly one assistant event for the
round) or, when it persists, fails with one clear line (CLI exit 3). The
person can stop at any moment, a retry's backoff and a stalled stream included.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import WIRES, run_cli, write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.loopback import LoopbackServer

REPLY = "The answer, " + " ".join(f"w{i}" for i in range(60)) + "."
QUICK = {"max_retries": 2, "retry_backoff": 0.01, "timeout": 0.5}
RETRYABLE = [
    {"kind": "429", "retry_after": 0},
    {"kind": "529"},
    {"kind": "500"},
    {"kind": "503"},
    {"kind": "drop"},
    {"kind": "stall", "seconds": 30},
    {"kind": "sse_error"},
    {"kind": "garbage"},
]


def fault_id(fault: dict) -> str:
    return fault["kind"]


class Seen(TurnCallbacks):
    def __init__(self) -> None:
        self.text = ""
        self.retries: list[str] = []

    def on_text(self, chunk: str) -> None:
        self.text += chunk

    def on_retry(self, message: str) -> None:
        self.retries.append(message)


@pytest.fixture
def make_app(loopback, tmp_path):
    apps = []

    def make(script, ptype="anthropic", faults=(), **config):
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        srv = loopback(script, faults=list(faults))
        home = write_config(tmp_path / "home", srv, ptype, **{**QUICK, **config})
        app = App.open(home, "default", ws, environ={})
        apps.append(app)
        return app, srv, app.new_session()

    yield make
    for app in apps:
        app.close()


TURN_KINDS = {"user", "request", "assistant", "call", "tool", "stopped", "error", "notice"}


def kinds(app: App, sid: str) -> list[str]:
    """The kinds a turn logs (other features may log events of their own beside them)."""
    return [e.kind for e in app.store.events(sid) if e.kind in TURN_KINDS]


@pytest.mark.parametrize("ptype", WIRES)
@pytest.mark.parametrize("fault", RETRYABLE, ids=fault_id)
def test_a_transient_fault_is_retried_and_the_round_is_logged_once(make_app, ptype, fault):
    app, srv, sid = make_app([{"text": REPLY}], ptype, faults=[{"at": 1, **fault}])
    seen = Seen()
    started = time.monotonic()
    result = Agent(app, sid).ask("question", seen)
    assert result.status == "done" and result.text == REPLY
    assert time.monotonic() - started < 15  # a stall is cut by the read timeout, not waited out
    assert kinds(app, sid) == ["user", "request", "assistant"]
    [reply] = [e for e in app.store.events(sid) if e.kind == "assistant"]
    assert reply.text == REPLY  # no partial text from the failed attempt
    [request] = [e for e in app.store.events(sid) if e.kind == "request"]
    assert request.payload["retries"] == 1 and len(srv.model_requests) == 2
    assert len(seen.retries) == 1 and seen.retries[0].startswith("retrying in")


def test_retry_after_is_honoured(make_app):
    app, srv, sid = make_app([{"text": REPLY}], faults=[{"at": 1, "kind": "429", "retry_after": 1}])
    seen = Seen()
    started = time.monotonic()
    assert Agent(app, sid).ask("question", seen).status == "done"
    assert time.monotonic() - started >= 0.9
    assert seen.retries[0].startswith("retrying in 1.0 s") and "429" in seen.retries[0]
    assert len(srv.model_requests) == 2
    assert kinds(app, sid) == ["user", "request", "assistant"]


def test_a_fault_on_a_later_round_keeps_the_earlier_rounds_once(make_app):
    app, srv, sid = make_app(
        [{"text": "Listing.", "calls": [{"code": "(list-files)"}]}, {"text": REPLY}],
        faults=[{"at": 2, "kind": "drop"}, {"at": 3, "kind": "529"}],
    )
    assert Agent(app, sid).ask("list", Seen()).status == "done"
    assert kinds(app, sid) == [
        "user",
        "request",
        "assistant",
        "call",
        "tool",
        "request",
        "assistant",
    ]
    assert app.store.events(sid)[-1].text == REPLY
    assert len(srv.model_requests) == 4


PERSISTENT = [
    *(f for f in RETRYABLE if f["kind"] != "500"),
    {"kind": "400"},
]  # not retryable: fails at once


@pytest.mark.parametrize("fault", PERSISTENT, ids=fault_id)
def test_a_persistent_fault_fails_the_cli_with_one_line_and_exit_3(
    loopback, home, workspace, fault
):
    retryable = fault["kind"] != "400"
    srv = loopback([{"text": REPLY}], faults=[{"at": i, **fault} for i in range(1, 6)])
    write_config(home, srv, **{**QUICK, "max_retries": 1, "timeout": 0.3})
    sid = run_cli("new", home=home).stdout.strip()
    out = run_cli("ask", "question", home=home, cwd=workspace)
    assert out.returncode == 3, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[-1].startswith("nodecode: ") and len(lines[-1]) < 600
    assert [line for line in lines if line.startswith("nodecode:")] == [lines[-1]]
    assert "Traceback" not in out.stderr
    if retryable:
        assert "still failing after 1 retries" in lines[-1]
    assert len(srv.model_requests) == (2 if retryable else 1)
    app = App.open(home, "default", workspace, environ={})
    assert kinds(app, sid) == ["user", "error"]  # nothing partial, nothing twice
    assert app.store.read("SELECT status FROM turns") == [("failed",)]
    app.close()


def test_a_stop_during_a_retry_backoff_returns_promptly(make_app):
    app, srv, sid = make_app(
        [{"text": REPLY}], faults=[{"at": 1, "kind": "429", "retry_after": 30}]
    )
    cancel = threading.Event()

    class StopWhileWaiting(Seen):
        def on_retry(self, message: str) -> None:
            super().on_retry(message)
            threading.Timer(0.2, cancel.set).start()

    started = time.monotonic()
    result = Agent(app, sid).ask("question", StopWhileWaiting(), cancel)
    assert result.status == "stopped"
    assert time.monotonic() - started < 10  # not the 30 s the server asked for
    assert kinds(app, sid)[0] == "user" and kinds(app, sid)[-1] == "stopped"
    assert "assistant" not in kinds(app, sid) and len(srv.model_requests) == 1
    assert app.store.read("SELECT status FROM turns") == [("stopped",)]


def test_a_stop_during_a_stalled_stream_keeps_the_partial_reply(make_app):
    app, srv, sid = make_app(
        [{"text": REPLY}], faults=[{"at": 1, "kind": "stall", "seconds": 30}], timeout=60
    )
    cancel = threading.Event()

    class StopInTheStall(Seen):
        def on_text(self, chunk: str) -> None:
            if not self.text:
                threading.Timer(0.3, cancel.set).start()
            super().on_text(chunk)

    started = time.monotonic()
    result = Agent(app, sid).ask("question", StopInTheStall(), cancel)
    assert result.status == "stopped" and time.monotonic() - started < 10
    [partial] = [e for e in app.store.events(sid) if e.kind == "assistant"]
    assert REPLY.startswith(partial.text) and partial.text != REPLY
    assert kinds(app, sid)[-1] == "stopped" and len(srv.model_requests) == 1  # no retry


def test_sigint_during_a_retry_backoff_stops_the_cli_at_once(loopback, home, workspace):
    srv = loopback([{"text": REPLY}], faults=[{"at": 1, "kind": "529", "retry_after": 30}])
    write_config(home, srv, **QUICK)
    run_cli("new", home=home)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nodecode",
            "--home",
            str(home),
            "--cwd",
            str(workspace),
            "ask",
            "question",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert "retrying in 30.0 s" in line, line
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130 and time.monotonic() - sent < 10
    assert err.strip().splitlines()[-1] == "nodecode: stopped"


# -- what the person sees of a dropped attempt (issue 11, item 11; trust, item 17) --

DROPPED = "── (dropped: the attempt above was discarded)"  # on a terminal, after the text
NOT_PRINTED = "── (dropped: the failed attempt's text, not printed)"  # stderr, elsewhere


def dropped_once(loopback, tmp_path, ptype: str) -> tuple[Path, Path, str, LoopbackServer]:
    """A home whose first model request drops mid-stream: (home, workspace, session, server)."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    srv = loopback([{"text": REPLY}], faults=[{"at": 1, "kind": "drop"}])
    write_config(home, srv, ptype, **QUICK)
    return home, ws, run_cli("new", home=home).stdout.strip(), srv


def logged_replies(home: Path, ws: Path, sid: str) -> list[str]:
    app = App.open(home, "default", ws, environ={})
    try:
        return [e.text for e in app.store.events(sid) if e.kind == "assistant"]
    finally:
        app.close()


def ask_after_a_drop(loopback, tmp_path, ptype: str, *, merged: bool):
    """`nodecode ask` into pipes, its first attempt dropped: (stdout, stderr, logged reply)."""
    home, ws, sid, srv = dropped_once(loopback, tmp_path, ptype)
    proc = subprocess.run(
        [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(ws), "ask", "q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert len(srv.model_requests) == 2
    [reply] = logged_replies(home, ws, sid)
    return proc.stdout, proc.stderr, reply


@pytest.mark.parametrize("ptype", WIRES)
def test_a_dropped_attempt_leaves_stdout_holding_exactly_the_logged_reply(
    loopback, tmp_path, ptype
):
    out, err, logged = ask_after_a_drop(loopback, tmp_path, ptype, merged=False)
    assert logged == REPLY  # the second attempt only
    assert out == logged + "\n"  # nothing of the dropped attempt before it
    lines = err.splitlines()
    assert lines[0].startswith("── retrying in ") and "connection dropped" in lines[0]
    assert lines[1:] == [NOT_PRINTED]


@pytest.mark.parametrize("ptype", WIRES)
def test_the_retry_line_stands_before_the_reply_in_one_stream(loopback, tmp_path, ptype):
    both, _, logged = ask_after_a_drop(loopback, tmp_path, ptype, merged=True)
    lines = both.splitlines()
    assert len(lines) == 3, both
    assert lines[0].startswith("── retrying in ") and lines[1] == NOT_PRINTED
    assert lines[2] == logged == REPLY


def on_a_terminal(args: list[str], stderr: Path | None = None) -> str:
    """Run the CLI with stdout (and stderr, unless a file is given) on a
    pseudo-terminal; what the terminal showed."""
    main, side = pty.openpty()
    with open(stderr or os.devnull, "w") as err:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=side, stderr=err if stderr else side
        )
    os.close(side)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the last holder of the terminal closed it
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    assert proc.wait(timeout=60) == 0, shown
    return shown.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("ptype", WIRES)
@pytest.mark.parametrize("stderr", ["terminal", "file"])
def test_on_a_terminal_the_dropped_text_is_marked_where_it_stands(
    loopback, tmp_path, ptype, stderr
):
    home, ws, sid, srv = dropped_once(loopback, tmp_path, ptype)
    err = tmp_path / "stderr.txt" if stderr == "file" else None

    shown = on_a_terminal(
        [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(ws), "ask", "q"],
        err,
    )

    lines = shown.splitlines()
    if err is not None:  # the retry line went to the file; the mark stays with the text
        assert err.read_text().startswith("── retrying in ")
    else:
        assert lines.pop(1).startswith("── retrying in ")
    assert len(lines) == 3, shown
    assert REPLY.startswith(lines[0]) and 0 < len(lines[0]) < len(REPLY)  # the dropped text
    assert lines[1] == DROPPED  # right under the text it marks
    assert lines[2] == REPLY and logged_replies(home, ws, sid) == [REPLY]


def test_a_stop_while_waiting_to_retry_a_dropped_attempt_keeps_none_of_its_text(make_app):
    """The person was told the attempt was discarded: the log must not keep it."""
    app, srv, sid = make_app(
        [{"text": REPLY}],
        faults=[{"at": 1, "kind": "drop"}],
        retry_backoff=30,
    )
    cancel = threading.Event()

    class StopWhileWaiting(Seen):
        def on_retry(self, message: str) -> None:
            super().on_retry(message)
            cancel.set()

    seen = StopWhileWaiting()
    result = Agent(app, sid).ask("question", seen, cancel)
    assert result.status == "stopped" and seen.text and seen.retries
    assert "assistant" not in kinds(app, sid) and kinds(app, sid)[-1] == "stopped"


ENDLESS = [
    # Issue "Trust, third round" 12: pings (or a drip of one character a second)
    # kept the read timeout from firing, forever: only Ctrl-C ended the turn.
    ({"kind": "ping", "every": 0.1}, {"idle_timeout": 1}, "idle_timeout (1 s)"),
    ({"kind": "drip", "every": 0.1}, {"request_timeout": 2}, "request_timeout (2 s)"),
]


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
@pytest.mark.parametrize(("fault", "limit", "named"), ENDLESS, ids=["ping", "drip"])
def test_a_stream_that_never_ends_fails_at_its_time_limit_with_one_line(
    loopback, home, workspace, ptype, fault, limit, named
):
    srv = loopback([{"text": REPLY}], faults=[{"at": i, **fault} for i in range(1, 6)])
    write_config(home, srv, ptype, **{**QUICK, "max_retries": 1, "timeout": 5, **limit})
    sid = run_cli("new", home=home).stdout.strip()
    # Generous: "ends on its own", not a timing (it never ended before).
    out = run_cli("ask", "question", home=home, cwd=workspace, timeout=60)
    assert out.returncode == 3, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("nodecode: loopback: ") and named in last, last
    assert "Traceback" not in out.stderr
    app = App.open(home, "default", workspace, environ={})
    assert kinds(app, sid)[-1] == "error"
    assert app.store.read("SELECT status FROM turns") == [("failed",)]
    app.close()
