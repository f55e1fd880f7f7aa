"""Helpers the tests share: a home wired to a loopback server, and the real CLI."""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
import sys
import time
from pathlib import Path

from nodecode.loopback import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"  # recorded provider bytes; origins in SOURCES.md
WIRES = ("anthropic", "openai", "openai-responses", "google")  # every wire format
BASE_PATHS = {"anthropic": "", "google": "/v1beta"}  # what a base_url adds (else /v1)


def write_config(
    home: Path,
    server: LoopbackServer,
    ptype: str = "anthropic",
    models: list[dict] | None = None,
    **extra,
) -> Path:
    """Point a home at ``server`` speaking the ``ptype`` wire format (``models``: the
    provider's ``models`` entries, e.g. a ``thinking`` setting)."""
    base = server.url + BASE_PATHS.get(ptype, "/v1")
    provider = {"type": ptype, "base_url": base, "api_key_env": None}
    if models is not None:
        provider["models"] = models
    config = {
        "provider": "loopback",
        "model": "loopback-model",
        "providers": {"loopback": provider},
        **extra,
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text("// test config\n" + json.dumps(config, indent=2))
    return home


def run_cli_on_a_terminal(
    home: Path, workspace: Path, answer: str, *args: str
) -> subprocess.CompletedProcess:
    """Run the real `nodecode` CLI with a pseudo-terminal as stdin holding ``answer``
    (a line): what a person at a terminal types at its prompt."""
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode() + b"\n")
        env = {k: v for k, v in os.environ.items() if k != "NODECODE_SESSION"}
        cmd = [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace)]
        return subprocess.run(
            [*cmd, *args], stdin=slave, capture_output=True, text=True, env=env, timeout=60
        )
    finally:
        os.close(slave)
        os.close(master)


def run_cli(
    *args: str,
    home: Path,
    cwd: Path | None = None,
    env: dict | None = None,
    input: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """Run the real `nodecode` CLI in a subprocess."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("NODECODE_SESSION",)}
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "nodecode", "--home", str(home)]
    if cwd is not None:
        cmd += ["--cwd", str(cwd)]
    return subprocess.run(
        cmd + list(args), capture_output=True, text=True, env=full_env, input=input, timeout=timeout
    )


def ask(home: Path, workspace: Path, text: str, **env: str) -> subprocess.CompletedProcess:
    """`nodecode ask text` in ``workspace``, which must succeed (``env``: extra variables)."""
    done = run_cli("ask", text, home=home, cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    return done


def session_titles(home: Path, workspace: Path) -> dict[str, str]:
    """Every session's title by its id, as `nodecode sessions --json` lists them."""
    out = run_cli("sessions", "--json", home=home, cwd=workspace).stdout
    return {r["id"]: r["title"] for r in json.loads(out)}


def wait_for_request(server: LoopbackServer, n: int = 1, limit: float = 30.0) -> None:
    """Wait until ``server`` has received its ``n``-th model request: the CLI's reply
    is streaming then (into a pipe `nodecode ask` writes each reply only once its
    request has ended, so stdout cannot tell)."""
    end = time.monotonic() + limit
    while len(server.model_requests) < n:
        assert time.monotonic() < end, f"the loopback never received model request {n}"
        time.sleep(0.01)


def anthropic_provider(base_url: str | None, api_key: str | None, **kw):
    """A provider speaking the Anthropic wire format (what config type "anthropic" makes)."""
    from nodecode.providers import make_provider

    return make_provider("anthropic", base_url=base_url, api_key=api_key, **kw)


def openai_provider(base_url: str | None, api_key: str | None, **kw):
    """A provider speaking OpenAI chat completions (config type "openai")."""
    from nodecode.providers import make_provider

    return make_provider("openai", base_url=base_url, api_key=api_key, **kw)


def read_request(conn: socket.socket) -> bytes:
    """The whole HTTP request read off ``conn`` (a server's side, plain or TLS):
    its head, then content-length bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(1 << 16)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(1 << 16)
    return head + b"\r\n\r\n" + body
