"""Keys: setup{ keymaps } merges and validates, buffer-local maps in the chat
and context buffers, <Plug> mappings, undo/redo by key, the statusline."""

from __future__ import annotations

import re

from nodecode.host import Host

from .conftest import buffer_lines, chat, configure, open_context, wait_for
from .ui_helpers import make_session, notes, notified

ACTIONS = ("undo", "redo", "tree", "status", "recall", "evict", "fork", "context")


def buffer_map(nv, buf_name: str, lhs: str) -> dict:
    return nv.exec_lua(
        """
        local name, lhs = ...
        local buf = vim.fn.bufnr(name)
        return vim.api.nvim_buf_call(buf, function()
          local m = vim.fn.maparg(lhs, 'n', false, true)
          return { buffer = m.buffer or 0, desc = m.desc or '' }
        end)
    """,
        buf_name,
        lhs,
    )


def test_setup_merges_validates_and_warns_about_unknown_keys(nvim):
    notified(nvim)
    nvim.exec_lua(
        "require('nodecode').setup({ keymaps = { undo = 'U', bogus = 'x', "
        "picker = { toggle = '<C-g>', nope = 'y' } } })"
    )

    keys = nvim.exec_lua("return require('nodecode.config').get().keymaps")
    assert keys["undo"] == "U" and keys["redo"] == "<localleader>r"
    assert keys["picker"]["toggle"] == "<C-g>" and keys["picker"]["open"] == "<CR>"
    wait_for(lambda: len(notes(nvim)) == 2)
    assert sorted(notes(nvim)) == [
        "nodecode: unknown option keymaps.bogus (ignored)",
        "nodecode: unknown option keymaps.picker.nope (ignored)",
    ]
    ok, err = nvim.exec_lua(
        "return { pcall(require('nodecode').setup, { keymaps = { undo = 3 } }) }"
    )
    assert ok is False and "keymaps.undo" in err


def test_plug_mappings_exist_for_every_action(nvim):
    for action in (*ACTIONS, "chat", "stop", "restore", "sessions"):
        assert nvim.funcs.maparg(f"<Plug>(nodecode-{action})", "n") != "", action


def test_chat_and_context_buffers_get_the_configured_keys(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "hello"}]))
    make_session(home, workspace, ["hi"])
    nvim.exec_lua("require('nodecode').setup({ keymaps = { undo = 'U', fork = false } })")

    nvim.command("Nodecode")
    nvim.command("stopinsert")
    nvim.command("wincmd p")
    open_context(nvim)

    context = nvim.current.buffer.name
    for name in ("nodecode://chat", "nodecode://input", context):
        assert buffer_map(nvim, name, "U") == {
            "buffer": 1,
            "desc": "nodecode: undo the last turn and its file changes",
        }
        assert buffer_map(nvim, name, "\\r")["buffer"] == 1
        assert buffer_map(nvim, name, "\\f")["buffer"] == 0  # disabled
    assert buffer_map(nvim, context, "\\m")["desc"].startswith("nodecode: restore")


def test_the_host_has_the_methods_the_keys_call():
    for name in ("undo", "redo", "status"):
        assert callable(getattr(Host, name, None)), f"Host.{name} is missing"


def test_undo_and_redo_keys_restore_files_and_reload_buffers(nvim, home, workspace, loopback):
    srv = loopback(
        [
            {"calls": [{"code": ';; write a\n(write-file "a.txt" "v1")'}]},
            {"text": "wrote v1"},
            {"calls": [{"code": ';; write a again\n(write-file "a.txt" "v2")'}]},
            {"text": "wrote v2"},
        ]
    )
    configure(home, srv, auto_approve=["write", "shell"])
    make_session(home, workspace, ["write v1", "now write v2"])
    a = workspace / "a.txt"
    nvim.command("edit a.txt")
    open_context(nvim)
    assert "wrote v2" in nvim.current.buffer[:]

    nvim.input("\\u")

    wait_for(lambda: a.read_text() == "v1")
    wait_for(lambda: buffer_lines(nvim, str(a)) == ["v1"])  # the open buffer reloaded
    wait_for(lambda: buffer_lines(nvim, "nodecode://input") == ["now write v2"])  # the ask is back
    context = next(b for b in nvim.buffers if b.name.endswith("context.txt"))
    wait_for(lambda: "wrote v2" not in context[:])  # the context buffer followed
    assert chat(nvim).endswith("_undone_\n")  # the transcript keeps the turn, marked
    assert nvim.api.get_mode()["mode"] == "n"  # the ask came back without Insert mode

    nvim.current.buffer = context
    nvim.input("\\r")

    wait_for(lambda: a.read_text() == "v2")
    wait_for(lambda: buffer_lines(nvim, str(a)) == ["v2"])
    wait_for(lambda: "wrote v2" in context[:])


def test_statusline_shows_fill_and_budget_after_a_turn_and_never_starts_the_host(
    nvim, home, loopback
):
    configure(home, loopback([{"text": "hello back"}]))
    assert nvim.exec_lua("return require('nodecode').status()") == ""
    assert nvim.call("remote#host#IsRunning", "nodecode") == 0

    nvim.command("Nodecode hello")

    wait_for(lambda: "hello back" in chat(nvim))
    # While the turn ends the line shows its progress; once ended, fill and budget.
    fill = r"ctx \d+(\.\d)?k?(/\d+(\.\d)?[kM]? \d+%)?"
    status = "return require('nodecode').status()"
    wait_for(lambda: re.fullmatch(fill, nvim.exec_lua(status)))


def test_status_report_opens_in_a_float(nvim, home, loopback):
    configure(home, loopback([]))

    nvim.command("NodecodeStatus")

    assert nvim.api.win_get_config(nvim.current.window)["relative"] == "editor"
    text = "\n".join(nvim.current.buffer[:])
    assert "fill:" in text and "pending edits:" in text
    nvim.input("q")
    wait_for(lambda: nvim.api.win_get_config(nvim.current.window)["relative"] == "")


def test_commands_complete_their_arguments(nvim):
    assert nvim.funcs.getcompletion("NodecodeEvict ", "cmdline") == ["through", "25", "50", "75"]
    assert nvim.funcs.getcompletion("NodecodeBudget c", "cmdline") == ["clear"]
    names = nvim.funcs.getcompletion("Nodecode", "command")
    assert {
        "NodecodeContext",
        "NodecodeEvict",
        "NodecodeCompact",
        "NodecodeRecall",
        "NodecodeTree",
        "NodecodeUndo",
        "NodecodeRedo",
        "NodecodeFork",
        "NodecodeStatus",
        "NodecodeBudget",
        "NodecodeSessions",
        "NodecodeStop",
        "Nodecode",
    } <= set(names)
