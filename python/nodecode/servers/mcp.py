"""MCP servers (Model Context Protocol), through the official ``mcp`` SDK.

A ``Hub`` holds one App's servers: each starts at its first use (a stdio
command, or a streamable-HTTP URL), is kept while the App lives, and is
restarted once if it died. The SDK is asyncio and the core is threaded, so
the hub runs one event loop in a daemon thread of its own; a call waits for
its answer in short slices, so that the turn's stop cancels it at once, and
has a time limit (``mcp_timeout``). Closing the hub (``App.close``, and at the
process's exit) ends every server: the SDK closes its stdin, waits, then
ends its process tree. A server killed with us sees its stdin close.

The SDK weighs about 50 MB and 0.2 s of imports: it is imported only when a
server is used, never by reading the config or by the first ``:Nodecode``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import os
import threading
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodecode.errors import NodecodeError
from nodecode.paths import ensure_dir

START_LIMIT = 30.0  # seconds a server has to start and list its tools
POLL = 0.05  # how often a waiting caller looks at its cancel event
# A streamable-HTTP server's client: the SDK's default timeouts (a response stream
# may stay open for minutes).
HTTP_TIMEOUT, HTTP_READ_TIMEOUT = 30.0, 300.0


class McpError(NodecodeError):
    """An MCP server could not start, died, timed out or refused a call: one line."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured server: a command (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def shown(self) -> str:
        if self.url:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


@dataclass(frozen=True)
class ToolInfo:
    """A tool a server offers: its name, description and arguments (required first)."""

    server: str
    name: str
    description: str
    arguments: tuple[str, ...]
    required: frozenset[str]

    def line(self) -> str:
        """``SERVER/TOOL — description (ARG*, ARG)``: required arguments marked ``*``."""
        args = ", ".join(a + ("*" if a in self.required else "") for a in self.arguments)
        desc = " ".join(self.description.split())
        return f"{self.server}/{self.name} — {desc or '(no description)'}" + (
            f" ({args})" if args else " (no arguments)"
        )


@dataclass
class Outcome:
    """What a call returned, as text: its text content (structured content as JSON
    text when there is no text), and whether the tool said it failed."""

    text: str
    error: bool


@dataclass
class ServerStatus:
    name: str
    state: str  # "not started", "running", "failed", "stopped"
    tools: list[ToolInfo]
    detail: str = ""  # why it failed; the transport


class _Server:
    """One server's connection, living in the hub's loop."""

    def __init__(self, spec: ServerSpec, log: Path) -> None:
        self.spec = spec
        self.log = log
        self.client: Any = None
        self.tools: list[ToolInfo] = []
        self.state = "not started"
        self.detail = ""
        self.starts = 0
        self.stop: asyncio.Event | None = None
        self.task: asyncio.Future[Any] | None = None

    def last_stderr(self) -> str:
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return next((line.strip() for line in reversed(lines) if line.strip()), "")


