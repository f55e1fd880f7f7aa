"""Progress: the User autocommands a statusline or fidget follows, in order
with their data, and the live indicator in the chat and in status()."""

from __future__ import annotations

import re

import pytest
from helpers import write_config

from .conftest import chat, wait_for

SPINNER = "[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]"
RECORD = """
    _G.fired = {}
    vim.api.nvim_create_autocmd('User', {
      pattern = { 'NodecodeRequestStarted', 'NodecodeRequestFinished',
                  'NodecodeTurnFinished', 'NodecodeContextTaken' },
      callback = function(ev) table.insert(_G.fired, { name = ev.match, data = ev.data }) end,
    })
"""


def status(nv) -> str:
    return nv.exec_lua("return require('nodecode').status()")


def shown(nv) -> str | None:
    return nv.exec_lua("return require('nodecode.ui.progress').shown()")


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_the_autocommands_fire_in_order_with_their_data(nvim, home, workspace, loopback, ptype):
    srv = loopback(
        [{"calls": [{"code": '(context :note "remember the plan")'}]}, {"text": "Noted."}],
        cache_min_tokens=1,
    )
    write_config(home, srv, ptype)
    nvim.exec_lua(RECORD)

    nvim.command("Nodecode keep a note")

    fired = wait_for(
        lambda: (
            (f := nvim.exec_lua("return _G.fired"))
            and f[-1]["name"] == "NodecodeTurnFinished"
            and f
        )
    )
    assert [f["name"] for f in fired] == [
        "NodecodeRequestStarted",
        "NodecodeRequestFinished",
        "NodecodeContextTaken",
        "NodecodeRequestStarted",
        "NodecodeRequestFinished",
        "NodecodeTurnFinished",
    ]
    job = fired[0]["data"]["job"]
    started = fired[0]["data"]
    assert started == {"job": job, "round": 1, "provider": "loopback", "model": "loopback-model"}
    for f, sent in zip((fired[1], fired[4]), srv.model_requests, strict=True):
        data = f["data"]
        assert data["status"] == "done" and data["job"] == job
        assert data["usage"]["output"] == sent.usage["output"]
        assert data["usage"]["cache_read"] == data["cache_read"] == sent.usage["cache_read"]
        assert data["usage"]["input"] == sent.usage["input"] and isinstance(data["seq"], int)
    taken = fired[2]["data"]
    assert taken["job"] == job and taken["refused"] is False
    assert taken["receipt"].startswith("[[receipt default/") and "noted 1" in taken["receipt"]
    assert fired[5]["data"] == {"job": job, "status": "done", "turn": 1}


def test_the_chat_and_status_show_a_spinner_mid_stream_then_nothing(nvim, home, loopback):
    reply = "A long answer " + " ".join(f"w{i}" for i in range(40))
    srv = loopback([{"text": reply}], faults=[{"at": 1, "kind": "stall", "seconds": 30}])
    write_config(home, srv, max_retries=0)

    nvim.command("Nodecode tell me")

    text = wait_for(lambda: (s := shown(nvim)) and "streaming" in s and s)
    assert re.fullmatch(rf" {SPINNER} streaming · \d+\.\ds", text), text
    streamed = chat(nvim).split("## nodecode\n")[1]
    assert streamed and reply.startswith(streamed)  # mid-stream: part of the reply is in
    assert re.match(rf"{SPINNER} streaming · \d+\.\ds", status(nvim)), status(nvim)
    nvim.command("NodecodeStop")
    wait_for(lambda: "_stopped_" in chat(nvim))
    wait_for(lambda: shown(nvim) is None)
    assert not re.match(SPINNER, status(nvim))


def test_running_a_cell_and_waiting_for_approval_are_phases(nvim, home, workspace, loopback):
    srv = loopback(
        [
            {"calls": [{"code": '(shell "sleep 30")'}]},
            {"text": "slept"},
        ]
    )
    write_config(home, srv)

    nvim.command("Nodecode sleep")

    wait_for(lambda: "waiting for approval" in status(nvim))
    assert "waiting for approval" in shown(nvim)
    nvim.input("a")
    wait_for(lambda: "running a cell" in status(nvim))
    nvim.command("NodecodeStop")
    wait_for(lambda: "_stopped_" in chat(nvim))
