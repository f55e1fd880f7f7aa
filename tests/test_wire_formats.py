"""The OpenAI Responses and Gemini formats through the real CLI against the
loopback server speaking them: a tool call and its result, reasoning items and
thought signatures sent back unmodified across turns (and the loopback refusing
one altered or dropped, with the API's own error), cached tokens in `status`,
and overflow → ceiling → evict → retry."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from helpers import run_cli, write_config
from nodecode.log.store import open_store

NEW_WIRES = ["openai-responses", "google"]
THOUGHTFUL = [
    {
        "text": "Let me read it.",
        "thinking": ["The person wants a.txt; read it first."],
        "calls": [{"code": ';; read the greeting\n(read-file "a.txt")'}],
    },
    {"text": "The file says hello.", "thinking": ["It says hello."]},
    {"text": "Still hello.", "thinking": ["Nothing changed."]},
]


def ask(home, ws, text: str):
    done = run_cli("ask", "--yes", "--show-thinking", text, home=home, cwd=ws)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def turn(loopback, home, workspace):
    """Two asks through the CLI, the first with a tool call: (server, first ask, session)."""

    def run(ptype: str, **server):
        (workspace / "a.txt").write_text("hello from a.txt\n")
        srv = loopback(THOUGHTFUL, **server)
        write_config(home, srv, ptype)
        sid = run_cli("new", home=home).stdout.strip()
        first = ask(home, workspace, "what does a.txt say?")
        ask(home, workspace, "and now?")
        return srv, first, sid

    return run


def results(ptype: str, body: dict) -> list[str]:
    if ptype == "google":
        return [
            p["functionResponse"]["response"]["output"]
            for c in body["contents"]
            for p in c["parts"]
            if "functionResponse" in p
        ]
    return [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]


def sealed(ptype: str, body: dict) -> list[dict]:
    """What a request carries back of earlier replies' thinking, exactly."""
    if ptype == "google":
        return [p for c in body["contents"] for p in c["parts"] if "thoughtSignature" in p]
    return [i for i in body["input"] if i.get("type") == "reasoning"]


@pytest.mark.parametrize("ptype", NEW_WIRES)
def test_a_tool_call_runs_and_its_result_goes_back_with_its_seq(ptype, turn, home):
    srv, first, _ = turn(ptype)
    assert "Let me read it." in first.stdout and "The file says hello." in first.stdout
    assert "(read-file" in first.stderr
    assert [r.status for r in srv.model_requests] == [200, 200, 200]
    (result,) = results(ptype, srv.model_requests[1].body)
    assert result.startswith("hello from a.txt") and re.search(r"\[seq \d+\]$", result)
    if ptype == "openai-responses":
        items = srv.model_requests[1].body["input"]
        call = next(i for i in items if i.get("type") == "function_call")
        output = next(i for i in items if i.get("type") == "function_call_output")
        assert call["call_id"] == output["call_id"] and call["call_id"].startswith("call_nc")


@pytest.mark.parametrize("ptype", NEW_WIRES)
def test_thinking_is_shown_logged_and_sent_back_unmodified_in_every_later_request(
    ptype, turn, home
):
    srv, first, sid = turn(ptype)
    assert "── thinking\nThe person wants a.txt; read it first." in first.stderr
    second, third = (r.body for r in srv.model_requests[1:])
    carried = sealed(ptype, second)
    assert carried and carried == sealed(ptype, third)[: len(carried)]
    store = open_store(home, "default")
    logged = [e.payload["block"] for e in store.events(sid) if e.kind == "thinking"]
    store.close()
    # every block the log keeps for the first two replies goes back as it was logged
    if ptype == "google":
        parts = [p for c in third["contents"] for p in c["parts"]]
        signed = [p["thoughtSignature"] for p in parts if "thoughtSignature" in p]
        for block in logged[:-2]:  # the last reply's thought and signed part came after
            assert block["thoughtSignature"] in signed if "on" in block else block in parts
    else:
        assert logged[:-1] == sealed(ptype, third)


def _replay(srv, body: dict, ptype: str) -> httpx.Response:
    path = srv.model_requests[-1].path
    return httpx.post(srv.url + path, json=body, timeout=10)


