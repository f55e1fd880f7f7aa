"""The Responses API format in detail: what its recorded streams give back to
send again, its errors, and the body it builds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nodecode.context.message import Message
from nodecode.errors import ConfigError, ContextOverflow, ProviderError
from nodecode.providers import registry
from nodecode.providers.sse import iter_events
from nodecode.providers.wire import Request
from test_providers_fixture_streams import (
    CALCULATOR_REASONING_ID,
    CALCULATOR_SUMMARY,
)

if TYPE_CHECKING:
    pass

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


# -- the Responses API ------------------------------------------------------------


def test_a_reasoning_item_is_kept_as_its_done_event_holds_it(fixtures_dir: Path) -> None:
    """The item goes back whole, with the encrypted content of output_item.done
    (output_item.added carried an earlier one)."""
    path = fixtures_dir / "openai_responses_reasoning_tool_stream.jsonl"
    done = next(
        json.loads(e.data)["item"]
        for e in events_of(path)
        if '"response.output_item.done"' in e.data and '"reasoning"' in e.data
    )
    (thought,) = parse("openai-responses", path).reply().thinking
    assert thought.block == done and thought.block["id"] == CALCULATOR_REASONING_ID
    assert thought.block["encrypted_content"].startswith("gAAAAABpPDIVOKrs")
    assert thought.text == CALCULATOR_SUMMARY


def test_an_error_event_in_a_responses_stream_is_one_error_naming_its_code(
    fixtures_dir: Path,
) -> None:
    with pytest.raises(ProviderError) as caught:
        parse("openai-responses", fixtures_dir / "openai_responses_error_stream.txt")
    assert "insufficient_quota" in str(caught.value) and not caught.value.retryable


def test_a_context_window_error_event_is_an_overflow(fixtures_dir: Path) -> None:
    raw = fixtures_dir / "errors" / "openai_responses_stream_error_context_length_exceeded.json"
    parser = registry.wire("openai-responses").parser(None, None)
    with pytest.raises(ContextOverflow):
        for event in events_of(raw):
            parser.feed(event)


def test_responses_body_is_stateless_and_sends_reasoning_back_before_its_call() -> None:
    item = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}
    msgs = [
        Message(1, "user", "ask"),
        Message(2, "thinking", "", payload={"format": "openai-responses", "block": item}),
        Message(3, "call", "c", payload={"name": "eval", "input": {"code": "(x)"}}),
        Message(4, "tool", "out", payload={"call": 3}),
        Message(5, "thinking", "", payload={"format": "openai-responses", "block": item}),
    ]
    thinking = registry.wire("openai-responses").thinking({"effort": "low"}, "m")
    body = registry.wire("openai-responses").build(Request(msgs, thinking=thinking, **KW)).body
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    assert body["instructions"] == "be brief" and body["max_output_tokens"] == 100
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert list(body["input"]) == [
        {"role": "user", "content": "ask"},
        item,
        {"type": "function_call", "call_id": "call_nc3", "name": "eval",
         "arguments": '{"code": "(x)"}'},
        {"type": "function_call_output", "call_id": "call_nc3", "output": "out"},
    ]  # fmt: skip
    # the last reasoning item is followed by nothing: the API refuses such an item


@pytest.mark.parametrize(
    "raw",
    [{"effort": "huge"}, {"summary": "long"}, {"budget_tokens": 1024}, "high"],
)
def test_a_bad_responses_thinking_setting_is_one_config_error(raw) -> None:
    with pytest.raises(ConfigError, match="thinking"):
        registry.wire("openai-responses").thinking(raw, "providers.p.models[m]")
