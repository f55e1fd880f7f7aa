"""The HTTP machinery every provider shares: POST, stream, retry, cancel.

A ``Provider`` speaks one ``WireFormat`` (``providers.wire``), which names the
URL, headers and streaming flags, and the StreamParser that turns one
attempt's events into a Reply. Retries follow the SDKs'
policy (providers.md §1.8): 408/409/429/5xx and dropped streams, honouring
``retry-after-ms`` / ``retry-after`` (capped at 60 s), else
``min(base * 2**n, 8 s)`` less up to 25 % jitter. Each attempt's I/O runs in
a daemon thread (see _Pump) so that a cancel returns at once even while a
read is blocked, and closes the connection whatever the request is waiting
on (``providers.transport``).

Besides the read timeout (silence), a request has two limits (``_Limits``):
``request_timeout``, the seconds the whole request may take, retries included,
and ``idle_timeout``, the seconds an attempt may go without content. Keep-alives
(Anthropic's ``ping`` events, ``:`` comment lines) are not content, so a server
that sends them forever, or drips a character at a time, still ends.
"""

from __future__ import annotations

import codecs
import email.utils
import functools
import os
import queue
import random
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, Self

import httpx

from nodecode.errors import ContextOverflow, ProviderError, ProviderFailed
from nodecode.providers.overflow import unwrap_error
from nodecode.providers.sse import EventReader, LineSplitter, ServerSentEvent
from nodecode.providers.transport import Stopper, Transport, shut_down
from nodecode.providers.types import Reply, encode_body
from nodecode.providers.wire import StreamParser, TextSink, WireFormat

MAX_RETRY_AFTER = 60.0
MAX_BACKOFF = 8.0
CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 600.0  # seconds a whole request may take, retries included
IDLE_TIMEOUT = 120.0  # seconds an attempt may go without content (keep-alives are none)
_POLL = 0.05  # how often a waiting caller looks at its cancel event
_SPEND_LIMIT = "enforced_spend_limit_reached"


def tls_context(url: str) -> ssl.SSLContext:
    """The TLS context a client of ``url`` verifies servers with. Loading the CA
    certificates costs 20-60 ms, so it is done once per process, and not at all
    for a plain-http URL (a local server) with no proxy in the environment: its
    client gets a context with no CA at all, which refuses any TLS peer."""
    if url.startswith("http://") and not urllib.request.getproxies():
        return _no_ca_context()
    return _verified_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _verified_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """httpx's default (certifi's CAs, or $SSL_CERT_FILE / $SSL_CERT_DIR, which
    key the cache): one context shared by every client, as TLS contexts may be."""
    return httpx.create_ssl_context()


@functools.cache
def _no_ca_context() -> ssl.SSLContext:
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifying, with nothing to verify against


def _stoppable(context: ssl.SSLContext) -> Transport | None:
    """The transport a stop reaches in every phase, or None (httpx's own) when
    the environment names a proxy: httpx routes through one (and honours
    NO_PROXY) only with its own transports, whose rules are not copied here.
    httpx reads the environment through the same ``getproxies``."""
    proxies = urllib.request.getproxies()
    return None if any(proxies.get(k) for k in ("http", "https", "all")) else Transport(context)


