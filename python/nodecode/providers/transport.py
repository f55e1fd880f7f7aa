"""An httpx transport whose requests a stop ends in every phase.

httpx's own transport hands out a request's socket only with the response
headers, so a stop while connecting, sending or waiting for the status line
left the request's thread blocked, and the provider at work on it, until the
server answered or the read timeout passed. ``Transport`` is httpcore's
connection pool (keep-alive, TLS with the given context) over a network
backend whose streams tell the calling thread's ``Stopper`` which socket it
is about to block on: ``Stopper.stop`` shuts that socket down, which wakes a
blocked connect, TLS handshake, send or read at once, and the server sees
the connection close (doc/design.md "Decisions", a stop ends the request).
Only public httpx and httpcore interfaces are used: ``httpx.BaseTransport``,
``httpcore.ConnectionPool(network_backend=...)``, ``httpcore.NetworkBackend``
and ``httpcore.NetworkStream`` (httpcore 1.x, which httpx 0.27 and 0.28 need).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

_local = threading.local()


class Stopper:
    """One request's stop, for the thread that runs it (inside ``running``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._stopped = False

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The calling thread's network I/O belongs to this request until the
        block ends; a stop after it touches no socket (the connection may be back
        in the pool, serving another request)."""
        _local.stopper = self
        try:
            yield
        finally:
            _local.stopper = None
            with self._lock:
                self._sock = None

    def stop(self) -> None:
        """End the request: shut down the socket it blocks on, and refuse the next."""
        with self._lock:  # held while shutting down, so ``running`` cannot end meanwhile
            self._stopped = True
            if self._sock is not None:
                shut_down(self._sock)

    def use(self, sock: socket.socket) -> None:
        """``sock`` is the one the request blocks on next; raises once stopped."""
        with self._lock:
            if self._stopped:
                raise _Stopped("the request was stopped")
            self._sock = sock


class _Stopped(ConnectionAbortedError):
    """Raised instead of blocking on a socket once the request was stopped."""


def _use(sock: socket.socket) -> None:
    stopper: Stopper | None = getattr(_local, "stopper", None)
    if stopper is not None:
        stopper.use(sock)


def shut_down(sock: socket.socket) -> None:
    """Shut the connection down both ways. Called as ``socket.socket``'s own:
    an SSLSocket's would also drop its TLS object under the blocked thread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # closed already, or never connected: nothing left to wake


@contextlib.contextmanager
def _mapped(timeout: type[Exception], error: type[Exception]) -> Iterator[None]:
    """The socket errors of one kind of I/O as httpcore's, as its own backend raises them."""
    try:
        yield
    except TimeoutError as exc:
        raise timeout(exc) from exc
    except OSError as exc:
        raise error(exc) from exc


class _Stream(httpcore.NetworkStream):
    """httpcore's sync stream over one socket, telling the thread's Stopper
    before every call that may block."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _mapped(httpcore.ReadTimeout, httpcore.ReadError):
            _use(self._sock)
            self._sock.settimeout(timeout)
            return self._sock.recv(max_bytes)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _mapped(httpcore.WriteTimeout, httpcore.WriteError):
            _use(self._sock)
            view = memoryview(buffer)  # a body of megabytes is not copied per send
            while view:
                self._sock.settimeout(timeout)
                view = view[self._sock.send(view) :]

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        if isinstance(self._sock, ssl.SSLSocket):  # only through an https proxy: never here
            raise httpcore.ConnectError("TLS inside TLS is not supported")
        plain, tls = self._sock, None
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            try:
                plain.settimeout(timeout)
                tls = ssl_context.wrap_socket(
                    plain, server_hostname=server_hostname, do_handshake_on_connect=False
                )
                _use(tls)  # the plain socket was detached: the handshake blocks on this one
                tls.do_handshake()
            except BaseException:
                (plain if tls is None else tls).close()
                raise
        return _Stream(tls)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":  # what httpcore asks it: selected_alpn_protocol()
            return self._sock if isinstance(self._sock, ssl.SSLSocket) else None
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "socket":
            return self._sock
        if info == "is_readable":  # an idle pooled connection the server closed
            return _readable(self._sock)
        return None


def _readable(sock: socket.socket) -> bool:
    if sock.fileno() < 0:
        return True
    if hasattr(select, "poll"):  # select() fails on a descriptor past FD_SETSIZE
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


class _Backend(httpcore.NetworkBackend):
    """httpcore's sync backend, with streams a Stopper reaches from the connect on."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        source = None if local_address is None else (local_address, 0)
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            sock = _connect(host, port, timeout, source)
            try:
                for option in socket_options or ():
                    sock.setsockopt(*option)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except BaseException:
                sock.close()
                raise
        return _Stream(sock)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:  # a Transport never names a unix socket
        return httpcore.SyncBackend().connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _connect(
    host: str, port: int, timeout: float | None, source: tuple[str, int] | None
) -> socket.socket:
    """``socket.create_connection``, telling the thread's Stopper of each socket
    before it connects (a shutdown wakes a connect waiting for the server)."""
    error: OSError | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            if source is not None:
                sock.bind(source)
            _use(sock)
            sock.connect(address)
            return sock
        except _Stopped:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            error = exc
    raise error or OSError(f"no address found for {host}")


# httpcore's errors as httpx's, the most specific first (httpx's own table).
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core, mapped in _ERRORS:
            if isinstance(exc, core):
                raise mapped(str(exc)) from exc
        raise


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _httpx_errors():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class Transport(httpx.BaseTransport):
    """``httpx.HTTPTransport`` without a proxy (HTTP/1.1, httpx's default
    limits), over the backend a Stopper reaches."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=_Backend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.SyncByteStream):
            raise TypeError("a sync transport needs a sync request body")
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_errors():
            response = self._pool.handle_request(core)
        if not isinstance(response.stream, Iterable):
            raise TypeError("httpcore's sync pool gave an async body")
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()
