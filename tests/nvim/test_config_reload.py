"""A changed config.jsonc is read again (its mtime or size changed): the
running host never shows a stale window or source."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .conftest import configure, wait_for
from .ui_helpers import notes, notified


def with_window(home: Path, srv, window: int) -> Path:
    model = {"id": "loopback-model", "context_window": window}
    provider = {"type": "anthropic", "base_url": srv.url, "api_key_env": None, "models": [model]}
    return configure(home, srv, providers={"loopback": provider}) / "config.jsonc"


def rewrite(path: Path, window: int) -> None:
    """The same file with another window, the same size; its mtime set one second
    on so the change is seen however coarse the filesystem's clock is."""
    before = path.stat()
    config = json.loads(path.read_text().split("\n", 1)[1])
    config["providers"]["loopback"]["models"][0]["context_window"] = window
    path.write_text("// nvim test config\n" + json.dumps(config, indent=2))
    assert path.stat().st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))


def test_budget_and_status_follow_an_edited_config(nvim, home, loopback):
    path = with_window(home, loopback([]), 8000)
    notified(nvim)
    nvim.command("NodecodeBudget")
    first = wait_for(lambda: [n for n in notes(nvim) if "window:" in n])
    assert "window: 8000 tokens (config.jsonc)" in first[0]

    rewrite(path, 7000)
    nvim.command("NodecodeBudget")

    shown = wait_for(lambda: [n for n in notes(nvim) if "window:" in n][1:])
    assert "window: 7000 tokens (config.jsonc)" in shown[0], shown
    status = nvim.exec_lua("return require('nodecode.rpc').call('status')")
    assert status["window"] == 7000 and status["source"] == "config.jsonc"
