"""Stopping a request: the partial reply comes back at once, even from a stalled server."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from nodecode.providers.http import Provider
from nodecode.providers.types import ToolCall

if TYPE_CHECKING:
    from conftest import ReplayServer

BODY = {"model": "m", "messages": []}


def _after(stream: bytes, marker: bytes) -> int:
    """Offset just past the line holding ``marker`` and whatever blank line follows."""
    end = stream.index(b"\n", stream.index(marker)) + 1
    return end + 1 if stream[end : end + 1] == b"\n" else end


def _cancel_when(streamed: list[str], wanted: str, cancel: threading.Event) -> list[float]:
    """Set ``cancel`` once the streamed text reaches ``wanted`` (from a side thread);
    the returned list receives the time it was set."""
    set_at: list[float] = []

    def watch() -> None:
        deadline = time.monotonic() + 5
        while "".join(streamed) != wanted and time.monotonic() < deadline:
            time.sleep(0.01)
        set_at.append(time.monotonic())
        cancel.set()

    threading.Thread(target=watch, daemon=True).start()
    return set_at


def test_cancel_mid_stream_returns_partial_text_promptly_while_server_stalls(
    server: ReplayServer, fixtures_dir: Path, anthropic: Provider
) -> None:
    stream = (fixtures_dir / "anthropic_text_stream.sse").read_bytes()
    server.script(body=stream, piece=50, delay=0.02, stall_after=_after(stream, b'"\\n- Sc"'))
    cancel, streamed = threading.Event(), []
    cancelled_at = _cancel_when(streamed, "- Captain\n- Sc", cancel)
    busy_before = _busy_readers()  # another test's, if any: not this one's to judge

    reply = anthropic.stream(BODY, on_text=streamed.append, cancel=cancel)
    returned_at = time.monotonic()

    assert (reply.stopped, reply.text, reply.retries) == (True, "- Captain\n- Sc", 0)
    assert reply.usage.input == 17
    assert returned_at - cancelled_at[0] < 2.0
    assert _reader_threads_end(busy_before), "the blocked reader thread was not woken"


def _busy_readers() -> set[int | None]:
    """The threads reading a response body now (a busy pump is named so)."""
    return {t.ident for t in threading.enumerate() if t.name == "nodecode-provider"}


def _reader_threads_end(busy_before: set[int | None]) -> bool:
    """Whether the readers this test set busy end within 3 s: the server stalls for
    30, so only the cancel's socket shutdown can wake them before the provider's
    5 s read timeout would."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if not _busy_readers() - busy_before:
            return True
        time.sleep(0.02)
    return False


def test_cancel_keeps_only_anthropic_tool_calls_whose_input_completed(
    server: ReplayServer, fixtures_dir: Path, anthropic: Provider
) -> None:
    name = "anthropic_parallel_tool_use_stream_codecompanion.sse"
    stream = (fixtures_dir / name).read_bytes()
    server.script(body=stream, stall_after=_after(stream, b'" Fra"'))
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()

    started = time.monotonic()
    reply = anthropic.stream(BODY, cancel=cancel)

    assert time.monotonic() - started < 2.0
    assert reply.stopped
    assert reply.text == "I'll check the weather for both cities using Celsius units."
    assert reply.calls == [
        ToolCall(
            "toolu_01QRThyzKt6NibK3m1DjUTkE",
            "weather",
            {"location": "London, UK", "units": "celsius"},
        )
    ]


def test_cancel_keeps_only_openai_tool_calls_whose_input_completed(
    server: ReplayServer, fixtures_dir: Path, openai: Provider
) -> None:
    stream = (fixtures_dir / "openai_parallel_tool_calls_stream.sse").read_bytes()
    server.script(body=stream, stall_after=_after(stream, b'"cker\\""'))
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()

    reply = openai.stream(BODY, cancel=cancel)

    assert reply.stopped
    assert reply.calls == [
        ToolCall(
            "call_JMW1whyEaYG438VE1OIflxA2",
            "GetWeatherArgs",
            {"city": "Edinburgh", "country": "GB", "units": "c"},
        )
    ]


def test_cancel_before_the_server_answers_returns_an_empty_stopped_reply(
    server: ReplayServer, fixtures_dir: Path, openai: Provider
) -> None:
    server.script(body=b"", head_delay=30)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()

    started = time.monotonic()
    reply = openai.stream(BODY, cancel=cancel)

    assert time.monotonic() - started < 2.0
    assert (reply.stopped, reply.text, reply.calls) == (True, "", [])


def test_cancel_while_waiting_to_retry_stops_at_once(
    server: ReplayServer, anthropic: Provider
) -> None:
    server.script(status=529, body=b"{}", headers={"retry-after": "30"})
    cancel = threading.Event()

    started = time.monotonic()
    reply = anthropic.stream(BODY, cancel=cancel, on_retry=lambda note: cancel.set())

    assert time.monotonic() - started < 2.0
    assert (reply.stopped, reply.retries, len(server.requests)) == (True, 0, 1)


def test_a_provider_still_works_after_a_cancelled_request(
    server: ReplayServer, fixtures_dir: Path, anthropic: Provider
) -> None:
    stream = (fixtures_dir / "anthropic_basic_stream_sdk.sse").read_bytes()
    server.script(body=stream, stall_after=_after(stream, b'"Hello"'))
    server.script(body=stream)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()

    first = anthropic.stream(BODY, cancel=cancel)
    second = anthropic.stream(BODY)

    assert (first.stopped, first.text) == (True, "Hello")
    assert (second.stopped, second.text) == (False, "Hello there!")