class Hub:
    """The MCP servers of one App (see the module)."""

    def __init__(self, specs: Mapping[str, ServerSpec], *, timeout: float, logs: Path) -> None:
        self.specs = dict(specs)
        self.timeout = timeout
        self.logs = logs
        self._servers: dict[str, _Server] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        _HUBS.add(self)

    # -- the loop ------------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="nodecode-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _wait(self, coro: Any, limit: float, cancel: threading.Event | None, what: str) -> Any:
        """Run ``coro`` in the loop and wait for it; a stop or the time limit
        cancels it (``cancel`` set: McpError "stopped")."""
        future = asyncio.run_coroutine_threadsafe(coro, self._running_loop())
        deadline = time.monotonic() + limit
        while True:
            try:
                return future.result(timeout=POLL)
            except concurrent.futures.TimeoutError:
                pass
            if cancel is not None and cancel.is_set():
                future.cancel()
                raise McpError(f"{what}: stopped by the person")
            if time.monotonic() >= deadline:
                future.cancel()
                raise McpError(f"{what}: no answer within {limit:g} s (mcp_timeout)")

    # -- servers ---------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self.specs)

    def _server(self, name: str) -> _Server:
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(self.names()) or "none configured"
            raise McpError(f'no MCP server "{name}" (servers: {known})')
        with self._lock:
            server = self._servers.get(name)
            if server is None:
                log = ensure_dir(self.logs) / f"{_file_name(name)}.stderr"
                server = self._servers[name] = _Server(spec, log)
            return server

    def _ready(self, name: str, cancel: threading.Event | None = None) -> _Server:
        """The server, started (or restarted once, after it died)."""
        server = self._server(name)
        if server.state == "running" and server.task is not None and not server.task.done():
            return server
        if server.state == "running":  # its connection ended on its own: it died
            server.state, server.detail = "failed", "the server exited"
        if server.starts >= 2:  # started, and restarted once: no more in this App
            raise McpError(f'MCP server "{name}" {server.detail}' + _tail(server))
        server.starts += 1
        self._wait(self._start(server), START_LIMIT, cancel, f'starting MCP server "{name}"')
        if server.state != "running":
            raise McpError(f'MCP server "{name}" {server.detail}' + _tail(server))
        return server

    async def _start(self, server: _Server) -> None:
        started = asyncio.get_running_loop().create_future()
        server.stop = asyncio.Event()
        server.task = asyncio.ensure_future(self._run(server, started))
        await started

    async def _run(self, server: _Server, started: asyncio.Future[Any]) -> None:
        """Open the server, list its tools, then hold it open until the hub stops it."""
        from mcp import Client

        spec = server.spec
        try:
            with open(server.log, "w", encoding="utf-8") as errlog:
                transport = _transport(spec, errlog)
                async with Client(transport) as client:  # time limits: the waiting side
                    listed = await client.list_tools()
                    server.tools = [_tool(spec.name, t) for t in listed.tools]
                    server.client, server.state, server.detail = client, "running", ""
                    started.set_result(None)
                    assert server.stop is not None
                    await server.stop.wait()
        except BaseException as e:  # noqa: BLE001 - a server's failure is its status, one line
            if not started.done():
                server.state = "failed"
                server.detail = f"could not start ({_one_line(e)})"
                started.set_result(None)
            elif server.state == "running":
                server.state, server.detail = "failed", f"ended ({_one_line(e)})"
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            server.client = None
            if server.state == "running":
                server.state = "stopped"

    # -- what the verbs and the views ask --------------------------------------------

    def tools(
        self, name: str | None = None, cancel: threading.Event | None = None
    ) -> list[ToolInfo]:
        """The tools of one server, or of every server (starting what is not)."""
        out: list[ToolInfo] = []
        for each in [name] if name is not None else self.names():
            out += self._ready(each, cancel).tools
        return out

    def call(
        self,
        name: str,
        tool: str,
        arguments: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> Outcome:
        """Call ``tool`` of server ``name``; McpError for what is no result at all."""
        server = self._ready(name, cancel)
        known = {t.name: t for t in server.tools}
        if tool not in known:
            names = ", ".join(sorted(known)) or "none"
            raise McpError(f'MCP server "{name}" has no tool "{tool}" (its tools: {names})')
        what = f"MCP {name}/{tool}"
        client = server.client
        if client is None:
            raise McpError(f'MCP server "{name}" is not running' + _tail(server))
        try:
            result = self._wait(client.call_tool(tool, arguments), self.timeout, cancel, what)
        except McpError:
            raise
        except Exception as e:  # noqa: BLE001 - the SDK's errors are the call's, one line
            # A tool's own failure is a result (is_error); an exception is the
            # connection's: the server is taken down, and the next use restarts it.
            server.state, server.detail = "failed", f"ended ({_one_line(e)})"
            self._drop(server)
            raise McpError(f"{what}: {_one_line(e)}" + _tail(server)) from None
        return _outcome(result)

    def _drop(self, server: _Server) -> None:
        """End a server's connection (its task closes the transport, ending the process)."""
        loop, stop, task = self._loop, server.stop, server.task
        if loop is None or stop is None or task is None or task.done():
            return

        async def end() -> None:
            stop.set()
            await asyncio.wait([task], timeout=10)

        try:
            asyncio.run_coroutine_threadsafe(end(), loop).result(timeout=15)
        except Exception:  # noqa: BLE001, S110 - what cannot end now ends with the hub
            pass

    def status(self, start: bool = True) -> list[ServerStatus]:
        """Each server: its state, tools and why it failed (``start``: start those
        not yet started, as ``nodecode mcp`` does)."""
        out = []
        for name in self.names():
            server = self._server(name)
            if start:
                try:
                    self._ready(name)
                except McpError as e:
                    server.detail = str(e)
            transport = "http" if server.spec.url else "stdio"
            detail = server.detail or f"{transport}: {server.spec.shown}"
            out.append(ServerStatus(name, server.state, list(server.tools), detail))
        return out

    def close(self) -> None:
        """End every server and the loop (at most a few seconds: the SDK's shutdown)."""
        loop = self._loop
        if loop is None:
            return
        servers = list(self._servers.values())

        async def stop_all() -> None:
            for server in servers:
                if server.stop is not None:
                    server.stop.set()
            tasks = [s.task for s in servers if s.task is not None and not s.task.done()]
            if tasks:
                await asyncio.wait(tasks, timeout=10)

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(timeout=15)
        except Exception:  # noqa: BLE001, S110 - closing: what cannot end now ends with us
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._loop = None
        _HUBS.discard(self)


# Every live hub, so that the process's exit ends their servers (a CLI that
# returns without closing its App, an exception unwinding past it).
_HUBS: weakref.WeakSet[Hub] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for hub in list(_HUBS):
        hub.close()


def _transport(spec: ServerSpec, errlog: Any) -> Any:
    if spec.url:
        return _http_transport(spec.url, dict(spec.headers))
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=spec.command or "", args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd
    )
    return stdio_client(params, errlog=errlog)


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the server's ``headers`` on every request. The SDK
    takes headers only on an HTTP client of the caller's, which the caller closes:
    one like the SDK's own (its timeouts), closed when the transport is."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _tool(server: str, tool: Any) -> ToolInfo:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    given = schema.get("properties")
    properties = given if isinstance(given, dict) else {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    names = list(required) + [p for p in properties if p not in required]
    return ToolInfo(server, tool.name, tool.description or "", tuple(names), frozenset(required))


def _outcome(result: Any) -> Outcome:
    parts = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            size = len(item.data) * 3 // 4
            parts.append(f"[{kind}: {item.mime_type}, about {size} bytes, not shown]")
        elif kind == "resource":
            resource = item.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {item.uri}]")
    text = "\n".join(parts)
    structured = getattr(result, "structured_content", None)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, indent=2)
    return Outcome(text, bool(getattr(result, "is_error", False)))


