"""A rewritten call block is what the model reads (issue 11, item 1).

The file shows a call as its cell; rewriting that cell must change the call's
input on the wire (Anthropic ``tool_use.input``, OpenAI
``tool_calls[].function.arguments``) at the next request and every request
after it, and the fill must count the new code.
"""

from __future__ import annotations

import json

import pytest
from helpers import write_config
from nodecode import budget as budgets
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.context import derived
from nodecode.context import take as takes
from nodecode.context.derived import build
from nodecode.providers import registry
from validator import check

OLD = '(shell "echo hi")'
NEW = '(shell "echo HACKED")'


@pytest.fixture(params=["anthropic", "openai"])
def session(request, loopback, tmp_path):
    ptype = request.param
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = loopback([], cache_min_tokens=1)
    home = write_config(tmp_path / "home", srv, ptype=ptype, auto_approve=True)
    app = App.open(home, "default", ws, environ={})
    sid = app.new_session("t")
    srv.add_rounds([{"text": "Running.", "calls": [{"code": OLD}]}, {"text": "it said hi"}])
    Agent(app, sid).ask("run it", TurnCallbacks())
    yield ptype, app, srv, sid
    app.close()


def call_inputs(ptype: str, body: dict) -> list[dict]:
    """Every tool call's input in a request body, as the provider reads it."""
    if ptype == "anthropic":
        return [
            b["input"]
            for m in body["messages"]
            for b in m["content"]
            if b.get("type") == "tool_use"
        ]
    return [
        json.loads(c["function"]["arguments"])
        for m in body["messages"]
        for c in m.get("tool_calls") or []
    ]


def rewrite_call(app: App, sid: str) -> None:
    path = takes.export(app.workspace, sid)
    text = path.read_text()
    assert text.count(OLD) == 1
    path.write_text(text.replace(OLD, NEW))


def test_a_rewritten_call_is_sent_with_the_new_code_at_every_request_after(session):
    ptype, app, srv, sid = session
    rewrite_call(app, sid)
    srv.add_rounds([{"text": "ok"}, {"text": "ok again"}])
    Agent(app, sid).ask("go on", TurnCallbacks())
    receipt = takes.receipt_file(app.workspace, sid).read_text()
    assert "rewrote 1 (" in receipt
    taken = srv.model_requests[-1].body
    check(ptype, taken)
    assert call_inputs(ptype, taken) == [{"code": NEW}]
    Agent(app, sid).ask("and again", TurnCallbacks())  # rebuilt from the snapshot
    later = srv.model_requests[-1].body
    check(ptype, later)
    assert call_inputs(ptype, later) == [{"code": NEW}]
    assert NEW in takes.export(app.workspace, sid).read_text()


def test_the_fill_counts_the_rewritten_call(session):
    ptype, app, srv, sid = session
    rewrite_call(app, sid)
    srv.add_rounds([{"text": "ok"}, {"text": "ok again"}])
    Agent(app, sid).ask("go on", TurnCallbacks())
    meter = budgets.Meter(app.config, registry.wire(ptype), derived.read(app.store, sid).views)
    call = next(m for m in build(app.store, sid) if m.role == "call")
    counted = meter.message(call, cached=False)
    wanted = meter.message(call.__class__(call.id, "user", f"eval {json.dumps({'code': NEW})}"))
    assert counted == wanted


def test_a_rewritten_call_of_another_tool_is_sent_as_its_text_reads(loopback, tmp_path):
    """A call of another tool is shown as ``(NAME JSON)``: a rewrite in that form
    keeps the tool and takes the new input; any other text is sent as a cell."""
    for ptype in ("anthropic", "openai"):
        ws = tmp_path / ptype
        ws.mkdir()
        srv = loopback([], cache_min_tokens=1)
        app = App.open(write_config(ws / "home", srv, ptype=ptype), "default", ws, environ={})
        sid = app.new_session("t")
        odd = {"name": "read_file", "input": {"path": "a.txt"}}
        srv.add_rounds([{"text": "Reading.", "calls": [odd, odd]}, {"text": "no such tool"}])
        Agent(app, sid).ask("read", TurnCallbacks())
        path = takes.export(app.workspace, sid)
        text = path.read_text()
        old = '(read_file {"path": "a.txt"})'
        assert text.count(old) == 2
        text = text.replace(old, '(read_file {"path": "b.txt"})', 1)
        path.write_text(text.replace(old, '(read-file "c.txt")', 1))
        srv.add_rounds([{"text": "ok"}])
        Agent(app, sid).ask("go on", TurnCallbacks())
        body = srv.model_requests[-1].body
        check(ptype, body)
        assert call_inputs(ptype, body) == [{"path": "b.txt"}, {"code": '(read-file "c.txt")'}]
        names = (
            [b["name"] for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
            if ptype == "anthropic"
            else [
                c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []
            ]
        )
        assert names == ["read_file", "eval"]
        app.close()
