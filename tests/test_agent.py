"""The agent loop end to end, in process, against the loopback server."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest
from helpers import wait_for_request, write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.errors import SessionBusy
from nodecode.log.leases import Lease


@pytest.fixture
def make_app(loopback, tmp_path):
    apps = []

    def make(script, ptype="anthropic", environ=None, **config):
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        srv = loopback(script, **config.pop("server", {}))
        home = write_config(tmp_path / "home", srv, ptype, **config)
        app = App.open(home, "default", ws, environ=environ or {})
        apps.append(app)
        return app, srv, app.new_session()

    yield make
    for app in apps:
        app.close()


class StopAfterFirstText(TurnCallbacks):
    def __init__(self, cancel):
        self.cancel = cancel
        self.text = ""

    def on_text(self, chunk):
        self.text += chunk
        self.cancel.set()


def kinds(app, sid):
    return [e.kind for e in app.store.events(sid)]


def test_stop_keeps_the_partial_reply_and_appends_a_stopped_event(make_app):
    words = " ".join(f"word{i}" for i in range(40))
    app, srv, sid = make_app([{"text": words}], server={"chunk_delay": 0.05})
    cancel = threading.Event()
    cb = StopAfterFirstText(cancel)
    result = Agent(app, sid).ask("talk", cb, cancel)
    assert result.status == "stopped"
    events = app.store.events(sid)
    assert kinds(app, sid)[-1] == "stopped"
    partial = [e for e in events if e.kind == "assistant"]
    assert partial and words.startswith(partial[0].text) and partial[0].text != words


def test_stop_between_calls_leaves_the_rest_without_results_but_requests_stay_valid(make_app):
    cancel = threading.Event()

    class StopAtFirstResult(TurnCallbacks):
        def on_result(self, seq, text, error):
            cancel.set()

    app, srv, sid = make_app(
        [
            {"calls": [{"code": "(list-files)"}, {"code": "(list-files)"}]},
            {"text": "next turn reply"},
        ]
    )
    assert Agent(app, sid).ask("two calls", StopAtFirstResult(), cancel).status == "stopped"
    Agent(app, sid).ask("again", TurnCallbacks())
    body = srv.model_requests[-1].body["messages"]
    results = [b for m in body for b in m["content"] if b["type"] == "tool_result"]
    assert len(results) == 2 and "stopped before this call ran" in results[1]["content"]


def test_a_second_ask_on_a_busy_session_fails_with_session_busy(make_app):
    app, srv, sid = make_app([{"text": "hi"}])
    other = App.open(app.home, "default", app.cwd, environ={})
    with Lease(other.store, sid), pytest.raises(SessionBusy, match="session busy"):
        Agent(app, sid).ask("hi")
    other.close()
    assert Agent(app, sid).ask("hi").status == "done"


def test_calls_to_another_tool_and_malformed_cells_get_error_results(make_app):
    app, srv, sid = make_app(
        [
            {
                "calls": [
                    {"name": "bash", "input": {"command": "ls"}},
                    {"code": '(read-file "a.txt"'},
                    {"code": "(frobnicate 1)"},
                    {"code": '(read-file "../../etc/passwd")'},
                ]
            },
            {"text": "ok"},
        ]
    )
    result = Agent(app, sid).ask("break things")
    assert result.status == "done"
    tools = [e for e in app.store.events(sid) if e.kind == "tool"]
    assert len(tools) == 4 and all(e.payload["error"] for e in tools)
    assert 'unknown tool "bash"' in tools[0].text
    assert "unbalanced" in tools[1].text or "expected" in tools[1].text
    assert 'unknown verb "frobnicate"' in tools[2].text
    assert "outside the workspace" in tools[3].text
    sent = srv.model_requests[-1].body["messages"][-1]["content"]
    assert [b["is_error"] for b in sent] == [True] * 4


def test_round_limit_stops_the_turn_with_a_notice(make_app):
    loop = [{"calls": [{"code": "(list-files)"}]}] * 3
    app, srv, sid = make_app(loop, max_rounds=2)
    result = Agent(app, sid).ask("loop")
    assert result.status == "round-limit" and len(srv.model_requests) == 2
    assert "max_rounds" in app.store.events(sid)[-1].text


def test_a_long_result_is_cut_in_the_context_but_kept_whole_in_the_log(make_app):
    app, srv, sid = make_app(
        [{"calls": [{"code": '(read-file "big.txt")'}]}, {"text": "ok"}], result_max_chars=100
    )
    (app.cwd / "big.txt").write_text("x" * 500)
    Agent(app, sid).ask("read big")
    tool = [e for e in app.store.events(sid) if e.kind == "tool"][0]
    assert tool.text.endswith(f"[seq {tool.seq}]") and f"(recall-entry {tool.seq})" in tool.text
    assert len(tool.text) < 300 and tool.payload["output"] == "x" * 500


def test_writes_need_approval_unless_auto_approved(make_app):
    app, srv, sid = make_app([{"calls": [{"code": '(write-file "w.txt" "hi")'}]}, {"text": "ok"}])
    Agent(app, sid).ask("write")  # default callbacks approve nothing
    assert not (app.cwd / "w.txt").exists()
    tool = [e for e in app.store.events(sid) if e.kind == "tool"][0]
    assert "not approved" in tool.text


def test_the_api_key_never_reaches_the_log(make_app):
    key = "sk-test-SECRET-0123456789abcdef"
    app, srv, sid = make_app(
        [
            {
                "calls": [
                    {
                        "code": '(shell "echo $ANTHROPIC_API_KEY; echo sk-test-SECRET-0123456789abcdef")'
                    }
                ]
            },
            {"text": "the key is sk-test-SECRET-0123456789abcdef"},
        ],
        environ={"ANTHROPIC_API_KEY": key},
        auto_approve=True,
    )
    Agent(app, sid).ask(f"my key is {key}")
    raw = app.store.path.read_bytes() + b"".join(
        p.read_bytes() for p in app.store.path.parent.glob("*-wal")
    )
    assert key.encode() not in raw
    assert "[redacted:ANTHROPIC_API_KEY]" in app.store.events(sid)[0].text


def test_cli_ask_stopped_by_sigint_exits_130(loopback, home, workspace):
    srv = loopback([{"text": " ".join(f"w{i}" for i in range(200))}], chunk_delay=0.05)
    write_config(home, srv)
    subprocess.run(
        [sys.executable, "-m", "nodecode", "--home", str(home), "new"],
        check=True,
        capture_output=True,
    )
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
            "talk",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_request(srv)  # streaming has begun
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "stopped" in err


def test_a_turn_killed_mid_stream_is_marked_stopped_on_the_next_open(loopback, home, workspace):
    srv = loopback([{"text": " ".join(f"w{i}" for i in range(400))}], chunk_delay=0.05)
    write_config(home, srv)
    sid = subprocess.run(
        [sys.executable, "-m", "nodecode", "--home", str(home), "new"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
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
            "talk",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    wait_for_request(srv)  # streaming has begun
    proc.kill()
    proc.wait()
    app = App.open(home, "default", workspace, environ={})
    events = app.store.events(sid)
    assert [e.kind for e in events] == ["user", "stopped"]
    assert app.store.read("PRAGMA integrity_check")[0][0] == "ok"
    assert app.store.read("SELECT status FROM turns")[0][0] == "stopped"
    app.close()
