""":NodecodeModel: the model of this Neovim's next request, by name or from a
picker; the request, the statusline, the budget and the log follow."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli, write_config

from .conftest import chat, wait_for
from .ui_helpers import idle, notes, notified

MODELS = [
    {"id": "small", "context_window": 50000, "max_tokens": 4000},
    {"id": "big", "context_window": 400000, "max_tokens": 8000},
    {"id": "demo-size", "context_window": 1570, "max_tokens": 400},
]


def configure(home, srv, ptype="anthropic", **provider):
    """A loopback home whose provider lists MODELS (and any other provider keys)."""
    write_config(home, srv, ptype)
    import json

    path = home / "config.jsonc"
    config = json.loads(path.read_text().split("\n", 1)[1])
    config["providers"]["loopback"].update({"models": MODELS, **provider})
    path.write_text(json.dumps(config))


def status(nv) -> str:
    return nv.exec_lua("return require('nodecode').status()")


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_named_model_answers_the_next_request_and_shows_in_status(
    nvim, home, workspace, loopback, ptype
):
    srv = loopback([{"text": "from the default"}, {"text": "from big"}])
    configure(home, srv, ptype)
    nvim.command("Nodecode first")
    wait_for(lambda: "from the default" in chat(nvim))
    wait_for(lambda: idle(nvim))
    wait_for(lambda: status(nvim).startswith("ctx "))

    notified(nvim)
    nvim.command("NodecodeModel loopback/big")
    wait_for(lambda: "/392k" in status(nvim))
    assert notes(nvim) == [
        "nodecode: model: loopback/big from the next request · "
        "window 400000 (config.jsonc) · budget 392000"
    ]
    nvim.command("Nodecode second")
    wait_for(lambda: "from big" in chat(nvim))

    assert [r.body["model"] for r in srv.model_requests] == ["loopback-model", "big"]
    assert srv.model_requests[1].body["max_tokens"] == 8000  # the reply reserve follows
    line = wait_for(lambda: (s := status(nvim)).startswith("loopback/big · ctx ") and s)
    assert line.endswith("/392k 0%"), line
    recall = run_cli("recall-log", home=home, cwd=workspace).stdout
    assert "model] model loopback/big from the next request (was loopback/loopback-model)" in recall
    assert "request] loopback/loopback-model usage" in recall
    assert "request] loopback/big usage" in recall
    report = run_cli("status", home=home, cwd=workspace).stdout
    assert f"last request (seq {srv_last_seq(recall)}, loopback/big)" in report


def srv_last_seq(recall: str) -> int:
    """The seq of the last request event in recall-log lines."""
    seqs = [int(x.split(" · ")[0][5:]) for x in recall.splitlines() if "· request]" in x]
    return seqs[-1]


def test_the_picker_lists_config_and_models_dev_models_and_applies_the_choice(nvim, home, loopback):
    srv = loopback([{"text": "haiku here"}])
    configure(home, srv, models_dev="anthropic")

    nvim.command("NodecodeModel")

    rows = wait_for(
        lambda: nvim.exec_lua("""
            local st = require('nodecode.ui.float_picker').current
            return st and vim.api.nvim_buf_get_lines(st.lbuf, 0, -1, false)
        """)
    )
    assert rows[:4] == [
        "* loopback/loopback-model  window unknown · config",
        "  loopback/small  50k window · config",
        "  loopback/big  400k window · config",
        "  loopback/demo-size  1570-token window · config",  # not "2k"
    ]
    assert "  loopback/claude-haiku-4-5  200k window · models.dev" in rows
    nvim.input("claude-haiku-4-5")
    wait_for(
        lambda: nvim.exec_lua("""
            local st = require('nodecode.ui.float_picker').current
            return st and st.shown[1] and st.shown[1].name == 'loopback/claude-haiku-4-5'
        """)
    )
    nvim.input("<CR>")
    wait_for(lambda: status(nvim).startswith("loopback/claude-haiku-4-5 · "))
    nvim.command("Nodecode hi")
    wait_for(lambda: "haiku here" in chat(nvim))
    assert srv.model_requests[0].body["model"] == "claude-haiku-4-5"


def test_a_bad_name_is_one_clear_error_and_changes_nothing(nvim, home, loopback):
    srv = loopback([{"text": "still the default"}])
    configure(home, srv)
    notified(nvim)

    for name in ("loopback", "nope/x", "loopback/tiny"):
        nvim.command(f"NodecodeModel {name}")
    nvim.command("Nodecode hi")

    wait_for(lambda: "still the default" in chat(nvim))
    assert srv.model_requests[0].body["model"] == "loopback-model"
    assert wait_for(lambda: len(notes(nvim)) == 3 and notes(nvim)) == [
        "nodecode: model: expected PROVIDER/MODEL, like anthropic/claude-sonnet-4-5 "
        "(got 'loopback')",
        "nodecode: model: no provider 'nope' is configured (expected one of loopback)",
        "nodecode: model: loopback has no model 'tiny' (its config.jsonc models and "
        "models.dev list 4: :NodecodeModel shows them; add others to providers.loopback.models)",
    ]


def test_a_chosen_model_outlives_an_edit_of_config_jsonc(nvim, home, workspace, loopback):
    """config.jsonc is read again when it changes; the runtime choice stays."""
    srv = loopback([{"text": "from big"}])
    configure(home, srv)
    nvim.command("NodecodeModel loopback/big")
    wait_for(lambda: "/392k" in status(nvim))
    path = home / "config.jsonc"
    config = json.loads(path.read_text())
    config["shell_timeout"] = 99
    path.write_text(json.dumps(config, indent=1))  # another size: read again

    nvim.command("Nodecode after the edit")
    wait_for(lambda: "from big" in chat(nvim))

    assert [r.body["model"] for r in srv.model_requests] == ["big"]
