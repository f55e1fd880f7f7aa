"""The loopback server streams thinking and, as the APIs do, refuses a request
that alters or drops the thinking the previous round needs back.

The refusal texts are the providers' own (sources in doc/nodecode.txt,
``nodecode-thinking``)."""

from __future__ import annotations

import copy
import json

import httpx
import pytest
from nodecode.loopback import LoopbackServer
from nodecode.loopback.server import CANNOT_MODIFY, DEEPSEEK_NEEDS_REASONING, EXPECTED_THINKING

THINKING = {"type": "enabled", "budget_tokens": 1024}
CALL = {"code": '(read-file "a.txt")'}


@pytest.fixture
def srv():
    with LoopbackServer(
        [
            {"thinking": ["I should read a.txt first."], "text": "Reading.", "calls": [CALL]},
            {"text": "It says alpha."},
        ]
    ) as server:
        yield server


def post(server: LoopbackServer, body: dict, path: str = "/v1/messages") -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=10)


def first_round(server: LoopbackServer, **extra: object) -> dict:
    """The first round, not streamed: the assistant message as the API returned it."""
    body = {"model": "claude-test", "max_tokens": 4096, "thinking": THINKING, **extra}
    body["messages"] = [{"role": "user", "content": "read a"}]
    reply = post(server, body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def second_body(message: dict, content: list) -> dict:
    tool_use = next(b for b in message["content"] if b["type"] == "tool_use")
    return {
        "model": "claude-test",
        "max_tokens": 4096,
        "thinking": THINKING,
        "messages": [
            {"role": "user", "content": "read a"},
            {"role": "assistant", "content": content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_use["id"], "content": "alpha"}
                ],
            },
        ],
    }


def test_a_thinking_round_streams_the_thinking_block_with_its_signature_before_the_call(srv):
    body = {"model": "claude-test", "max_tokens": 4096, "stream": True, "thinking": THINKING}
    body["messages"] = [{"role": "user", "content": "read a"}]
    with httpx.stream("POST", srv.url + "/v1/messages", json=body, timeout=10) as r:
        datas = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    starts = [d["content_block"]["type"] for d in datas if d["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    deltas = [d["delta"] for d in datas if d["type"] == "content_block_delta" and d["index"] == 0]
    assert "".join(d.get("thinking", "") for d in deltas) == "I should read a.txt first."
    assert deltas[-1]["type"] == "signature_delta" and deltas[-1]["signature"]
    usage = next(d for d in datas if d["type"] == "message_delta")["usage"]
    assert usage["output_tokens_details"]["thinking_tokens"] > 0


def test_the_next_round_with_the_assistant_message_exactly_as_received_is_answered(srv):
    message = first_round(srv)
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]

    reply = post(srv, second_body(message, message["content"]))

    assert reply.status_code == 200, reply.text
    assert reply.json()["content"][0]["text"] == "It says alpha."


def test_an_altered_thinking_block_is_refused_with_the_apis_text_and_takes_no_round(srv):
    message = first_round(srv)
    content = copy.deepcopy(message["content"])
    content[0]["thinking"] += " (edited)"

    reply = post(srv, second_body(message, content))

    assert reply.status_code == 400
    assert reply.json()["error"] == {
        "type": "invalid_request_error",
        "message": "messages.1.content.0: " + CANNOT_MODIFY,
    }
    assert srv.rounds_left == 1


def test_a_dropped_thinking_block_is_refused_with_the_apis_text(srv):
    message = first_round(srv)

    reply = post(srv, second_body(message, message["content"][1:]))

    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == (
        "messages.1.content.0.type: " + EXPECTED_THINKING.format(found="text")
    )


def test_an_altered_redacted_thinking_block_is_refused():
    rounds = [{"thinking": [{"redacted": True}], "calls": [CALL]}, {"text": "done"}]
    with LoopbackServer(rounds) as srv:
        message = first_round(srv)
        assert message["content"][0]["type"] == "redacted_thinking"
        content = copy.deepcopy(message["content"])
        content[0]["data"] = content[0]["data"][:-4] + "AAAA"

        reply = post(srv, second_body(message, content))

        assert reply.status_code == 400
        assert reply.json()["error"]["message"] == "messages.1.content.0: " + CANNOT_MODIFY
        assert post(srv, second_body(message, message["content"])).status_code == 200


def test_without_thinking_in_the_request_earlier_thinking_is_not_checked(srv):
    message = first_round(srv)
    content = copy.deepcopy(message["content"])
    content[0]["thinking"] = "rewritten"
    body = second_body(message, content)
    del body["thinking"]

    assert post(srv, body).status_code == 200


def test_an_openai_server_that_needs_reasoning_back_refuses_a_call_without_it():
    rounds = [{"thinking": ["Read it."], "calls": [CALL]}, {"text": "done"}]
    with LoopbackServer(rounds, reasoning_required=True) as srv:
        body = {"model": "m", "messages": [{"role": "user", "content": "read a"}]}
        first = post(srv, body, "/v1/chat/completions").json()["choices"][0]["message"]
        assert first["reasoning_content"] == "Read it."
        call = first["tool_calls"][0]
        result = {"role": "tool", "tool_call_id": call["id"], "content": "alpha"}
        without = {k: v for k, v in first.items() if k != "reasoning_content"}
        body["messages"] += [without, result]

        refused = post(srv, body, "/v1/chat/completions")

        assert refused.status_code == 400
        assert refused.json()["error"]["message"] == DEEPSEEK_NEEDS_REASONING
        body["messages"][1] = first
        assert post(srv, body, "/v1/chat/completions").status_code == 200
