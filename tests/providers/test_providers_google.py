"""The Gemini format in detail: what its recorded streams give back to send
again, its usage and errors, and the body it builds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nodecode.context.message import Message
from nodecode.errors import ContextOverflow
from nodecode.providers import registry
from nodecode.providers.google import SIGNED
from nodecode.providers.http import Provider
from nodecode.providers.sse import iter_events
from nodecode.providers.types import Usage
from nodecode.providers.wire import Request

if TYPE_CHECKING:
    from conftest import ReplayServer

KW = dict(model="m", system="be brief", tools=[], max_tokens=100)


def events_of(path: Path):
    return list(iter_events(path.read_text().splitlines()))


def parse(wire: str, path: Path):
    parser = registry.wire(wire).parser(None, None)
    for event in events_of(path):
        parser.feed(event)
        if parser.finished:
            break
    return parser


# -- Gemini ---------------------------------------------------------------------------


def test_a_signature_on_a_call_is_kept_to_go_back_on_that_call(fixtures_dir: Path) -> None:
    reply = parse("google", fixtures_dir / "google_signed_tool_call_stream.jsonl").reply()
    (sealed,) = reply.thinking
    assert sealed.text == SIGNED and sealed.block["on"] == "functionCall"
    assert sealed.block["thoughtSignature"].startswith("EpEgCo4gAb4+9vvWwdN+NkNiCCwrqvFI8uf9")


def test_an_empty_signed_part_is_kept_as_it_came(fixtures_dir: Path) -> None:
    reply = parse("google", fixtures_dir / "google_signed_text_stream.jsonl").reply()
    (sealed,) = reply.thinking
    assert sealed.block["text"] == "" and sealed.block["thoughtSignature"].startswith("EpAICo0I")
    assert set(sealed.block) == {"text", "thoughtSignature"}


def test_gemini_usage_counts_cached_and_thought_tokens(fixtures_dir: Path) -> None:
    parser = parse("google", fixtures_dir / "google_usage_event.txt")
    assert parser.usage == Usage(input=12, output=71 + 89, cache_read=4, thinking=89)
    assert not parser.complete  # no finishReason yet: a body ending here was cut


def test_gemini_thought_parts_show_and_go_back_as_they_came() -> None:
    parser = registry.wire("google").parser(None, None)
    shown: list[str] = []
    parser._on_thinking = shown.append
    for event in iter_events([
        'data: {"candidates":[{"content":{"parts":[{"text":"Plan ","thought":true}]}}]}',
        "",
        'data: {"candidates":[{"content":{"parts":[{"text":"it.","thought":true}]}}]}',
        "",
        'data: {"candidates":[{"content":{"parts":[{"text":"Done."}]},"finishReason":"STOP"}],'
        '"usageMetadata":{"promptTokenCount":3}}',
    ]):  # fmt: skip
        parser.feed(event)
    reply = parser.reply()
    assert "".join(shown) == "Plan it." and reply.text == "Done."
    assert [t.block for t in reply.thinking] == [{"text": "Plan it.", "thought": True}]


def test_gemini_overflow_names_its_numbers(
    server: ReplayServer, wires: dict[str, Provider]
) -> None:
    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
            "The input token count (1196265) exceeds the maximum number of tokens allowed "
            "(1048575)."}}  # fmt: skip
    server.script(status=400, body=json.dumps(body).encode())
    with pytest.raises(ContextOverflow) as caught:
        wires["google"].stream({"model": "gemini-x", "contents": []})
    assert (caught.value.maximum, caught.value.prompt) == (1048575, 1196265)
    assert server.requests[0].path == "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    assert server.requests[0].headers["x-goog-api-key"] and "model" not in server.requests[0].body


def test_gemini_body_puts_each_signature_back_on_its_part() -> None:
    signed_call = {"thoughtSignature": "S1", "on": "functionCall"}
    empty = {"text": "", "thoughtSignature": "S2"}
    msgs = [
        Message(1, "user", "ask"),
        Message(2, "thinking", "t", payload={"format": "google",
                                             "block": {"text": "t", "thought": True}}),
        Message(3, "thinking", SIGNED, payload={"format": "google", "block": signed_call}),
        Message(4, "call", "c", payload={"name": "eval", "input": {"code": "(x)"}}),
        Message(5, "call", "c", payload={"name": "eval", "input": {"code": "(y)"}}),
        Message(6, "tool", "out", payload={"call": 4}),
        Message(7, "tool", "bad", payload={"call": 5, "error": True}),
        Message(8, "thinking", SIGNED, payload={"format": "google", "block": empty}),
        Message(9, "assistant", "done"),
    ]  # fmt: skip
    body = registry.wire("google").build(Request(msgs, **KW)).body
    assert list(body["contents"]) == [
        {"role": "user", "parts": [{"text": "ask"}]},
        {"role": "model", "parts": [
            {"text": "t", "thought": True},
            {"functionCall": {"name": "eval", "args": {"code": "(x)"}}, "thoughtSignature": "S1"},
            {"functionCall": {"name": "eval", "args": {"code": "(y)"}}},
        ]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "eval", "response": {"output": "out"}}},
            {"functionResponse": {"name": "eval", "response": {"error": "bad"}}},
        ]},
        {"role": "model", "parts": [empty, {"text": "done"}]},
    ]  # fmt: skip
    assert body["generationConfig"] == {"maxOutputTokens": 100}
    assert body["systemInstruction"] == {"parts": [{"text": "be brief"}]}