@pytest.mark.parametrize("ptype", NEW_WIRES)
def test_the_loopback_refuses_altered_thinking_with_the_apis_error(ptype, turn):
    srv, _, _ = turn(ptype)
    body = json.loads(json.dumps(srv.model_requests[1].body))
    item = sealed(ptype, body)[0]
    if ptype == "google":
        item["thoughtSignature"] = item["thoughtSignature"][:-4] + "AAAA"
    else:
        item["encrypted_content"] = item["encrypted_content"][:-4] + "AAAA"
    answer = _replay(srv, body, ptype)
    assert answer.status_code == 400
    error = answer.json()["error"]
    if ptype == "google":
        assert error == {"code": 400, "message": "Corrupted thought signature.",
                         "status": "INVALID_ARGUMENT"}  # fmt: skip
    else:
        assert error["code"] == "invalid_encrypted_content"
        assert re.fullmatch(r"The encrypted content gAAA\.\.\.AAAA could not be verified\.",
                            error["message"])  # fmt: skip


@pytest.mark.parametrize("ptype", NEW_WIRES)
def test_the_loopback_refuses_dropped_thinking_with_the_apis_error(
    ptype, loopback, home, workspace
):
    (workspace / "a.txt").write_text("hello\n")
    srv = loopback(THOUGHTFUL[:2])
    write_config(home, srv, ptype)
    run_cli("new", home=home)
    ask(home, workspace, "what does a.txt say?")
    body = json.loads(json.dumps(srv.model_requests[1].body))
    srv.add_rounds([THOUGHTFUL[1]])
    if ptype == "google":
        for content in body["contents"]:
            for part in content["parts"]:
                part.pop("thoughtSignature", None)
    else:
        # the last reply's reasoning is owed again by a request answering its calls
        srv.reasoning.answered(sealed(ptype, body), True)
        body["input"] = [i for i in body["input"] if i.get("type") != "reasoning"]
    answer = _replay(srv, body, ptype)
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    if ptype == "google":
        assert message.startswith("Function call is missing a thought_signature in functionCall")
        assert "function call `default_api:eval` , position 2." in message
    else:
        assert re.fullmatch(
            r"Item 'call_nc\d+' of type 'function_call' was provided without its required "
            r"'reasoning' item: 'rs_lb1'\.",
            message,
        )


@pytest.mark.parametrize("ptype", NEW_WIRES)
def test_status_shows_the_cached_part_of_the_last_prompt(ptype, turn, home, workspace):
    srv, _, _ = turn(ptype, cache_min_tokens=1)
    last = srv.model_requests[-1].usage
    assert 0 < last["cache_read"] < last["input"]
    shown = run_cli("status", home=home, cwd=workspace)
    assert shown.returncode == 0, shown.stderr
    assert f"read {last['cache_read']} of {last['input']} prompt tokens from cache" in shown.stdout


LONG = " ".join(f"word{i}" for i in range(120))


@pytest.mark.parametrize("ptype", NEW_WIRES)
def test_an_overflow_sets_a_ceiling_evicts_and_retries_once(ptype, loopback, home, workspace):
    srv = loopback([], cache_min_tokens=1, window=1500)
    write_config(home, srv, ptype)
    run_cli("new", home=home)
    n = 0
    while not any(r.status == 400 for r in srv.model_requests):
        n += 1
        assert n < 12, [r.status for r in srv.model_requests]
        ask(home, workspace, f"ask {n}: {LONG}")
    statuses = [r.status for r in srv.model_requests]
    at = statuses.index(400)
    assert statuses[at + 1 :] == [200]  # evicted, retried once, accepted
    retry = json.dumps(srv.model_requests[at + 1].body)
    assert "[history evicted: seq 1" in retry
    store = open_store(home, "default")
    ceiling = int(store.get_meta("ceiling:loopback:loopback-model"))
    store.close()
    if ptype == "google":  # Gemini names the maximum; the Responses API names none
        assert ceiling == 1500
    else:
        assert ceiling < 1500 + 100
    ask(home, workspace, "one more")
    assert [r.status for r in srv.model_requests].count(400) == 1
