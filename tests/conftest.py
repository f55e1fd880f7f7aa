"""Shared fixtures: a nodecode home wired to a loopback provider server, and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, run_cli, write_config  # noqa: F401
from nodecode.loopback import LoopbackServer


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def loopback():
    servers: list[LoopbackServer] = []

    def start(script=None, **kw) -> LoopbackServer:
        srv = LoopbackServer(script, **kw).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop()