def _one_line(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        return _one_line(e.exceptions[0])
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _tail(server: _Server) -> str:
    last = server.last_stderr()
    return f"; its stderr ends: {last[:300]}" if last else ""


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "server"


def specs_of(raw: Mapping[str, Any], cwd: Path) -> dict[str, ServerSpec]:
    """Server specs from config.jsonc's ``mcp_servers`` (or a ``.mcp.json``'s
    ``mcpServers``), already checked by the config schema; ``cwd`` resolves a
    relative working directory."""
    out = {}
    for name, spec in raw.items():
        env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
        cwd_of = spec.get("cwd")
        out[name] = ServerSpec(
            name=name,
            command=spec.get("command"),
            args=tuple(str(a) for a in spec.get("args") or ()),
            env=env,
            cwd=os.fspath(cwd / cwd_of) if cwd_of else None,
            url=spec.get("url"),
            headers={str(k): str(v) for k, v in (spec.get("headers") or {}).items()},
        )
    return out


def project_file(cwd: Path) -> Path | None:
    """The project's ``.mcp.json`` (Claude Code's format): the nearest one from the
    cwd up to the repository root (the nearest folder holding ``.git``)."""
    for folder in [cwd, *cwd.parents]:
        candidate = folder / ".mcp.json"
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists():
            return None
    return None
