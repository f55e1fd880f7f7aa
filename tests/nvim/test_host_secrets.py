"""The chat never shows a key split across streamed deltas (issue 11.4): the host's
text events carry the same redacted stream as the command line's stdout."""

from __future__ import annotations

import json

import pytest

from .conftest import wait_for
from .test_host import start

KEY = "sk-ant-nodecode-SECRET-7f3a9c2e51d04b88"
MARK = "[redacted:ANTHROPIC_API_KEY]"


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_the_chat_events_never_carry_a_key_split_across_deltas(
    home, workspace, loopback, monkeypatch, ptype
):
    srv = loopback([{"chunks": [f"key {KEY[:10]}", KEY[10:25], f"{KEY[25:]} ok {KEY[:7]}"]}])
    base = srv.url if ptype == "anthropic" else srv.url + "/v1"
    provider = {"type": ptype, "base_url": base, "api_key_env": "ANTHROPIC_API_KEY"}
    home.mkdir(parents=True)
    config = {"provider": "keyed", "model": "m", "providers": {"keyed": provider}}
    (home / "config.jsonc").write_text(json.dumps(config))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    host, port = start()

    host.ask({"home": str(home), "cwd": str(workspace)}, "hi")

    assert wait_for(port.done)["status"] == "done"
    texts = [e["text"] for e in port.events if e["kind"] == "text"]
    assert "".join(texts) == f"key {MARK} ok {KEY[:7]}"
    assert all(KEY[:12] not in json.dumps(e) for e in port.events)
    assert srv.model_requests[0].headers.get("x-api-key", KEY) == KEY
