"""A lone UTF-16 surrogate from the provider (a JSON ``\\ud800`` escape with no
partner, as a gateway that cuts strings between UTF-16 units sends it) in reply
text, tool input or thinking: the turn completes, and the reply is kept, shown
and logged with U+FFFD in its place."""

from __future__ import annotations

import json

import pytest
from helpers import WIRES, run_cli, write_config
from nodecode.app import App

BAD = "\ufffd"
# The damaged call is not a round's first: Gemini signs the first call of a round,
# and a signed part whose text the client had to change is refused (so is an
# Anthropic thinking block: the thinking with one ends its turn here).
SCRIPT = [
    {
        "text": "Looking \ud800 now.",
        "calls": [{"code": "(list-files)"}, {"code": "(list-files) ;; \udc00 files"}],
    },
    {"thinking": ["weighing \udfff it"], "text": "Done \udbff."},
]


@pytest.mark.parametrize("ptype", WIRES)
def test_a_lone_surrogate_in_text_tool_input_and_thinking_keeps_the_reply(
    ptype, loopback, home, workspace
):
    srv = loopback(SCRIPT)
    # Anthropic's thinking setting on (the other formats' reasoning comes without one).
    models = [{"id": "loopback-model", "max_tokens": 4096, "thinking": {"type": "enabled",
               "budget_tokens": 1024}}] if ptype == "anthropic" else None  # fmt: skip
    write_config(home, srv, ptype, models=models)
    sid = run_cli("new", home=home).stdout.strip()

    out = run_cli("ask", "--show-thinking", "look around", home=home, cwd=workspace)

    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout == f"Looking {BAD} now.\nDone {BAD}.\n"
    assert f"(list-files) ;; {BAD} files" in out.stderr
    assert f"weighing {BAD} it" in out.stderr
    assert [r.status for r in srv.model_requests] == [200, 200]  # nothing sent back refused
    app = App.open(home, "default", workspace, environ={})
    try:
        events = {e.kind: e for e in app.store.events(sid)}  # the last of each kind
        replies = [e.text for e in app.store.events(sid) if e.kind == "assistant"]
        assert replies == [f"Looking {BAD} now.", f"Done {BAD}."]
        assert events["call"].payload["input"] == {"code": f"(list-files) ;; {BAD} files"}
        thoughts = [e.text for e in app.store.events(sid) if e.kind == "thinking"]
        assert f"weighing {BAD} it" in thoughts
        assert app.store.read("SELECT status FROM turns") == [("done",)]
    finally:
        app.close()
    # The tool input went back to the provider as logged, and encoded.
    second = json.dumps(srv.model_requests[1].body, ensure_ascii=False)
    assert f"(list-files) ;; {BAD} files" in second


@pytest.mark.parametrize("ptype", WIRES)
def test_a_lone_surrogate_in_an_error_body_is_one_line_and_logged(ptype, loopback, home, workspace):
    fault = {"at": 1, "kind": "400", "message": "bad \ud800 input"}
    write_config(home, loopback([{"text": "never sent"}], faults=[fault]), ptype)
    sid = run_cli("new", home=home).stdout.strip()

    out = run_cli("ask", "hello", home=home, cwd=workspace)

    assert out.returncode == 3 and "Traceback" not in out.stderr, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("nodecode: loopback: HTTP 400") and f"bad {BAD} input" in line
    app = App.open(home, "default", workspace, environ={})
    try:
        [error] = [e for e in app.store.events(sid) if e.kind == "error"]
        assert f"bad {BAD} input" in error.text
    finally:
        app.close()
