"""A small MCP server of our own (the SDK's MCPServer, stdio), for what the
reference servers do not do on demand: errors, crashes, slow calls, structured
results, stray output before the handshake. Run: python toolbox.py [--noisy].

``--http TOKEN``: the same tools over streamable HTTP on 127.0.0.1 (a free
port, printed as the first stdout line), answering only requests that carry
``Authorization: Bearer TOKEN`` (others get a 401), as a remote server would."""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("toolbox")


@server.tool()
def echo(text: str, times: int = 1, loud: bool = False) -> str:
    """Repeat TEXT (TIMES times; LOUD: upper case)."""
    out = " ".join([text] * times)
    return out.upper() if loud else out


@server.tool()
def fail(why: str) -> str:
    """Always fails, saying WHY."""
    raise ValueError(f"refused: {why}")


@server.tool()
def crash() -> str:
    """Ends the server's process mid-call."""
    print("toolbox: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def slow(seconds: float) -> str:
    """Answers after SECONDS."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def shape(width: int, height: int) -> dict:
    """The area of a WIDTH × HEIGHT rectangle, as structured content."""
    return {"width": width, "height": height, "area": width * height}


@server.tool()
def secret() -> str:
    """Returns the value of $TOOLBOX_TOKEN (a key the config gave the server)."""
    return f"token is {os.environ.get('TOOLBOX_TOKEN', '')}"


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


def serve_http(token: str) -> None:
    import socket

    import uvicorn

    app = server.streamable_http_app()
    wanted = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != wanted:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"toolbox: no bearer token"})
            return
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http(sys.argv[sys.argv.index("--http") + 1])
        sys.exit(0)
    if "--noisy" in sys.argv:
        print("toolbox: starting up, this line breaks the protocol")
        sys.stdout.flush()
    if "--broken" in sys.argv:
        print("toolbox: cannot start: missing TOOLBOX_CONFIG", file=sys.stderr, flush=True)
        sys.exit(2)
    server.run()
