"""A loopback model provider: a real local HTTP server speaking the Anthropic
Messages, OpenAI Chat Completions, OpenAI Responses and Gemini wire formats,
replying from a script.

It serves the tests (a real socket, real SSE framing, real error bodies) and
the demo (``make demo`` without an API key). Endpoints: ``POST /v1/messages``
(SSE or JSON), ``POST /v1/chat/completions`` (SSE or JSON),
``POST /v1/responses`` (SSE or JSON, ``responses``),
``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` (``gemini``),
``POST /v1/messages/count_tokens`` and ``GET /health``.

A script is a list of rounds (or a JSONL file of them): ``{"text": ...,
"calls": [{"code": "(read-file \\"a.txt\\")"} | {"name": ..., "input": {...}}],
"match"?: "substring"}``. Each model request takes the first remaining round
whose ``match`` (if any) is in the request's last user text, and whose
``match_ask`` (if any) is in its newest ask (its newest user text whose first
line is not in square brackets: not a notice or stub); rounds skipped for not
matching stay for later requests, and a ``"keep": true`` round stays when
taken. Rejected and faulted requests take no round. The script queue, token
counting and the simulated Anthropic prompt cache live in ``script``,
``tokens`` and ``cache``; the wire formats in ``wire``; Anthropic's cache
diagnostics (the beta header and ``diagnostics.previous_message_id``) in
``diagnostics``. ``usage_scale`` stands for the provider's tokenizer: reported
usage, count_tokens and the ``window`` check all use round(counted * scale).
``reported_input`` stands for a gateway whose usage is wrong: every reply
reports that many prompt tokens, none of them cached, whatever was counted (the
``window`` check and count_tokens still count). The cache's entries expire on
``clock`` (a ``cache.Clock`` the tests and benches advance); ``cache_rules``
picks the readings where Anthropic's docs are silent and ``cache_min_tokens``
overrides every model's minimum.

Faults (``{"at": N, "kind": ...}``) hit the N-th model request (1-based,
counting only the model endpoints, faulted requests included); a fault
added without ``at`` hits the next model request. Kinds: an HTTP status
("429", "529", "500", ...; ``retry_after`` sets the header, ``should_retry``
the x-should-retry one), "drop" (part of the stream, then the connection
closes without the terminal chunk), "stall" (part of the stream, ``seconds``
of silence, then the same close),
"sse_error" (part of the stream, then the provider's in-stream error),
"garbage" (part of the stream, then lines that are not SSE and data that is
not JSON, then a clean end of body; without streaming, a body that is not JSON),
"ping" (part of the stream, then a keep-alive every ``every`` seconds, 0.2 by
default, until the client goes: Anthropic's ``ping`` event, a ``: ping``
comment in the other formats) and "drip" (part of the stream, then one
character of reply text every ``every`` seconds, forever; Anthropic and chat
completions, after a text block began).
``message`` replaces the text of an HTTP status's or an ``sse_error``'s error.

Run it alone with ``python -m nodecode.loopback --script FILE``: it prints
its URL on one line and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import socketserver
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nodecode.loopback import gemini, responses
from nodecode.loopback.cache import (
    CacheControlError,
    CacheRules,
    CacheUsage,
    Clock,
    PromptCache,
    breakpoints,
    scale_parts,
)
from nodecode.loopback.diagnostics import Diagnoses
from nodecode.loopback.prefix import PrefixCache
from nodecode.loopback.replies import (
    ANTHROPIC,
    GOOGLE,
    OPENAI,
    RESPONSES,
    SSE_TYPE,
    Reply,
    endless_frame,
    error_reply,
    json_reply,
    openai_error,
    overflow_reply,
    stream_error_frame,
)
from nodecode.loopback.script import (
    Round,
    ScriptQueue,
    last_user_text,
    load_script,
    newest_ask,
    parse_round,
)
from nodecode.loopback.thinking import (
    CANNOT_MODIFY,
    DEEPSEEK_NEEDS_REASONING,
    EXPECTED_THINKING,
    ThinkingLedger,
    reasoning_refusal,
)
from nodecode.loopback.tokens import (
    Block,
    anthropic_blocks,
    anthropic_tokens,
    openai_units,
)
from nodecode.loopback.wire import (
    anthropic_events,
    anthropic_frame,
    anthropic_reply,
    openai_chunks,
    openai_frame,
    openai_reply,
    output_tokens,
)

__all__ = [
    "CANNOT_MODIFY",
    "DEEPSEEK_NEEDS_REASONING",
    "EXPECTED_THINKING",
    "LoopbackServer",
    "Recorded",
    "Reply",
    "main",
]

MODEL_ROUTES = (ANTHROPIC, OPENAI, RESPONSES, GOOGLE)
STREAM_KINDS = ("drop", "stall", "sse_error", "garbage", "ping", "drip")
ENDLESS_KINDS = ("ping", "drip")
GARBAGE_FRAMES = [
    b"this line is not server-sent events\n",
    b"\x00\xff\xfe\r\n",
    b'data: {"type": "content_block_delta", "delta": {"text": "cut\n\n',
]
_ROUTES = {
    ("POST", "/v1/messages"): ANTHROPIC,
    ("POST", "/v1/chat/completions"): OPENAI,
    ("POST", "/v1/responses"): RESPONSES,
    ("POST", "/v1/messages/count_tokens"): "count_tokens",
    ("GET", "/health"): "health",
}

_GEMINI_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):streamGenerateContent$")


def _route_of(method: str, path: str) -> tuple[str | None, str | None]:
    """The endpoint a request is for, and the model its path names (Gemini's)."""
    found = _GEMINI_PATH.match(path) if method == "POST" else None
    if found:
        return GOOGLE, found["model"]
    return _ROUTES.get((method, path)), None


# ---------------------------------------------------------------- replies and errors


@dataclass
class Recorded:
    """One received request: ``headers`` keys are lower-case; ``usage`` is what
    the reply reported (input, output, cache_read, cache_write and its split
    cache_write_1h + cache_write_5m; zeros for errors)."""

    path: str
    headers: dict[str, str]
    body: dict
    status: int
    usage: dict = field(default_factory=dict)


def _flavor_of(path: str) -> str:
    if "/responses" in path:
        return RESPONSES
    if path.startswith("/v1beta/"):
        return GOOGLE
    return OPENAI if "chat" in path else ANTHROPIC


# ---------------------------------------------------------------- the server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    loopback: LoopbackServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn, a reverse DNS lookup that can hang.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.host_port()

    def host_port(self) -> tuple[str, int]:
        """The (host, port) it is bound to, as the socket names it (a str host)."""
        host, port = self.server_address[:2]
        assert isinstance(host, str), f"getsockname() gave host {host!r}"
        return host, port


class LoopbackServer:
    """The loopback provider; ``start()`` serves it on a daemon thread."""

    def __init__(
        self,
        script: list[dict] | str | os.PathLike | None = None,
        *,
        window: int | None = None,
        cache: bool = True,
        cache_min_tokens: int | None = None,
        cache_rules: CacheRules | None = None,
        clock: Clock | None = None,
        faults: list[dict] | None = None,
        chunk_delay: float = 0.0,
        usage_scale: float = 1.0,
        reported_input: int | None = None,
        reasoning_field: str = "reasoning_content",
        reasoning_required: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.window, self.chunk_delay, self.usage_scale = window, chunk_delay, usage_scale
        self.reported_input = reported_input
        self.reasoning_field, self.reasoning_required = reasoning_field, reasoning_required
        self.thinking = ThinkingLedger()
        self.reasoning = responses.ReasoningLedger()
        self.signatures = gemini.SignatureLedger()
        self.diagnoses = Diagnoses()  # Anthropic's cache diagnostics (``diagnostics``)
        self.host, self.port = host, port
        self.requests: list[Recorded] = []
        rules = cache_rules or CacheRules()
        if cache_min_tokens is not None:
            rules = dataclasses.replace(rules, min_tokens=cache_min_tokens)
        self.clock = clock or Clock()
        self.prefix = PrefixCache(cache_min_tokens, self.clock)
        self.cache = PromptCache(rules, self.clock) if cache else None
        self._script = ScriptQueue(load_script(script))
        self._faults: list[dict] = []
        self._lock = threading.Lock()
        self._index = 0  # model requests received
        self._next_tool = 1
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        for fault in faults or []:
            self.add_fault(fault)

    # -- lifecycle

    def start(self) -> LoopbackServer:
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = _HTTPServer((self.host, self.port), _Handler)
            self._httpd.loopback = self
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                name="nodecode-loopback", daemon=True,
            )  # fmt: skip
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; stalled and delayed streams end at once."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join()
            self._httpd = self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the loopback server is not started (call start())")
        host, port = self._httpd.host_port()
        return f"http://{host}:{port}"

    # -- script, faults, records

    def add_rounds(self, rounds: list[dict]) -> None:
        parsed = [parse_round(r, "added round") for r in rounds]
        with self._lock:
            self._script.rounds.extend(parsed)

    @property
    def rounds_left(self) -> int:
        with self._lock:
            return len(self._script.rounds)

    def add_fault(self, fault: dict) -> None:
        """Add a fault; without ``at`` it hits the next model request, with ``match``
        the first whose last user text holds that text."""
        kind = str(fault.get("kind", ""))
        if not (kind.isdigit() or kind in STREAM_KINDS):
            raise ValueError(
                f"fault kind must be an HTTP status or one of {STREAM_KINDS} (got {kind!r})"
            )
        with self._lock:
            self._faults.append(
                {
                    **fault,
                    "kind": kind,
                    "at": None if fault.get("match") else int(fault.get("at", self._index + 1)),
                }
            )

    @property
    def model_requests(self) -> list[Recorded]:
        """The recorded requests to the model endpoints."""
        with self._lock:
            return [r for r in self.requests if _route_of("POST", r.path)[0] in MODEL_ROUTES]

    def respond(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        """Decide the reply to one request and record it."""
        route, path_model = _route_of(method, path)
        body: Any = {}
        if route == "health":
            reply = Reply(200, b"ok", content_type="text/plain; charset=utf-8")
        elif route is None:
            reply = error_reply(_flavor_of(path), 404, f"Not found: {method} {path}")
        else:
            index = self._count_request() if route in MODEL_ROUTES else 0
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError(f"the body must be a JSON object (got {type(body).__name__})")
            except ValueError as exc:
                reply, body = error_reply(_flavor_of(path), 400, f"malformed JSON body: {exc}"), {}
            else:  # Gemini names the model in the path; the reply wants it in hand
                sent = body if path_model is None else {**body, "model": path_model}
                reply = self._route(route, sent, index, headers)
        with self._lock:
            self.requests.append(Recorded(path, headers, body, reply.status, reply.usage))
        return reply

    def _route(self, route: str, body: dict, index: int, headers: dict[str, str]) -> Reply:
        if route == "count_tokens":
            return json_reply(
                200, {"input_tokens": round(anthropic_tokens(body) * self.usage_scale)}
            )
        fault = self._fault_for(index, body)
        if fault is not None:
            return self._fault_reply(route, fault, body, index)
        return self._model_reply(route, body, index, headers)

    def _count_request(self) -> int:
        with self._lock:
            self._index += 1
            return self._index

    def _fault_for(self, index: int, body: dict) -> dict | None:
        """The fault at this request's ``index``, or the first ``match`` fault whose
        text is in its last user text (hit once, then dropped)."""
        with self._lock:
            found = next((f for f in self._faults if f["at"] == index), None)
            if found is None:
                last = last_user_text(body)
                found = next(
                    (f for f in self._faults if f.get("match") and f["match"] in last), None
                )
                if found is not None:
                    self._faults.remove(found)
            return found

    # -- model replies

    def _thinking_refusal(self, flavor: str, body: dict) -> Reply | None:
        """The API's 400 for thinking that was not sent back as received."""
        if flavor == ANTHROPIC:
            message = self.thinking.refusal(body)
            return error_reply(ANTHROPIC, 400, message) if message else None
        if flavor == GOOGLE:
            message = self.signatures.refusal(body)
            return error_reply(GOOGLE, 400, message) if message else None
        if flavor == RESPONSES:
            refused = self.reasoning.refusal(body)
            if refused is None:
                return None
            text, param, code = refused
            return json_reply(400, openai_error(400, text, param, code))
        message = reasoning_refusal(body, self.reasoning_field) if self.reasoning_required else None
        if message is None:
            return None
        return json_reply(400, openai_error(400, message, None, "invalid_request_error"))

    def _model_reply(self, flavor: str, body: dict, index: int, headers: dict[str, str]) -> Reply:
        refused = self._thinking_refusal(flavor, body)
        if refused is not None:
            return refused
        if flavor == ANTHROPIC and (message := self.diagnoses.refusal(headers, body)):
            return error_reply(ANTHROPIC, 400, message)
        blocks: list[Block] = anthropic_blocks(body) if flavor == ANTHROPIC else []
        try:
            points = breakpoints(blocks, body.get("cache_control")) if flavor == ANTHROPIC else []
        except CacheControlError as exc:
            return error_reply(ANTHROPIC, 400, str(exc))
        units = [] if flavor == ANTHROPIC else _units(flavor, body)  # counted once, unlocked
        total = sum(b.tokens for b in blocks) + sum(t for _, t in units)
        scaled = round(total * self.usage_scale)
        if self.window is not None and scaled > self.window:
            return overflow_reply(flavor, scaled, self.window)
        with self._lock:
            rnd = self._script.take(last_user_text(body), newest_ask(body))
            first_id = self._next_tool
            self._next_tool += len(rnd.calls)
            model = str(body.get("model") or "")
            cache = CacheUsage()
            if self.cache is not None and points:
                cache = self.cache.apply(model, blocks, points, self.usage_scale)
            if flavor != ANTHROPIC and self.cache is not None:
                cache = CacheUsage(read=self.prefix.apply(model, units))
        usage = self._usage(total, cache, rnd)
        if flavor != ANTHROPIC:  # their input counts the cached part too
            usage["input"] += usage["cache_read"]
        return self._render(flavor, body, rnd, first_id, usage, index, headers)

    def _usage(self, total: int, cache: CacheUsage, rnd: Round) -> dict:
        uncached, read, long, short = scale_parts(total, cache, self.usage_scale)
        if self.reported_input is not None:
            uncached, read, long, short = self.reported_input, 0, 0, 0
        return {
            "input": uncached, "output": output_tokens(rnd), "cache_read": read,
            "cache_write": long + short, "cache_write_1h": long, "cache_write_5m": short,
        }  # fmt: skip

    def _render(
        self,
        flavor: str,
        body: dict,
        rnd: Round,
        first_id: int,
        usage: dict,
        index: int,
        headers_in: dict[str, str] | None = None,  # None: a fault's partial reply
    ) -> Reply:
        model = str(body.get("model") or "loopback")
        stream = bool(body.get("stream"))
        if flavor == ANTHROPIC:
            msg_id, headers = f"msg_loopback{index}", {"request-id": f"req_loopback{index}"}
            thinking = self.thinking.sign(rnd)
            self.thinking.answered(thinking, bool(rnd.calls))
            diagnosed = self.diagnoses.answer(headers_in or {}, body, msg_id, self.usage_scale)
            if stream:
                events = anthropic_events(rnd, first_id, model, msg_id, usage, thinking)
                if diagnosed is not None:  # the response's, on message_start's message
                    events[0]["message"]["diagnostics"] = diagnosed
                frames = [anthropic_frame(e) for e in events]
                return Reply(
                    200, frames=frames, content_type=SSE_TYPE, headers=headers, usage=usage
                )
            reply = anthropic_reply(rnd, first_id, model, msg_id, usage, thinking)
            if diagnosed is not None:
                reply["diagnostics"] = diagnosed
            return json_reply(200, reply, headers, usage)
        if flavor == RESPONSES:
            return self._responses(body, rnd, first_id, model, usage, index)
        if flavor == GOOGLE:
            events = gemini.gemini_events(rnd, model, f"lb{index}", usage, self.signatures)
            frames = [gemini.frame(e) for e in events]
            return Reply(200, frames=frames, content_type=SSE_TYPE, usage=usage)
        cid, field = f"chatcmpl-lb{index}", self.reasoning_field
        if stream:
            with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = openai_chunks(rnd, first_id, model, cid, usage, with_usage, field)
            return Reply(
                200, frames=[openai_frame(c) for c in chunks], content_type=SSE_TYPE, usage=usage
            )
        return json_reply(200, openai_reply(rnd, first_id, model, cid, usage, field), None, usage)

    def _responses(
        self, body: dict, rnd: Round, first_id: int, model: str, usage: dict, index: int
    ) -> Reply:
        items = self.reasoning.issue(rnd)
        self.reasoning.answered(items, bool(rnd.calls))
        rid = f"resp_lb{index}"
        events = responses.responses_events(rnd, first_id, model, rid, body, usage, items)
        if body.get("stream"):
            frames = [responses.frame(e) for e in events]
            return Reply(200, frames=frames, content_type=SSE_TYPE, usage=usage)
        return json_reply(200, events[-1]["response"], None, usage)

    def _fault_reply(self, flavor: str, fault: dict, body: dict, index: int) -> Reply:
        kind = fault["kind"]
        headers = {"retry-after": str(fault["retry_after"])} if "retry_after" in fault else {}
        message = fault.get("message")
        if "should_retry" in fault:
            headers["x-should-retry"] = "true" if fault["should_retry"] else "false"
        if kind.isdigit():
            return error_reply(flavor, int(kind), message, headers=headers)
        streams = flavor == GOOGLE or bool(body.get("stream"))  # Gemini's is by its URL
        if kind == "sse_error" and not streams:
            return error_reply(flavor, 529, message, headers=headers)
        if kind == "garbage" and not streams:
            return Reply(200, b"{not json at all", headers=headers)
        # The partial reply shows the round that would come next, without taking it.
        total = anthropic_tokens(body) if flavor == ANTHROPIC else _tokens(flavor, body)
        with self._lock:
            rnd, first_id = (
                self._script.peek(last_user_text(body), newest_ask(body)),
                self._next_tool,
            )
        reply = self._render(
            flavor, body, rnd, first_id, self._usage(total, CacheUsage(), rnd), index
        )
        stall = float(fault.get("seconds", 10.0)) if kind == "stall" else 0.0
        if reply.frames is None:
            reply.cut, reply.abort, reply.stall = len(reply.body) // 2, True, stall
            return reply
        frames = reply.frames
        cut = int(fault.get("after", max(1, min(len(frames) // 2, len(frames) - 2))))
        if kind == "sse_error":
            reply.frames = [*frames[:cut], stream_error_frame(flavor, message)]
        elif kind in ENDLESS_KINDS:
            every = float(fault.get("every", 0.2))
            reply.frames, reply.endless = frames[:cut], (endless_frame(flavor, kind), every)
        elif kind == "garbage":
            reply.frames = [*frames[:cut], *GARBAGE_FRAMES]
        else:
            reply.frames, reply.abort, reply.stall = frames[:cut], True, stall
        return reply


def _tokens(flavor: str, body: dict) -> int:
    """Counted input tokens of a body of a format without breakpoints."""
    return sum(tokens for _, tokens in _units(flavor, body))


def _units(flavor: str, body: dict) -> list[tuple[str, int]]:
    if flavor == OPENAI:
        return openai_units(body)
    return (responses if flavor == RESPONSES else gemini).prompt_units(body)


# ---------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; SSE bodies are chunked, one flushed chunk per event."""

    protocol_version = "HTTP/1.1"
    # Small SSE writes must leave at once: with Nagle's algorithm a kept-alive
    # connection waits ~40 ms for the client's delayed ACK on every request.
    disable_nagle_algorithm = True
    server_version = "nodecode-loopback/1"
    timeout = 120  # idle keep-alive connections are closed after this
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # tests and the demo keep stderr for their own output

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.server.loopback.respond(method, self.path.split("?", 1)[0], headers, raw)
        try:
            self._send(reply)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-reply

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("content-type", reply.content_type)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.frames is None:
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body if reply.cut is None else reply.body[: reply.cut])
        else:
            self._send_frames(reply)
        if reply.abort:
            self.server.loopback._stopping.wait(reply.stall)
            self._abort()

    def _send_frames(self, reply: Reply) -> None:
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        delay, stopping = self.server.loopback.chunk_delay, self.server.loopback._stopping
        for i, frame in enumerate(reply.frames or []):
            if i and delay:
                stopping.wait(delay)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        if reply.endless is not None:  # until the client goes or the server stops
            frame, every = reply.endless
            while not stopping.wait(every):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
            self.close_connection = True
            return
        if not reply.abort:
            self.wfile.write(b"0\r\n\r\n")

    def _abort(self) -> None:
        """Close mid-body: the client sees an incomplete chunked (or sized) body."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


# ---------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """``python -m nodecode.loopback``: print the URL, serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(
        prog="python -m nodecode.loopback", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--script", help="JSONL file of rounds")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--window", type=int, default=None, help="context window in tokens")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between SSE events")
    parser.add_argument("--usage-scale", type=float, default=1.0)
    parser.add_argument(
        "--cache-min-tokens", type=int, default=None, help="default: the model's minimum"
    )
    args = parser.parse_args(argv)
    try:
        server = LoopbackServer(
            args.script, window=args.window, chunk_delay=args.chunk_delay, host=args.host,
            port=args.port, usage_scale=args.usage_scale, cache_min_tokens=args.cache_min_tokens,
        )  # fmt: skip
    except (OSError, ValueError) as exc:
        print(f"loopback: {exc}", file=sys.stderr)
        return 1
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    with server:
        print(server.url, flush=True)
        while not done.wait(0.5):
            pass
    return 0
