"""A model server for the benchmarks that never parses what it is sent.

It reads each request's ``Content-Length`` bytes and drops them, then streams
the next round of its script as an Anthropic Messages SSE reply (text deltas,
then ``tool_use`` blocks), cycling through the script. So the time it takes
does not depend on the body: a 1.2 MB request costs it what a 12 kB one does
(the loopback provider parses and counts every body, which swings by tens of
ms at 2,000 messages and would hide a 25 ms bar). Reported usage is a fixed
proxy (input = body bytes ÷ 4); nothing is cached.

Run in its own process, so its work never holds the measured process's GIL:

    python bench/_sse_server.py --script ROUNDS.jsonl [--save DIR] [--timings FILE]

It prints its URL on one line and serves until killed. ``--script`` is JSONL
of ``{"text": str, "calls": [cell code, ...]}``; ``--save DIR`` writes each
body to DIR/N.json after its reply (to record what a client sends);
``--timings FILE`` appends one line per request, ``N MS``: the ms from its
request line read to its reply's last byte written (the server's own time,
which a client's wall time less it leaves as the client's).
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import socketserver
import sys
import threading
import time
from pathlib import Path
from typing import Any

CHUNK = 40  # characters per text delta


def frame(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def reply_frames(rnd: dict[str, Any], body_bytes: int, n: int, first_tool: int) -> list[bytes]:
    """One round as the Messages stream events a real reply carries, framed."""
    text, calls = str(rnd.get("text") or ""), list(rnd.get("calls") or [])
    usage = {
        "input_tokens": body_bytes // 4,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
    }
    message = {
        "id": f"msg_bench{n}",
        "type": "message",
        "role": "assistant",
        "model": "loopback-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    index = 0
    if text:
        events.append(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
        for i in range(0, len(text), CHUNK):
            delta = {"type": "text_delta", "text": text[i : i + CHUNK]}
            events.append({"type": "content_block_delta", "index": 0, "delta": delta})
        events.append({"type": "content_block_stop", "index": 0})
        index = 1
    for k, code in enumerate(calls):
        block = {"type": "tool_use", "id": f"toolu_bench{first_tool + k}", "name": "eval"}
        events.append(
            {"type": "content_block_start", "index": index, "content_block": block | {"input": {}}}
        )
        delta = {"type": "input_json_delta", "partial_json": json.dumps({"code": code})}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    output = max(1, len(text) // 4 + 20 * len(calls))
    stop = "tool_use" if calls else "end_turn"
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {**usage, "output_tokens": output},
        }
    )
    events.append({"type": "message_stop"})
    return [frame(e) for e in events]


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, rounds: list[dict[str, Any]], save: Path | None, timings: Path | None = None
    ) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.rounds = itertools.cycle(rounds)
        self.save = save
        self.timings = timings
        self.lock = threading.Lock()
        self.served = 0
        self.tools = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-reply is no error worth a traceback."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def next_round(self) -> tuple[dict[str, Any], int, int]:
        with self.lock:
            rnd = next(self.rounds)
            self.served += 1
            first = self.tools
            self.tools += len(rnd.get("calls") or [])
            return rnd, self.served, first


class Handler(socketserver.StreamRequestHandler):
    """HTTP/1.1 with keep-alive: head, the body read and dropped, the reply."""

    server: Server

    def setup(self) -> None:
        super().setup()
        # Small SSE writes must leave at once (no Nagle wait on a kept-alive socket).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        while True:
            head = self.rfile.readline(65537)
            if not head:
                return
            started = time.perf_counter()
            method, path = (head.decode("latin-1").split() + ["", ""])[:2]
            length = 0
            while True:
                line = self.rfile.readline(65537)
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = self.rfile.read(length) if self.server.save else None
            if body is None and not self.drop(length):
                return
            if method == "POST" and path.split("?")[0] == "/v1/messages":
                n = self.stream(length, body)
                if self.server.timings is not None:
                    ms = (time.perf_counter() - started) * 1000
                    with self.server.timings.open("a", encoding="utf-8") as out:
                        out.write(f"{n} {ms:.3f}\n")
            else:
                self.plain(404 if path != "/health" else 200, b"ok" if path == "/health" else b"{}")

    def drop(self, length: int) -> bool:
        """Read ``length`` bytes and forget them; False when the client went away."""
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 20))
            if not chunk:
                return False
            length -= len(chunk)
        return True

    def plain(self, status: int, data: bytes) -> None:
        self.wfile.write(
            b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status, len(data), data)
        )

    def stream(self, length: int, body: bytes | None) -> int:
        rnd, n, first = self.server.next_round()
        if body is not None and self.server.save is not None:
            # Saved before the reply: whoever reads it after the reply sees it whole.
            (self.server.save / f"{n}.json").write_bytes(body)
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        for data in reply_frames(rnd, length, n, first):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")
        return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--script", required=True, help="JSONL of rounds {text, calls}")
    parser.add_argument("--save", help="write each request body to DIR/N.json")
    parser.add_argument("--timings", help="append each request's N and server ms to FILE")
    args = parser.parse_args(argv)
    lines = Path(args.script).read_text(encoding="utf-8").splitlines()
    rounds = [json.loads(line) for line in lines if line.strip()]
    if not rounds:
        print(f"_sse_server: {args.script} holds no rounds", file=sys.stderr)
        return 1
    save = Path(args.save) if args.save else None
    timings = Path(args.timings) if args.timings else None
    with Server(rounds, save, timings) as server:
        host, port = server.server_address[:2]
        print(f"http://{host}:{port}", flush=True)
        server.serve_forever(poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
