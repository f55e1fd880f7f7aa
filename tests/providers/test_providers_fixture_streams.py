"""Every recorded stream in tests/fixtures, replayed over real HTTP.

The expected text, thinking, calls and usage were read off the fixture files by eye.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nodecode.providers.http import Provider
from nodecode.providers.types import REDACTED_THINKING, ToolCall, Usage

if TYPE_CHECKING:
    from conftest import ReplayServer


@dataclass
class Expected:
    provider: str
    text: str
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop: str | None = None
    thinking: list[dict] = field(default_factory=list)  # the exact blocks to send back
    shown: str = ""  # the thinking the person sees, as streamed


PELICAN_ANSWER = (
    "Here are two great names for your pet pelican:\n\n"
    "1. **Charles** - A sophisticated and dignified name, perfect for a pelican with personality!\n"
    "2. **Sammy** - A friendly and playful name that gives off warm, approachable vibes.\n\n"
    "Either of these would make an excellent name for your feathered friend! \U0001f985"
)
RUBY_THINKING = (
    "The user is asking me to describe the Ruby programming language in just two words. "
    "This is a direct question related to programming, which is within my core tasks.\n\n"
    "I need to think about what two words would best capture the essence of Ruby as a "
    "programming language:\n\n"
    "1. Ruby is known for its elegant, readable syntax that prioritizes developer happiness.\n"
    "2. It's a dynamic, object-oriented language.\n"
    "3. It emphasizes simplicity and productivity.\n"
    "4. It has a strong focus on being natural to read and easy to write.\n\n"
    "Given these characteristics, the two words I could use would be something like:\n"
    '- "Elegant simplicity"\n- "Dynamic elegance"\n- "Developer friendly"\n'
    '- "Expressively object-oriented"\n\n'
    'I think "Elegant simplicity" best captures what Ruby is known for in the programming '
    "community."
)
RUBY_SIGNATURE = (
    "ErUBCkYIARgCIkD2TbY0dBj4TX6j9jLgU26mB6oDbc93/3vETJg/qq0PSyG3Xl2YMJefENtLSEhETavznU7kszXyc"
    "QGdosQAyTQvEgw7PKGa97oZW+qHSMgaDNEjEybHMgXvWWf4ICIwIwGrPIrMPucyIKwt/fD4pjtRGQMRLA8JljU9l6f"
    "gMoa4q2833/4cCQCyR44B3tpqKh0zHS0N/n80WstQDoMibOxcYrI4d2bRe94D9l8Pjg=="
)
REDACTED_1 = (
    "EqkECkYIBxgCKkA8AZ4noDfV5VcOJe/p3JTRB6Xz5297mrWhl3MbHSXDKTMfuB/Z52U2teiWWTN0gg4eQ4bGS9TPil"
    "FX/xWTIq9HEgyOmstSPriNwyn1G7AaDC51r0hQ062qEd55IiIwYQj3Z3MSBBv0bSVdXi60LEHDvC7tzzmpQfw5Hb6R9"
    "rtyOz/6vC/xPw9/E1mUqfBqKpADO2HS2QlE/CnuzR901nZOn0TOw7kEXwH7kg30c85b9W7iKALgEejY9sELMBdPyIZN"
    "lTgKqNOKtY3R/aV5rGIRPTHh2Wh9Ijmqsf/TT7i//Z+InaYTo6f/fxF8R0vFXMRPOBME4XIscb05HcNhh4c9FDkpqQG"
    "YKaq31IR1NNwPWA0BsvdDz7SIo1nfx4H+X0qKKqqegKnQ3ynaXiD5ydT1C4U7fku4ftgF0LGwIk4PwXBE+4BP0DcKr1H"
    "V3cn7YSyNakBSDTvRJMKcXW6hl7X3w2a4//sxjC1Cjq0uzkIHkhzRWirN0OSXt+g3m6b1ex0wGmSyuO17Ak6kgVBpxwP"
    "ugtrqsflG0oujFem44hecXJ9LQNssPf4RSlcydiG8EXp/XLGTe0YfHbe3kJagkowSH/Dm6ErXBiVs7249brncyY8WA+7"
    "MOoqIM82YIU095B9frCqDJDUWnN84VwOszRrcaywmpJXZO4aeQLMC1kXD5Wabu+O/00tD/X67EWkkWuR0AhDIXXjpot45"
    "vnBd4ewJ/hgB"
)
REDACTED_2 = (
    "EtgBCkYIBxgCKkDQfGkwzflEJP5asG3oQfJXcTwJLoRznn8CmuczWCsJ36dv93X9H0NCeaJRbi5BrCA2DyMgFnRKRuz"
    "Zx8VTv5axEgwkFmcHJk8BSiZMZRQaDDYv2KZPfbFgRa2QjyIwm47f5YYsSK9CT/oh/WWpU1HJJVHr8lrC6HG1ItRdtM"
    "vYQYmEGy+KhyfcIACfbssVKkDGv/NKqNMOAcu0bd66gJ2+R1R0PX11Jxn2Nd1JtZqkxx7vMT/PXtHDhm9jkDZ2k/6RjR"
    "RFuab/DBV3yRYdZ1J0GAE="
)
MAGIC_ANSWER = (
    "I notice that you've sent what appears to be some kind of test string or command. I don't "
    'have any special "magic string" triggers or backdoor commands that would expose internal '
    "systems or change my behavior.\n\nI'm Claude, an AI assistant created by Anthropic to be "
    "helpful, harmless, and honest. How can I assist you today with a legitimate task or question?"
)
DEEPSEEK_REASONING = (
    "The user wants to know the weather in London and Paris. I can call the weather tool for both "
    "locations in parallel since they're independent."
)
OPENROUTER_REASONING = (
    "**Locating file for user**\n\nI need to comply and read the requested file. I think I'll "
    "use the read_file tool in the commentary section with the path likely in the current "
    "working directory (cwd). Since the user specifically asked for version.txt, I should check "
    "there. My goal is to make sure I get this right and provide the user with the information "
    "they need from that file! So, let's go ahead and locate it."
)
OPENROUTER_ENCRYPTED_ID = "rs_0870a899af1a73c9016a365cf5f43481958ac0a5fe5247c577"
LLAMACPP_TEXT = (
    '<|channel|>analysis<|message|>User says "test". Likely wants a test response. '
    "We'll respond acknowledging.<|start|>assistant<|channel|>final<|message|>"
    "Got it! If you have any questions or need assistance, just let me know."
)

CALCULATOR_SUMMARY = (
    "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7, then multiply the "
    "result by 3, and finally multiply that by 10, reporting the final product."
)
CALCULATOR_REASONING_ID = "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"
STRAWBERRY = 'There are **3** "r"s in strawberry.\n\nSt**r**awbe**rr**y'

STREAMS: dict[str, Expected] = {
    # The file holds the three requests of one agent run; the first ends at its
    # response.completed: a reasoning item (summary, encrypted content) and a call.
    "openai_responses_reasoning_tool_stream.jsonl": Expected(
        "openai-responses",
        "",
        calls=[
            ToolCall("call_AB6AaRZ1FYZB2RwS6A5vbdqn", "calculator", {"a": 12, "b": 7, "op": "add"})
        ],
        usage=Usage(134, 28),
        stop="tool_calls",
        shown=CALCULATOR_SUMMARY,
    ),
    "google_signed_tool_call_stream.jsonl": Expected(
        "google",
        "",
        calls=[ToolCall("", "weather", {"location": "San Francisco"})],
        usage=Usage(29, 15 + 804, thinking=804),
        stop="STOP",
    ),
    "google_signed_text_stream.jsonl": Expected(
        "google", STRAWBERRY, usage=Usage(9, 23 + 302, thinking=302), stop="STOP"
    ),
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
        usage=Usage(2817, 91, 0, 0, thinking=39),
        stop="tool_calls",
        shown=OPENROUTER_REASONING,
    ),
    "anthropic_thinking_stream_codecompanion.sse": Expected(
        "anthropic",
        "**Elegant simplicity**\n\nNeed more details about Ruby's features?",
        usage=Usage(484, 208, 0, 0),
        stop="end_turn",
        thinking=[{"type": "thinking", "thinking": RUBY_THINKING, "signature": RUBY_SIGNATURE}],
        shown=RUBY_THINKING,
    ),
    "anthropic_redacted_thinking_stream_pydantic.sse": Expected(
        "anthropic",
        MAGIC_ANSWER,
        usage=Usage(92, 189, 0, 0),
        stop="end_turn",
        thinking=[
            {"type": "redacted_thinking", "data": REDACTED_1},
            {"type": "redacted_thinking", "data": REDACTED_2},
        ],
        shown=(REDACTED_THINKING + "\n") * 2,
    ),
    "deepseek_reasoning_tool_stream_codecompanion.sse": Expected(
        "openai",
        "",
        calls=[
            ToolCall(
                "call_00_xzVVyar4M7TXmqAvwt5lz3v2",
                "weather",
                {"location": "London, UK", "units": "celsius"},
            ),
            ToolCall(
                "call_01_FiLq2fgCjbR43jdNrxI4OYGD",
                "weather",
                {"location": "Paris, France", "units": "celsius"},
            ),
        ],
        usage=Usage(1366, 138, 1024, 0, thinking=28),
        stop="tool_calls",
        thinking=[{"reasoning_content": DEEPSEEK_REASONING}],
        shown=DEEPSEEK_REASONING,
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
    wires: dict[str, Provider],
) -> None:
    expected = STREAMS[name]
    server.script(body=(fixtures_dir / name).read_bytes())
    provider = wires[expected.provider]
    pieces: list[str] = []
    thought: list[str] = []

    reply = provider.stream(
        {"model": "m", "messages": []}, on_text=pieces.append, on_thinking=thought.append
    )

    assert reply.text == expected.text
    assert "".join(pieces) == expected.text
    if expected.thinking or name.startswith(("openrouter", "openai_responses", "google")):
        blocks = [t.block for t in reply.thinking]
        assert blocks == (expected.thinking or blocks)
    else:
        assert reply.thinking == []
    assert "".join(thought) == expected.shown
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
    anthropic: Provider,
    openai: Provider,
) -> None:
    expected = STREAMS[name]
    body = (fixtures_dir / name).read_bytes().replace(b"\n", b"\r\n")
    server.script(body=body, piece=2)  # tiny pieces split every \r\n too
    provider = anthropic if expected.provider == "anthropic" else openai

    reply = provider.stream({"model": "m", "messages": []})

    assert (reply.text, reply.calls, reply.usage) == (expected.text, expected.calls, expected.usage)


def test_openrouter_reasoning_details_merge_into_one_summary_and_one_encrypted_item(
    server: ReplayServer, fixtures_dir: Path, openai: Provider
) -> None:
    """Streamed fragments of the same detail (same index and type) join into one
    item; the encrypted item that follows with the same index stays its own, whole."""
    server.script(
        body=(fixtures_dir / "openrouter_reasoning_tool_stream_codecompanion.sse").read_bytes()
    )

    reply = openai.stream({"model": "m", "messages": []})

    (thought,) = reply.thinking
    assert thought.text == OPENROUTER_REASONING
    assert thought.block["reasoning"] == OPENROUTER_REASONING
    summary, encrypted = thought.block["reasoning_details"]
    assert summary == {
        "type": "reasoning.summary",
        "summary": OPENROUTER_REASONING,
        "format": "openai-responses-v1",
        "index": 0,
    }
    assert encrypted["type"] == "reasoning.encrypted"
    assert encrypted["id"] == OPENROUTER_ENCRYPTED_ID
    assert (
        encrypted["data"].startswith("gAAAAABqNlz3rgS2kKX9lJwCAEp1")
        and len(encrypted["data"]) > 1000
    )
