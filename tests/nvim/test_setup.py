"""require('nodecode').setup{} merges and validates; it does nothing else."""

from __future__ import annotations

from .ui_helpers import messages_of


def test_setup_rejects_a_bad_value_naming_the_key(nvim):
    ok, err = nvim.exec_lua(
        "return { pcall(require('nodecode').setup, { chat = { position = 'up' } }) }"
    )

    assert ok is False
    assert err == 'chat.position: expected one of below, current, left, right, tab, got "up"'


def test_setup_warns_about_unknown_keys_and_keeps_the_rest(nvim):
    nvim.exec_lua("require('nodecode').setup({ store = 'work', chat = { colour = 'red' } })")
    nvim.exec_lua("vim.wait(50)")  # messages are scheduled

    messages = messages_of(nvim)
    assert "nodecode: unknown option chat.colour (ignored)" in messages
    assert nvim.exec_lua("return require('nodecode.config').get().store") == "work"
    assert nvim.exec_lua("return require('nodecode.config').get().chat.position") == "right"
    assert nvim.call("remote#host#IsRunning", "nodecode") == 0
