"""A real HTTP replay server on 127.0.0.1 for provider tests.

Each POST takes the next scripted answer: a status, headers and a body sent
in small chunked pieces (so the client parses incrementally), optionally cut
off (connection dropped) or stalled part-way. Every request is recorded.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import BASE_PATHS, FIXTURES, anthropic_provider, openai_provider
from nodecode.providers.http import Provider

API_KEY = "sk-test-Zq8vK2mN5pX1"


@dataclass
class Answer:
    """One scripted response."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    piece: int = 97  # bytes per chunk: odd, so lines and UTF-8 sequences split
    delay: float = 0.0  # seconds between pieces
    drop_after: int | None = None  # cut the connection after this many body bytes
    stall_after: int | None = None  # stop sending (until the test ends) after this many
    head_delay: float = 0.0  # seconds to wait before the status line


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    at: float  # time.monotonic() when it arrived


class ReplayServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers: list[Answer] = []
        self.requests: list[Recorded] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-body is what several tests do on purpose

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def script(self, **answer: Any) -> None:
        """Queue the answer to the next unanswered request (fields of ``Answer``)."""
        self.answers.append(Answer(**answer))

    def next_answer(self) -> Answer:
        with self.lock:
            if self.answers:
                return self.answers.pop(0)
        return Answer(status=500, body=b'{"error":{"message":"nothing scripted"}}')


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ReplayServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = Recorded(self.path, headers, json.loads(raw or b"null"), time.monotonic())
        self.server.requests.append(record)
        answer = self.server.next_answer()
        if answer.head_delay and self.server.stop.wait(answer.head_delay):
            return
        if answer.status >= 300:
            self._send_whole(answer)
        else:
            self._send_chunked(answer)

    def _send_whole(self, answer: Answer) -> None:
        self.send_response(answer.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer.body)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(answer.body)

    def _send_chunked(self, answer: Answer) -> None:
        self.send_response(answer.status)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        limit = min(
            x for x in (answer.drop_after, answer.stall_after, len(answer.body)) if x is not None
        )
        for start in range(0, limit, answer.piece):
            piece = answer.body[start : min(start + answer.piece, limit)]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            if answer.delay and self.server.stop.wait(answer.delay):
                return
        if answer.stall_after is not None:
            self.server.stop.wait(30)
            self.close_connection = True
        elif answer.drop_after is not None:
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        else:
            self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback requests must not wander off to a proxy configured on the machine."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fixtures_dir() -> Path:
    """tests/fixtures: the recorded streams and error bodies (origins in its SOURCES.md)."""
    return FIXTURES


@pytest.fixture
def api_key() -> str:
    return API_KEY


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.stop.set()
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def anthropic(server: ReplayServer) -> Iterator[Provider]:
    with anthropic_provider(server.url, API_KEY, timeout=5.0, backoff_base=0.01) as provider:
        yield provider


@pytest.fixture
def openai(server: ReplayServer) -> Iterator[Provider]:
    with openai_provider(f"{server.url}/v1", API_KEY, timeout=5.0, backoff_base=0.01) as provider:
        yield provider


@pytest.fixture
def wires(server: ReplayServer) -> Iterator[dict[str, Provider]]:
    """A provider of every wire format, each pointed at the replay server."""
    from nodecode.providers import make_provider, registry

    made = {
        t: make_provider(
            t,
            base_url=server.url + BASE_PATHS.get(t, "/v1"),
            api_key=API_KEY,
            timeout=5.0,
            backoff_base=0.01,
        )  # fmt: skip
        for t in registry.TYPES
    }
    yield made
    for provider in made.values():
        provider.close()
