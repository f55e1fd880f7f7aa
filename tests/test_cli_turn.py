"""A whole turn through the real CLI against the loopback server."""

from __future__ import annotations

import re

import pytest
from helpers import run_cli, write_config
from nodecode.context.sent import sent_of
from nodecode.log.store import open_store

TWO_ROUNDS = [
    {"text": "Let me read it.", "calls": [{"code": ';; read the greeting\n(read-file "a.txt")'}]},
    {"text": "The file says hello."},
]


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_two_round_turn_sends_the_result_with_its_seq(ptype, loopback, home, workspace):
    (workspace / "a.txt").write_text("hello from a.txt\n")
    srv = loopback(TWO_ROUNDS)
    write_config(home, srv, ptype)
    sid = run_cli("new", home=home).stdout.strip()
    done = run_cli("ask", "--yes", "what does a.txt say?", home=home, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert "Let me read it." in done.stdout and "The file says hello." in done.stdout
    assert "(read-file" in done.stderr  # calls and results go to stderr

    assert len(srv.requests) == 2
    second = srv.requests[1].body["messages"]
    if ptype == "anthropic":
        result = second[-1]["content"][0]
        assert result["type"] == "tool_result" and result["tool_use_id"].startswith("toolu_nc")
        text = result["content"]
    else:
        tool = [m for m in second if m["role"] == "tool"][0]
        assert tool["tool_call_id"].startswith("call_nc")
        text = tool["content"]
    assert text.startswith("hello from a.txt")
    seq = int(re.search(r"\[seq (\d+)\]$", text).group(1))

    store = open_store(home, "default")
    events = store.events(sid)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.kind for e in events] == [
        "user",
        "request",
        "assistant",
        "call",
        "tool",
        "request",
        "assistant",
    ]
    assert events[4].seq == seq and events[4].text == text
    assert events[1].payload["usage"]["input"] > 0
    # The second request records only what it added to the first: ask 1, then 3 4 5.
    assert events[5].payload["sent"]["after"] == 2 and events[5].payload["sent"]["keep"] == 1
    assert [p[0] for p in sent_of(store, sid, events[5].seq)] == [1, 3, 4, 5]
    store.close()


def test_new_prints_only_the_id_and_sessions_lists_it(home, loopback):
    srv = loopback([])
    write_config(home, srv)
    made = run_cli("new", "--title", "first", home=home)
    sid = made.stdout.strip()
    assert made.returncode == 0 and made.stdout.count("\n") == 1 and sid.startswith("s-")
    listed = run_cli("sessions", home=home)
    assert sid in listed.stdout and "first" in listed.stdout


def test_eval_runs_a_cell_and_logs_it_but_not_as_a_message(home, workspace, loopback):
    srv = loopback([])
    write_config(home, srv)
    (workspace / "b.txt").write_text("bee\n")
    sid = run_cli("new", home=home).stdout.strip()
    out = run_cli("eval", '(read-file "b.txt")', home=home, cwd=workspace)
    assert out.returncode == 0 and "bee" in out.stdout
    store = open_store(home, "default")
    [event] = store.events(sid)
    assert event.kind == "cell" and event.role is None
    store.close()


def test_provider_failure_exits_3_with_one_line(home, workspace, loopback):
    srv = loopback([{"text": "never"}], faults=[{"at": i, "kind": "500"} for i in range(1, 10)])
    write_config(home, srv, max_retries=2, retry_backoff=0.01)
    sid = run_cli("new", home=home).stdout.strip()
    out = run_cli("ask", "hi", home=home, cwd=workspace)
    assert out.returncode == 3
    lines = out.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("nodecode:")] == [lines[-1]]
    assert "HTTP 500" in lines[-1] and len(srv.requests) == 3  # first try + 2 retries
    store = open_store(home, "default")
    assert [e.kind for e in store.events(sid)] == ["user", "error"]  # nothing duplicated
    store.close()


def test_no_provider_is_a_user_error(home, workspace):
    run_cli("new", home=home)
    out = run_cli(
        "ask", "hi", home=home, cwd=workspace, env={"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}
    )
    assert out.returncode == 1 and "no provider configured" in out.stderr


def test_usage_error_exits_2(home):
    assert run_cli("frobnicate", home=home).returncode == 2


def test_each_rounds_reply_ends_its_own_line_on_stdout(loopback, home, workspace):
    (workspace / "a.txt").write_text("hello from a.txt\n")
    srv = loopback(TWO_ROUNDS)
    write_config(home, srv)
    run_cli("new", home=home)
    done = run_cli("ask", "--yes", "what does a.txt say?", home=home, cwd=workspace)
    assert done.stdout == "Let me read it.\nThe file says hello.\n"