class Provider:
    """One model endpoint speaking ``wire``: ``stream(body)`` POSTs a complete wire
    body and returns a Reply."""

    def __init__(
        self,
        wire: WireFormat,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        name: str | None = None,
        request_timeout: float = REQUEST_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.wire = wire
        self.request_timeout, self.idle_timeout = request_timeout, idle_timeout
        self.name = name or wire.type  # the provider's id in config.jsonc: what errors begin with
        self.base_url = (base_url or wire.default_base_url).rstrip("/")
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self._api_key = api_key or None
        # Every key nodecode knows (the App's redactor), not only this provider's:
        # an error may quote another provider's key, or this one's encoded.
        self._redactor = redact
        _WORKERS.prestart()
        context = tls_context(self.base_url)
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
            transport=transport or _stoppable(context),
            verify=context,
        )

    def url(self, model: str = "") -> str:
        return self.wire.url(self.base_url, model)

    # -- the shared part ----------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stream(
        self,
        body: dict[str, Any],
        *,
        on_text: TextSink | None = None,
        cancel: threading.Event | None = None,
        on_retry: Callable[[str], None] | None = None,
        on_thinking: TextSink | None = None,
        on_open: Callable[[], None] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """Stream one reply, retrying transient failures; a cancel returns the partial reply.
        ``on_open`` runs when an attempt's answer starts to arrive (the model is at work);
        ``headers`` are the request's own (``Built.headers``), beside the wire format's."""
        cancel = cancel or threading.Event()
        payload = self.wire.stream_body(body)
        url = self.url(str(body.get("model") or ""))
        headers = {**self.wire.headers(self._api_key), **(headers or {})}
        retries = 0
        limits = _Limits(self.request_timeout, self.idle_timeout)
        while True:
            parser = self.wire.parser(on_text, on_thinking)
            try:
                reply = self._attempt(url, headers, payload, parser, cancel, on_open, limits)
            except ProviderError as exc:
                delay = self._retry_delay(exc, retries)
                if on_retry is not None:
                    on_retry(self._redact(f"retrying in {delay:.1f} s: {exc}"))
                if not cancel.wait(min(delay, limits.remaining())):
                    retries += 1
                    continue
                # Stopped while waiting to retry: the failed attempt's text went
                # with it (the caller was told so), so the partial reply is empty.
                reply = self.wire.parser(None, None).partial()
            reply.retries = retries
            return reply

    def _retry_delay(self, exc: ProviderError, retries: int) -> float:
        """Seconds to wait before retrying ``exc``; raises it when it must not be retried."""
        if not exc.retryable:
            raise self._public(exc) from None
        if retries >= self.max_retries:
            raise self._gave_up(exc, retries) from None
        return self._delay(retries, exc.retry_after)

    def _attempt(
        self,
        url: str,
        headers: dict[str, str],
        wire: dict[str, Any],
        parser: StreamParser,
        cancel: threading.Event,
        on_open: Callable[[], None] | None = None,
        limits: _Limits | None = None,
    ) -> Reply:
        """One POST read to its end; raises ProviderError (retryable or not)."""
        limits = limits or _Limits(self.request_timeout, self.idle_timeout)
        limits.attempt()
        pump = _Pump(self._client, url, headers, wire)
        frames = _Frames(parser, cancel, limits)
        try:
            for text in pump.body(cancel, self._http_error, limits.check):
                if on_open is not None:
                    on_open()
                    on_open = None
                if frames.feed(text):
                    break
            else:
                frames.feed(None)
            if parser.finished:
                return parser.reply()
            if cancel.is_set():
                return parser.partial()
            if not parser.complete:
                raise ProviderError(f"stream ended before {parser.terminal}", retryable=True)
            return parser.reply()
        except _Cancelled:
            return parser.partial()
        finally:
            if not parser.finished:  # a finished body drains so its connection is reused
                pump.abort()

    # -- errors -------------------------------------------------------------------

    def _http_error(self, status: int, headers: httpx.Headers, body: str) -> ProviderError:
        """The error a non-2xx answer stands for; overflow first, since it never heals."""
        overflow = self.wire.overflow(status, body)
        if overflow is not None:
            return overflow
        kind, message = _summary(body)
        reason = (
            f"HTTP {status}" + (f" {kind}" if kind else "") + (f": {message}" if message else "")
        )
        return ProviderError(
            reason,
            status=status,
            retryable=_should_retry(status, headers, body),
            retry_after=_retry_after(headers),
        )

    def _public(self, exc: ProviderError) -> ProviderError:
        """The same error with the provider's name in front and no key in it."""
        message = self._redact(f"{self.name}: {exc}")
        if isinstance(exc, ContextOverflow):
            return ContextOverflow(
                message, status=exc.status, maximum=exc.maximum, prompt=exc.prompt
            )
        return type(exc)(
            message, status=exc.status, retryable=exc.retryable, retry_after=exc.retry_after
        )

    def _gave_up(self, exc: ProviderError, retries: int) -> ProviderFailed:
        message = self._redact(f"{self.name}: still failing after {retries} retries: {exc}")
        return ProviderFailed(message, status=exc.status)

    def _redact(self, message: str) -> str:
        """One line, bounded, never holding the API key nor, given a redactor, any
        key it knows in any form it blanks. Every line this class makes (the retry
        line, the final error) passes here."""
        if self._redactor is not None:
            message = self._redactor(message)
        if self._api_key:
            message = message.replace(self._api_key, "***")
        message = " ".join(message.split())
        return message if len(message) <= 400 else message[:399] + "…"

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER)
        return min(self.backoff_base * 2**attempt, MAX_BACKOFF) * (1 - 0.25 * random.random())


