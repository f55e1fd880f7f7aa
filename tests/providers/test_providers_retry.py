"""Faults: each transient one is retried and the final reply holds one copy of the answer."""

from __future__ import annotations

import json
import re
import socket
from email.utils import formatdate
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import anthropic_provider, openai_provider
from nodecode.errors import ContextOverflow, ProviderError, ProviderFailed
from nodecode.providers.http import Provider

if TYPE_CHECKING:
    from conftest import ReplayServer

TEXT = "- Captain\n- Scoop"  # anthropic_text_stream.sse
OPENAI_TEXT_START = "I'm unable to provide real-time weather updates."
OVERLOADED = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def text_stream(fixtures_dir: Path) -> bytes:
    return (fixtures_dir / "anthropic_text_stream.sse").read_bytes()


def _after(stream: bytes, marker: bytes) -> int:
    """Offset just past the event (and its blank line) holding ``marker``."""
    return stream.index(b"\n\n", stream.index(marker)) + 2


def test_429_waits_the_retry_after_seconds_then_succeeds(
    server: ReplayServer, anthropic: Provider, text_stream: bytes
) -> None:
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}'
    server.script(status=429, body=body, headers={"retry-after": "0.3"})
    server.script(body=text_stream)
    notes: list[str] = []

    reply = anthropic.stream(BODY, on_retry=notes.append)

    assert (reply.text, reply.retries) == (TEXT, 1)
    assert notes == ["retrying in 0.3 s: HTTP 429 rate_limit_error: Slow down"]
    assert server.requests[1].at - server.requests[0].at >= 0.3


def test_retry_after_ms_wins_over_retry_after(
    server: ReplayServer, anthropic: Provider, text_stream: bytes
) -> None:
    server.script(status=429, body=b"{}", headers={"retry-after-ms": "200", "retry-after": "30"})
    server.script(body=text_stream)
    notes: list[str] = []

    reply = anthropic.stream(BODY, on_retry=notes.append)

    assert reply.text == TEXT
    assert notes == ["retrying in 0.2 s: HTTP 429"]
    assert server.requests[1].at - server.requests[0].at >= 0.2


def test_retry_after_as_an_http_date_in_the_past_means_now(
    server: ReplayServer, anthropic: Provider, text_stream: bytes
) -> None:
    server.script(status=503, body=b"busy", headers={"retry-after": formatdate(0, usegmt=True)})
    server.script(body=text_stream)
    notes: list[str] = []

    assert anthropic.stream(BODY, on_retry=notes.append).text == TEXT
    assert notes == ["retrying in 0.0 s: HTTP 503: busy"]


@pytest.mark.parametrize(
    ("status", "body", "note"),
    [
        (529, OVERLOADED, "HTTP 529 overloaded_error: Overloaded"),
        (
            500,
            b'{"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
            "HTTP 500 api_error: Internal server error",
        ),
        (408, b"", "HTTP 408"),
    ],
)
def test_transient_status_is_retried(
    status: int,
    body: bytes,
    note: str,
    server: ReplayServer,
    anthropic: Provider,
    text_stream: bytes,
) -> None:
    server.script(status=status, body=body)
    server.script(body=text_stream)
    notes: list[str] = []

    reply = anthropic.stream(BODY, on_retry=notes.append)

    assert (reply.text, reply.retries, len(server.requests)) == (TEXT, 1, 2)
    assert len(notes) == 1 and notes[0].startswith("retrying in ") and notes[0].endswith(note)


def test_dropped_connection_mid_stream_is_retried_and_text_not_duplicated(
    server: ReplayServer, anthropic: Provider, text_stream: bytes
) -> None:
    server.script(body=text_stream, drop_after=_after(text_stream, b'" Captain"'))
    server.script(body=text_stream)
    streamed: list[str] = []
    notes: list[str] = []

    reply = anthropic.stream(BODY, on_text=streamed.append, on_retry=notes.append)

    assert (reply.text, reply.retries, reply.stopped) == (TEXT, 1, False)
    assert "".join(streamed) == "- Captain" + TEXT  # the UI saw the first try, then on_retry
    assert len(notes) == 1 and "connection dropped" in notes[0]
    assert reply.usage.output == 10


def test_clean_end_of_body_before_message_stop_is_retried(
    server: ReplayServer, anthropic: Provider, text_stream: bytes
) -> None:
    server.script(body=text_stream[: _after(text_stream, b"content_block_stop")])
    server.script(body=text_stream)
    notes: list[str] = []

    reply = anthropic.stream(BODY, on_retry=notes.append)

    assert (reply.text, reply.retries) == (TEXT, 1)
    assert notes[0].endswith("stream ended before message_stop")


