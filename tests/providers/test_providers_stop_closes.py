"""A stop closes the provider's connection at once, whatever phase the request is in.

The server here is the network edge itself: a raw TCP listener on 127.0.0.1
that accepts (or not) and says only what the test scripts, then watches its
end of the connection. Every limit the request would otherwise end at is far
off (10 s to connect or shake hands, a 30 s read timeout), so only the stop
can close the connection, or free the provider's thread, within ``SOON``.
The provider stays open while the test watches: closing it closes its
connections, which is not what a stop in a running session does.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import FIXTURES, openai_provider, read_request
from nodecode.providers.http import Provider

SOON = 3.0  # seconds the server and the provider's thread get to see the stop
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'


class Edge:
    """A listener whose one accepted connection gets ``answer``; once the
    answer is given (``reached``) it watches the connection until it closes."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        # A small window (set before listening, so connections inherit it): what
        # the server does not read soon holds the client's send.
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.reached = threading.Event()
        self.seen: tuple[str, int] | None = None  # how the connection ended, bytes read after

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.listener.getsockname()[1]}/v1"

    def serve(self, answer: Callable[[socket.socket], object]) -> None:
        def run() -> None:
            conn, _ = self.listener.accept()
            with conn:
                answer(conn)
                self.reached.set()
                self.seen = _watch(conn)

        threading.Thread(target=run, daemon=True).start()

    def seen_within(self, seconds: float) -> tuple[str, int] | None:
        deadline = time.monotonic() + seconds
        while self.seen is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.seen


def _watch(conn: socket.socket) -> tuple[str, int]:
    """Read until the client closes: ("eof" | "reset" | "open", bytes read)."""
    conn.settimeout(0.1)
    total, deadline = 0, time.monotonic() + SOON + 2
    while time.monotonic() < deadline:
        try:
            data = conn.recv(1 << 16)
        except TimeoutError:
            continue
        except OSError:
            return "reset", total
        if not data:
            return "eof", total
        total += len(data)
    return "open", total


@pytest.fixture
def edge() -> Iterator[Edge]:
    made = Edge()
    yield made
    made.listener.close()


def _busy() -> set[int | None]:
    """The provider threads running a request now (a busy pump is named so)."""
    return {t.ident for t in threading.enumerate() if t.name == "nodecode-provider"}


def _idle_within(seconds: float, busy_before: set[int | None]) -> bool:
    """Whether every pump this test set busy is idle again within ``seconds``."""
    deadline = time.monotonic() + seconds
    while _busy() - busy_before:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _stopped(provider: Provider, when: threading.Event, body: dict[str, Any] = BODY) -> float:
    """Stream ``body``, stopping it 0.2 s after ``when`` is set; the seconds the
    stream took to return after the stop. The reply must be a stopped one."""
    cancel, stopped_at = threading.Event(), []

    def stop() -> None:
        when.wait(10)
        time.sleep(0.2)
        stopped_at.append(time.monotonic())
        cancel.set()

    threading.Thread(target=stop, daemon=True).start()
    reply = provider.stream(body, cancel=cancel)
    assert reply.stopped
    return time.monotonic() - stopped_at[0]


def _provider(url: str) -> Provider:
    return openai_provider(url, "sk-test", timeout=30.0, max_retries=0)


def test_a_stop_before_the_status_line_closes_the_connection_the_server_holds(
    edge: Edge,
) -> None:
    edge.serve(read_request)  # the request arrives; no answer ever leaves
    busy_before = _busy()

    with _provider(edge.url()) as provider:
        returned = _stopped(provider, edge.reached)

        assert returned < 1.0
        assert edge.seen_within(SOON) == ("eof", 0), "the server still holds the connection"
        assert _idle_within(SOON, busy_before), "the provider's thread still waits for the answer"


def test_a_stop_while_the_request_is_sent_closes_the_connection(edge: Edge) -> None:
    # The server reads nothing until the stop, so a body larger than both ends'
    # buffers blocks the provider's thread in its send.
    size = 24 << 20
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * size}]}
    sending, returned = threading.Event(), threading.Event()
    edge.serve(lambda conn: returned.wait(10))  # then reads what the provider sent
    busy_before = _busy()

    with _provider(edge.url()) as provider:
        threading.Timer(0.3, sending.set).start()
        _stopped(provider, sending, body)
        returned.set()

        seen = edge.seen_within(SOON)
        assert seen is not None and seen[0] in ("eof", "reset"), "the server still holds it"
        assert seen[1] < size, "the whole body was sent after the stop"
        assert _idle_within(SOON, busy_before), "the provider's thread still sends"