class _Limits:
    """A request's time limits: the whole request's deadline, and the time since
    its current attempt last brought content (``check`` raises past either)."""

    def __init__(self, request_timeout: float, idle_timeout: float) -> None:
        self.request_timeout, self.idle_timeout = request_timeout, idle_timeout
        self.deadline = time.monotonic() + request_timeout
        self.content_at = time.monotonic()

    def attempt(self) -> None:
        """An attempt starts: its idle time counts from now."""
        self.content_at = time.monotonic()

    def content(self) -> None:
        self.content_at = time.monotonic()

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def check(self) -> None:
        now = time.monotonic()
        if now >= self.deadline:
            raise ProviderError(
                f"no whole answer within the request_timeout ({self.request_timeout:g} s)"
            )
        if now - self.content_at >= self.idle_timeout:
            raise ProviderError(
                f"no content within the idle_timeout ({self.idle_timeout:g} s): "
                "the stream brought only keep-alives",
                retryable=True,
            )


def _keepalive(event: ServerSentEvent) -> bool:
    """Whether an event is a keep-alive (Anthropic's ``ping``), not content."""
    return event.event == "ping" or event.data.replace(" ", "") == '{"type":"ping"}'


class _Frames:
    """Body text → lines → events → parser, stopping at the terminal event or a cancel."""

    def __init__(
        self, parser: StreamParser, cancel: threading.Event, limits: _Limits | None = None
    ) -> None:
        self._parser = parser
        self._cancel = cancel
        self._limits = limits
        self._lines = LineSplitter()
        self._events = EventReader()

    def feed(self, text: str | None) -> bool:
        """Feed decoded text (None at end of body); True once reading should stop."""
        lines = self._lines.feed(text) if text is not None else self._lines.flush()
        for line in lines:
            if self._send(self._events.feed_line(line)):
                return True
        return text is None and self._send(self._events.finish())

    def _send(self, events: list[ServerSentEvent]) -> bool:
        for event in events:
            if self._limits is not None and not _keepalive(event):
                self._limits.content()
            self._parser.feed(event)
            if self._parser.finished or self._cancel.is_set():
                return True
        return False


class _Cancelled(Exception):
    """The caller's cancel event was set while waiting for the server."""


