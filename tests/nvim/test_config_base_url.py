"""An empty base_url in config.jsonc, seen from Neovim: the first command that
reads the config says one line naming the provider, what was expected and what
was found, and no request is sent (nor retried)."""

from __future__ import annotations

import json

from .conftest import chat, configure, wait_for
from .ui_helpers import notes, notified

LINE = 'config.jsonc: providers.loopback.base_url must be an http:// or https:// URL or null (found "")'


def empty_base_url(home, server) -> None:
    configure(home, server)
    config = home / "config.jsonc"
    data = json.loads(config.read_text().split("\n", 1)[1])
    data["providers"]["loopback"]["base_url"] = ""
    config.write_text(json.dumps(data))


def test_an_ask_with_an_empty_base_url_is_one_line_and_no_request(nvim, home, loopback):
    server = loopback([{"text": "never sent"}])
    empty_base_url(home, server)
    notified(nvim)

    nvim.command("Nodecode hello")

    said = wait_for(lambda: [n for n in notes(nvim) if "base_url" in n])
    assert said == [f"nodecode: {LINE}"], notes(nvim)
    assert server.requests == []


def test_an_empty_base_url_written_while_neovim_runs_is_one_line(nvim, home, loopback):
    server = loopback([{"text": "first"}, {"text": "never sent"}])
    configure(home, server)
    notified(nvim)
    nvim.command("Nodecode hello")
    wait_for(lambda: len(server.requests) == 1)
    wait_for(lambda: "first" in chat(nvim))
    empty_base_url(home, server)

    nvim.command("Nodecode again")

    said = wait_for(lambda: [n for n in notes(nvim) if "base_url" in n], timeout=20)
    assert said == [f"nodecode: {LINE}"], notes(nvim)
    assert len(server.requests) == 1
