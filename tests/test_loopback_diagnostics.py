"""The loopback's Anthropic cache diagnostics (design.md §The cache): real HTTP
to a LoopbackServer, asserting the ``diagnostics`` object of the response
(``message_start``'s message when streamed, the message itself otherwise)."""

from __future__ import annotations

import json

import httpx
import pytest
from nodecode.loopback import LoopbackServer
from nodecode.loopback.diagnostics import BETA

HEADERS = {"anthropic-beta": BETA}
TOOL = {"name": "eval", "description": "run a cell", "input_schema": {"type": "object"}}


@pytest.fixture
def srv():
    with LoopbackServer([{"text": "ok"}] * 12, cache_min_tokens=1) as server:
        yield server


def body(previous=None, *, model="claude-test", system="be brief", asks=("one", "two"), **more):
    messages = []
    for i, ask in enumerate(asks):
        messages.append({"role": "user", "content": [{"type": "text", "text": ask * 40}]})
        if i < len(asks) - 1:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    return {
        "model": model,
        "max_tokens": 16,
        "stream": True,
        "system": [{"type": "text", "text": system}],
        "tools": [TOOL],
        "messages": messages,
        "diagnostics": {"previous_message_id": previous},
        **more,
    }


def send(srv: LoopbackServer, request: dict, headers=HEADERS) -> tuple[str, dict | None]:
    """(the response's id, its diagnostics) from the stream's message_start."""
    with httpx.stream("POST", srv.url + "/v1/messages", json=request, headers=headers) as r:
        assert r.status_code == 200, r.read()
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    start = events[0]["message"]
    return start["id"], start.get("diagnostics")


def tokens(srv: LoopbackServer, request: dict) -> int:
    kept = {k: v for k, v in request.items() if k not in ("stream", "diagnostics")}
    return httpx.post(srv.url + "/v1/messages/count_tokens", json=kept).json()["input_tokens"]


def test_the_first_request_opts_in_with_null_and_a_repeat_diverges_nowhere(srv):
    first, diag = send(srv, body())
    assert diag == {"cache_miss_reason": None}
    _, diag = send(srv, body(first, asks=("one", "two", "three")))
    assert diag == {"cache_miss_reason": None}  # an append is no divergence


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        ({"model": "claude-other"}, "model_changed"),
        ({"system": "be thorough"}, "system_changed"),
        ({"asks": ("one", "changed")}, "messages_changed"),
    ],
)
def test_each_change_is_named_with_the_tokens_from_the_divergence_on(srv, change, kind):
    before = body()
    first, _ = send(srv, before)
    _, diag = send(srv, body(first, **change))
    total = tokens(srv, before)
    if kind == "model_changed":
        missed = total
    elif kind == "system_changed":
        missed = total - tokens(srv, {**before, "system": [], "messages": []})
    else:  # the second ask's block differs: everything from it on
        missed = total - tokens(srv, {**before, "messages": before["messages"][:2]})
    assert diag == {"cache_miss_reason": {"type": kind, "cache_missed_input_tokens": missed}}


def test_changed_tools_are_named(srv):
    first, _ = send(srv, body())
    other = dict(TOOL, description="run a cell of forms")
    _, diag = send(srv, {**body(first), "tools": [other]})
    assert diag["cache_miss_reason"]["type"] == "tools_changed"


def test_a_changed_thinking_setting_is_unavailable(srv):
    first, _ = send(srv, body())
    _, diag = send(srv, body(first, thinking={"type": "enabled", "budget_tokens": 1024}))
    assert diag == {"cache_miss_reason": {"type": "unavailable"}}


def test_an_unknown_previous_id_is_not_found(srv):
    _, diag = send(srv, body("msg_never_sent"))
    assert diag == {"cache_miss_reason": {"type": "previous_message_not_found"}}


def test_a_request_without_the_beta_keeps_no_fingerprint_and_diagnostics_need_it(srv):
    plain = {k: v for k, v in body().items() if k != "diagnostics"}
    first, diag = send(srv, plain, headers={})
    assert diag is None
    _, diag = send(srv, body(first))
    assert diag == {"cache_miss_reason": {"type": "previous_message_not_found"}}
    r = httpx.post(srv.url + "/v1/messages", json=body())
    assert r.status_code == 400
    assert BETA in r.json()["error"]["message"]


def test_the_json_reply_carries_diagnostics_too(srv):
    first, _ = send(srv, body())
    request = {**body(first, model="claude-other"), "stream": False}
    reply = httpx.post(srv.url + "/v1/messages", json=request, headers=HEADERS).json()
    assert reply["diagnostics"]["cache_miss_reason"]["type"] == "model_changed"