class _Workers:
    """Daemon threads kept for the pumps: a request starts no thread of its own
    (a thread start costs milliseconds on a busy machine, on the path to the
    first token), and a stalled request never holds the interpreter's exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]]] = (
            queue.SimpleQueue()
        )
        self._idle = 0
        self._lock = threading.Lock()

    def prestart(self) -> None:
        with self._lock:
            if self._idle == 0:
                self._spawn()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        with self._lock:
            if self._idle == 0:
                self._spawn()
            self._idle -= 1
        self._jobs.put((fn, args))

    def _spawn(self) -> None:
        self._idle += 1
        threading.Thread(target=self._loop, name=IDLE, daemon=True).start()

    def _loop(self) -> None:
        me = threading.current_thread()
        while True:
            fn, args = self._jobs.get()
            me.name = BUSY  # a busy pump is visible by name (tests wait for it to end)
            try:
                fn(*args)
            except BaseException:  # noqa: BLE001 - a pump reports through its queue
                pass
            del fn, args  # an idle pump keeps nothing of the request it sent
            me.name = IDLE
            with self._lock:
                self._idle += 1


BUSY, IDLE = "nodecode-provider", "nodecode-provider-idle"


_WORKERS = _Workers()


class _Sent(httpx.SyncByteStream):
    """A request's body, which the pump empties once the reply is read: httpx's
    request and response refer to each other, a cycle only the collector's rare
    full pass frees, and until then each kept the body it sent (megabytes each,
    late in a long session; doc/design.md "Decisions", the host's memory)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self.data


class _Pump:
    """Runs one POST in a daemon thread and hands its body over a queue.

    The caller waits on the queue in short slices, so a set cancel returns at
    once whether the server is slow to answer or stalls mid-body. ``abort``
    ends the request in every phase (connecting, sending, waiting for the
    status line, reading the body): the request's ``Stopper`` shuts down the
    socket the thread blocks on, so the thread wakes and goes idle and the
    server sees the connection close. With a transport of the caller's (tests)
    or httpx's own (a proxy), nothing is reached before the response headers;
    from them on ``abort`` shuts the response's socket down.
    """

    def __init__(
        self, client: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]
    ) -> None:
        self._queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._response: httpx.Response | None = None
        self._aborted = threading.Event()
        self._stopper = Stopper()
        _WORKERS.submit(self._run, client, url, headers, body)

    def _run(
        self, client: httpx.Client, url: str, headers: dict[str, str], body: dict[str, Any]
    ) -> None:
        sent = None
        end: tuple[str, Any]
        try:
            content = encode_body(body)  # here, as httpx's json= would: its errors alike
            headers = {**headers, "content-type": "application/json"}
            request = client.build_request("POST", url, headers=headers)
            request.headers["content-length"] = str(len(content))
            request.stream = sent = _Sent(content)
            del body, content
            with self._stopper.running():
                end = self._exchange(client, request)
        except Exception as exc:  # noqa: BLE001 - handed to the caller's thread, which decides
            end = ("exc", exc)
        finally:
            if sent is not None:
                sent.data = b""  # before the caller hears the end
        self._put(*end)

    def _exchange(self, client: httpx.Client, request: httpx.Request) -> tuple[str, Any]:
        """Send, queue the body's bytes, and return the end to report: reported
        once the request's I/O is over, so a later abort finds nothing to stop."""
        response = self._response = client.send(request, stream=True)
        try:
            if response.status_code >= 300:
                response.read()
                return "status", (response.status_code, response.headers, response.text)
            for chunk in response.iter_bytes():
                if self._aborted.is_set():
                    return "aborted", None
                self._put("bytes", chunk)
            return "eof", None
        finally:
            response.close()

    def _put(self, kind: str, value: Any) -> None:
        if not self._aborted.is_set():
            self._queue.put((kind, value))

    def body(
        self,
        cancel: threading.Event,
        http_error: Callable[[int, httpx.Headers, str], ProviderError],
        check: Callable[[], None] | None = None,
    ) -> Iterator[str]:
        """The body as decoded text; raises ProviderError for a failed status or
        transport, or (``check``) a time limit passed."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            kind, value = self._next(cancel, check)
            if kind == "bytes":
                text = decoder.decode(value)
                if text:
                    yield text
            elif kind == "eof":
                tail = decoder.decode(b"", final=True)
                if tail:
                    yield tail
                return
            elif kind == "status":
                raise http_error(*value)
            else:
                raise _transport_error(value)

    def _next(
        self, cancel: threading.Event, check: Callable[[], None] | None = None
    ) -> tuple[str, Any]:
        while True:
            if cancel.is_set():
                raise _Cancelled
            if check is not None:
                check()
            try:
                return self._queue.get(timeout=_POLL)
            except queue.Empty:
                continue

    def abort(self) -> None:
        """Stop the thread: wake whatever it blocks on by shutting its socket down."""
        self._aborted.set()
        self._stopper.stop()
        response = self._response
        if response is None or response.is_closed:
            return  # before the headers (see the class), or the connection went back to the pool
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            shut_down(sock)


def _transport_error(exc: BaseException) -> BaseException:
    """A retryable ProviderError for a dropped or timed-out connection; other errors as they are."""
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError)):
        return ProviderError(f"cannot send the request: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(f"timed out ({type(exc).__name__})", retryable=True)
    if isinstance(exc, httpx.ConnectError):  # no connection was made: nothing dropped
        detail = str(exc) or type(exc).__name__
        return ProviderError(
            f"cannot connect to {_server(exc)}: {detail} (is the server running, and its "
            "base_url right?)",
            retryable=True,
        )
    if isinstance(exc, (httpx.TransportError, OSError)):
        detail = str(exc) or "connection closed"
        return ProviderError(f"connection dropped: {type(exc).__name__}: {detail}", retryable=True)
    return exc


def _server(exc: httpx.ConnectError) -> str:
    """The scheme, host and port the request went to (no path, no query: no key)."""
    try:
        url = exc.request.url
    except RuntimeError:  # raised outside a request: no URL to name
        return "the provider"
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}"


def _summary(body: str) -> tuple[str, str]:
    """An error body's kind (type or code) and message, for a one-line report."""
    message, fields = unwrap_error(body)
    kind = fields.get("type") or fields.get("code") or ""
    kind = kind if isinstance(kind, str) and kind != "error" else ""
    return kind, message[:300]


def _should_retry(status: int, headers: httpx.Headers, body: str) -> bool:
    """The SDKs' rule, except that a spent budget never heals by waiting."""
    if _SPEND_LIMIT in body:
        return False
    hint = headers.get("x-should-retry", "").lower()
    if hint in ("true", "false"):
        return hint == "true"
    return status in (408, 409, 429) or status >= 500


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, then ``retry-after``)."""
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after", "")
    seconds = _seconds(value)
    if seconds is not None or not value:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _seconds(value: str | None) -> float | None:
    """A non-negative number, or None (NaN and words included)."""
    try:
        number = float(value or "")
    except ValueError:
        return None
    return number if number >= 0 else None