def test_anthropic_overloaded_error_event_after_200_is_retried(
    server: ReplayServer, anthropic: Provider, text_stream: bytes
) -> None:
    head = text_stream[: _after(text_stream, b'" Captain"')]
    server.script(body=head + b"event: error\ndata: " + OVERLOADED + b"\n\n")
    server.script(body=text_stream)
    notes: list[str] = []

    reply = anthropic.stream(BODY, on_retry=notes.append)

    assert (reply.text, reply.retries) == (TEXT, 1)
    assert notes[0].endswith("stream error overloaded_error: Overloaded")


def test_anthropic_invalid_request_error_event_is_not_retried(
    server: ReplayServer, anthropic: Provider
) -> None:
    error = b'{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}'
    server.script(body=b"event: error\ndata: " + error + b"\n\n")

    with pytest.raises(ProviderError, match="^anthropic: stream error invalid_request_error: bad$"):
        anthropic.stream(BODY)
    assert len(server.requests) == 1


def test_openai_transient_error_chunk_is_retried(
    server: ReplayServer, openai: Provider, fixtures_dir: Path
) -> None:
    stream = (fixtures_dir / "openai_text_stream.sse").read_bytes()
    error = b'data: {"error":{"message":"Upstream overloaded, try again","code":502}}\n\n'
    server.script(body=stream[: _after(stream, b'" unable"')] + error)
    server.script(body=stream)

    reply = openai.stream(BODY)

    assert reply.text.startswith(OPENAI_TEXT_START) and reply.text.count("unable") == 1
    assert reply.retries == 1


def test_openai_error_chunk_that_is_not_transient_is_raised(
    server: ReplayServer, openai: Provider
) -> None:
    server.script(body=b'data: {"error":{"message":"Invalid tool schema","code":400}}\n\n')

    with pytest.raises(ProviderError, match="^openai: stream error 400: Invalid tool schema$"):
        openai.stream(BODY)
    assert len(server.requests) == 1


def test_read_timeout_counts_as_a_dropped_connection(
    server: ReplayServer, text_stream: bytes
) -> None:
    server.script(body=text_stream, stall_after=_after(text_stream, b'" Captain"'))
    server.script(body=text_stream)
    notes: list[str] = []

    with anthropic_provider(server.url, "k", timeout=0.3, backoff_base=0.01) as provider:
        reply = provider.stream(BODY, on_retry=notes.append)

    assert (reply.text, reply.retries) == (TEXT, 1)
    assert "timed out (ReadTimeout)" in notes[0]


def test_exhausted_retries_raise_provider_failed_with_one_line(
    server: ReplayServer, anthropic: Provider
) -> None:
    for _ in range(4):
        server.script(status=529, body=OVERLOADED)
    notes: list[str] = []

    with pytest.raises(ProviderFailed) as caught:
        anthropic.stream(BODY, on_retry=notes.append)

    assert str(caught.value) == (
        "anthropic: still failing after 3 retries: HTTP 529 overloaded_error: Overloaded"
    )
    assert caught.value.status == 529
    assert (len(server.requests), len(notes)) == (4, 3)


def test_max_retries_zero_fails_on_the_first_error(server: ReplayServer) -> None:
    server.script(status=500, body=b"")
    provider = openai_provider(f"{server.url}/v1", None, max_retries=0)
    with provider, pytest.raises(ProviderFailed, match="after 0 retries: HTTP 500$"):
        provider.stream(BODY)
    assert len(server.requests) == 1


def test_spend_limit_429_is_not_retried(server: ReplayServer, anthropic: Provider) -> None:
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "You have reached your spend limit.",
            "details": {"error_code": "enforced_spend_limit_reached"},
        },
    }
    server.script(status=429, body=json.dumps(body).encode())

    with pytest.raises(ProviderError) as caught:
        anthropic.stream(BODY)

    assert not isinstance(caught.value, (ProviderFailed, ContextOverflow))
    assert str(caught.value) == (
        "anthropic: HTTP 429 rate_limit_error: You have reached your spend limit."
    )
    assert len(server.requests) == 1


def test_x_should_retry_false_is_obeyed(server: ReplayServer, anthropic: Provider) -> None:
    server.script(status=503, body=b"", headers={"x-should-retry": "false"})

    with pytest.raises(ProviderError, match="^anthropic: HTTP 503$"):
        anthropic.stream(BODY)
    assert len(server.requests) == 1


def test_connection_refused_is_retried_then_fails_naming_the_server(unused_url: str) -> None:
    provider = anthropic_provider(unused_url, "k", max_retries=1, backoff_base=0.01)
    server = unused_url.rstrip("/").split("/v1")[0]
    failed = pytest.raises(
        ProviderFailed,
        match=re.escape(f"after 1 retries: cannot connect to {server}: ")
        + r".*\(is the server running, and its base_url right\?\)$",
    )
    with provider, failed:
        provider.stream(BODY)


@pytest.fixture
def unused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
