"""Quirks seen in the wild but not in a recorded fixture (providers.md §1.5, §2.2), over HTTP."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from nodecode.providers.http import Provider
from nodecode.providers.types import ToolCall, Usage

if TYPE_CHECKING:
    from conftest import ReplayServer

BODY = {"model": "m", "messages": []}


def _sse(*events: dict[str, Any], named: bool = True) -> bytes:
    frames = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        frames.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(frames).encode()


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def _openai(*chunks: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def test_anthropic_thinking_server_tools_and_unknown_events_are_not_reply_text(
    server: ReplayServer, anthropic: Provider
) -> None:
    server.script(
        body=_sse(
            {
                "type": "message_start",
                "message": {
                    "usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 40}
                },
            },
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "secret plan"},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "abc"},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "compaction_notice", "what": "new event type"},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "citations_delta", "citation": {"cited_text": "x"}},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "Hi"},
            },
            {"type": "content_block_stop", "index": 1},
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "server_tool_use", "id": "srv", "name": "web_search"},
            },
            {
                "type": "content_block_delta",
                "index": 2,
                "delta": {"type": "input_json_delta", "partial_json": '{"q":1}'},
            },
            {"type": "content_block_stop", "index": 2},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 9, "input_tokens": None},
            },
            {"type": "message_stop"},
        )
    )

    reply = anthropic.stream(BODY)

    assert (reply.text, reply.calls) == ("Hi", [])
    assert reply.usage == Usage(input=5, output=9, cache_read=40, cache_write=0)


def test_anthropic_unparsable_tool_input_is_kept_as_the_raw_string(
    server: ReplayServer, anthropic: Provider
) -> None:
    server.script(
        body=_sse(
            {"type": "message_start", "message": {"usage": {"input_tokens": 1}}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"a": tru'},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "message_stop"},
            named=False,
        )
    )

    assert anthropic.stream(BODY).calls == [ToolCall("t1", "f", '{"a": tru')]


def test_openai_reasoning_fields_are_not_reply_text(server: ReplayServer, openai: Provider) -> None:
    server.script(
        body=_openai(
            _chunk({"role": "assistant", "content": None, "reasoning_content": "hmm"}),
            _chunk({"reasoning": "more", "thinking": "still", "content": "Yes"}),
            _chunk(
                {},
                "stop",
                usage={
                    "prompt_tokens": 10,
                    "completion_tokens": 2,
                    "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 3},
                },
            ),
        )
    )

    reply = openai.stream(BODY)

    assert reply.text == "Yes"
    assert reply.usage == Usage(input=10, output=2, cache_read=4, cache_write=3)


def test_openai_repeated_id_and_name_null_arguments_and_empty_arguments(
    server: ReplayServer, openai: Provider
) -> None:
    call = {"index": 0, "id": "0", "type": "function"}
    server.script(
        body=_openai(
            _chunk({"tool_calls": [{**call, "function": {"name": "list", "arguments": None}}]}),
            _chunk({"tool_calls": [{**call, "function": {"name": "list", "arguments": ""}}]}),
            _chunk({"tool_calls": [{**call, "function": {"name": "list", "arguments": "{}"}}]}),
            _chunk(
                {
                    "tool_calls": [
                        {"index": 1, "id": "1", "function": {"name": "now", "arguments": ""}}
                    ]
                }
            ),
        )
    )

    reply = openai.stream(BODY)  # no finish_reason at all: [DONE] is enough

    assert reply.calls == [ToolCall("0", "list", {}), ToolCall("1", "now", {})]


def test_openai_calls_without_index_split_when_the_id_changes(
    server: ReplayServer, openai: Provider
) -> None:
    server.script(
        body=_openai(
            _chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"x"'}}]}),
            _chunk({"tool_calls": [{"function": {"arguments": ": 1}"}}]}),
            _chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            _chunk({}, "tool_calls"),
        )
    )

    assert openai.stream(BODY).calls == [ToolCall("a", "f", {"x": 1}), ToolCall("b", "g", {})]


def test_openai_same_index_with_a_new_id_is_a_new_call(
    server: ReplayServer, openai: Provider
) -> None:
    server.script(
        body=_openai(
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}
                    ]
                }
            ),
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}}
                    ]
                }
            ),
        )
    )

    assert openai.stream(BODY).calls == [ToolCall("a", "f", {}), ToolCall("b", "g", {})]