def test_a_stop_during_the_tls_handshake_closes_the_connection(edge: Edge) -> None:
    edge.serve(lambda conn: conn.recv(1 << 16))  # the client's hello; no answer ever leaves
    busy_before = _busy()

    with _provider(edge.url("https")) as provider:
        _stopped(provider, edge.reached)

        assert edge.seen_within(SOON) == ("eof", 0), "the server still holds the connection"
        assert _idle_within(SOON, busy_before), "the provider's thread still shakes hands"


def test_a_stop_mid_body_closes_the_connection(edge: Edge) -> None:
    def answer(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(HEAD + b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))

    edge.serve(answer)
    busy_before = _busy()

    with _provider(edge.url()) as provider:
        _stopped(provider, edge.reached)

        assert edge.seen_within(SOON) == ("eof", 0), "the server still holds the connection"
        assert _idle_within(SOON, busy_before), "the provider's thread still reads the body"


def test_a_stop_while_connecting_ends_the_connect() -> None:
    # A listener whose accept queue is full and never served: the kernel drops
    # the provider's SYNs, so its connect waits (up to its 10 s limit), retrying.
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    fillers = _fill_the_queue(listener)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    busy_before = _busy()
    connecting = threading.Event()
    connecting.set()

    try:
        with _provider(url) as provider:
            returned = _stopped(provider, connecting)

            assert returned < 1.0
            assert _idle_within(SOON, busy_before), "the provider's thread still connects"
            # With the queue served, a connect still under way gets in at its next
            # retry (1 s, then 3 s after the first) and sends its request: none may.
            for filler in fillers:
                filler.close()
            assert _requests_within(listener, SOON) == 0, "the stopped connect went on"
    finally:
        listener.close()


def _fill_the_queue(listener: socket.socket) -> list[socket.socket]:
    """Connect to ``listener`` until a connect no longer completes at once."""
    address, fillers = listener.getsockname(), []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(address)
        fillers.append(filler)
        if not select.select([], [filler], [], 0.3)[1]:
            return fillers
    pytest.fail("the kernel accepted every connect: no queue to fill")


def _requests_within(listener: socket.socket, seconds: float) -> int:
    """How many connections the listener accepts within ``seconds`` that send
    something (the closed fillers send nothing)."""
    listener.settimeout(0.1)
    count, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        with conn:
            conn.settimeout(1.0)
            count += bool(conn.recv(1 << 16))
    return count


def _answer(conn: socket.socket, stream: bytes) -> bytes:
    """Read one request and answer it with ``stream`` as one chunked body; the request."""
    request = read_request(conn)
    conn.sendall(HEAD + b"%x\r\n%s\r\n0\r\n\r\n" % (len(stream), stream))
    return request


def test_requests_one_after_another_share_one_connection(edge: Edge) -> None:
    stream = (FIXTURES / "openai_text_stream.sse").read_bytes()

    def answer_two(conn: socket.socket) -> None:
        _answer(conn, stream)
        _answer(conn, stream)

    edge.serve(answer_two)

    # A second connection would never be accepted: its read times out in 3 s.
    with openai_provider(edge.url(), "sk-test", timeout=3.0, max_retries=0) as provider:
        first, second = provider.stream(BODY), provider.stream(BODY)

    assert first.text == second.text != ""
    assert edge.seen_within(SOON) == ("eof", 0)


def test_a_proxy_in_the_environment_still_carries_the_request(
    edge: Edge, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = (FIXTURES / "openai_text_stream.sse").read_bytes()
    heard: list[bytes] = []
    edge.serve(lambda conn: heard.append(_answer(conn, stream)))
    monkeypatch.setenv("HTTP_PROXY", edge.url().removesuffix("/v1"))

    with openai_provider("http://provider.invalid/v1", "sk-test", timeout=5.0) as provider:
        reply = provider.stream(BODY)

    assert reply.text != ""
    assert heard[0].startswith(b"POST http://provider.invalid/v1/chat/completions HTTP/1.1")
