"""Every recorded stream in tests/fixtures, replayed over real HTTP.

The expected text, calls and usage were read off the fixture files by eye.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nodecode.providers.anthropic import AnthropicProvider
from nodecode.providers.openai import OpenAIProvider
from nodecode.providers.types import ToolCall, Usage

if TYPE_CHECKING:
    from conftest import ReplayServer


@dataclass
class Expected:
    provider: str
    text: str
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop: str | None = None


PELICAN_ANSWER = (
    "Here are two great names for your pet pelican:\n\n"
    "1. **Charles** - A sophisticated and dignified name, perfect for a pelican with personality!\n"
    "2. **Sammy** - A friendly and playful name that gives off warm, approachable vibes.\n\n"
    "Either of these would make an excellent name for your feathered friend! \U0001f985"
)
LLAMACPP_TEXT = (
    '<|channel|>analysis<|message|>User says "test". Likely wants a test response. '
    "We'll respond acknowledging.<|start|>assistant<|channel|>final<|message|>"
    "Got it! If you have any questions or need assistance, just let me know."
)

STREAMS: dict[str, Expected] = {
    "anthropic_text_stream.sse": Expected(
        "anthropic", "- Captain\n- Scoop", usage=Usage(17, 10, 0, 0), stop="end_turn"
    ),
    "anthropic_basic_stream_sdk.sse": Expected(
        "anthropic", "Hello there!", usage=Usage(11, 6), stop="end_turn"
    ),
    "anthropic_tool_use_stream.sse": Expected(
        "anthropic",
        "I'll check the current weather in Paris for you.",
        calls=[ToolCall("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})],
        usage=Usage(377, 65, 0, 0),
        stop="tool_use",
    ),
    "anthropic_parallel_tool_use_stream_codecompanion.sse": Expected(
        "anthropic",
        "I'll check the weather for both cities using Celsius units.",
        calls=[
            ToolCall(
                "toolu_01QRThyzKt6NibK3m1DjUTkE",
                "weather",
                {"location": "London, UK", "units": "celsius"},
            ),
            ToolCall(
                "toolu_015A1zQUwKw1YE3CYvRRUdXZ",
                "weather",
                {"location": "Paris, France", "units": "celsius"},
            ),
        ],
        usage=Usage(905, 137, 0, 0),
        stop="tool_use",
    ),
    "anthropic_parallel_tool_use_empty_input_stream.sse": Expected(
        "anthropic",
        "",
        calls=[
            ToolCall("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
            ToolCall("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
        ],
        usage=Usage(542, 62, 0, 0),
        stop="tool_use",
    ),
    "anthropic_tool_result_followup_stream.sse": Expected(
        "anthropic", PELICAN_ANSWER, usage=Usage(678, 82, 0, 0), stop="end_turn"
    ),
    "anthropic_cache_creation_read_chunks.jsonl": Expected(
        "anthropic",
        "The sum of the squares of the numbers 1 through 12 is **650**.",
        usage=Usage(input=6, output=198, cache_read=6289, cache_write=3337),
        stop="end_turn",
    ),
    "openai_text_stream.sse": Expected(
        "openai",
        "I'm unable to provide real-time weather updates. To get the current weather in San "
        "Francisco, I recommend checking a reliable weather website or a weather app.",
        usage=Usage(14, 30),
        stop="stop",
    ),
    "openai_parallel_tool_calls_stream.sse": Expected(
        "openai",
        "",
        calls=[
            ToolCall(
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                {"city": "Edinburgh", "country": "GB", "units": "c"},
            ),
            ToolCall(
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                {"ticker": "AAPL", "exchange": "NASDAQ"},
            ),
        ],
        usage=Usage(149, 60),
        stop="tool_calls",
    ),
    "openai_tool_call_include_usage_stream.sse": Expected(
        "openai",
        "",
        calls=[ToolCall("call_1EYWDzueHEp8OsB8jJSEp7WB", "multiply", {"a": 1231, "b": 2331})],
        usage=Usage(54, 20, 0, 0),
        stop="tool_calls",
    ),
    "openrouter_reasoning_tool_stream_codecompanion.sse": Expected(
        "openai",
        "",
        calls=[
            ToolCall(
                "call_yqZoquE7i7crGNV4S4uZo902",
                "read_file",
                {
                    "filepath": "/Users/Oli/Code/Neovim/codecompanion.nvim/version.txt",
                    "end_line_number_base_zero": -1,
                    "start_line_number_base_zero": 0,
                },
            )
        ],
        usage=Usage(2817, 91, 0, 0),
        stop="tool_calls",
    ),
    "ollama_openai_compat_text_stream.sse": Expected(
        "openai", "**Dynamic Object-Oriented**", usage=Usage(403, 8), stop="stop"
    ),
    "ollama_native_tool_calls.ndjson": Expected(
        "openai",
        "",
        calls=[
            ToolCall("", "weather", {"location": "London, UK", "units": "celsius"}),
            ToolCall("", "weather", {"location": "Paris, FR", "units": "fahrenheit"}),
        ],
        usage=Usage(577, 90),
        stop="stop",
    ),
    "llamacpp_text_stream.jsonl": Expected(
        "openai", LLAMACPP_TEXT, usage=Usage(82, 43), stop="stop"
    ),
}


def test_every_stream_fixture_has_expectations(fixtures_dir: Path) -> None:
    on_disk = {p.name for ext in ("*.sse", "*.jsonl", "*.ndjson") for p in fixtures_dir.glob(ext)}
    assert on_disk == set(STREAMS)


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_stream_fixture_replayed_over_http_parses_exactly(
    name: str,
    server: ReplayServer,
    fixtures_dir: Path,
    anthropic: AnthropicProvider,
    openai: OpenAIProvider,
) -> None:
    expected = STREAMS[name]
    server.script(body=(fixtures_dir / name).read_bytes())
    provider = anthropic if expected.provider == "anthropic" else openai
    pieces: list[str] = []

    reply = provider.stream({"model": "m", "messages": []}, on_text=pieces.append)

    assert reply.text == expected.text
    assert "".join(pieces) == expected.text
    assert reply.calls == expected.calls
    assert reply.usage == expected.usage
    assert reply.stop_reason == expected.stop
    assert (reply.stopped, reply.retries) == (False, 0)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ["anthropic_tool_use_stream.sse", "openai_text_stream.sse"])
def test_stream_fixture_with_crlf_line_ends_parses_the_same(
    name: str,
    server: ReplayServer,
    fixtures_dir: Path,
    anthropic: AnthropicProvider,
    openai: OpenAIProvider,
) -> None:
    expected = STREAMS[name]
    body = (fixtures_dir / name).read_bytes().replace(b"\n", b"\r\n")
    server.script(body=body, piece=2)  # tiny pieces split every \r\n too
    provider = anthropic if expected.provider == "anthropic" else openai

    reply = provider.stream({"model": "m", "messages": []})

    assert (reply.text, reply.calls, reply.usage) == (expected.text, expected.calls, expected.usage)
