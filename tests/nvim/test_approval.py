"""Approvals with a diff (approve = 'diff', the default): what the person sees
of a write or a command, and what each answer does to the agent's next request."""

from __future__ import annotations

import json

import pytest
from helpers import write_config

from .conftest import chat, wait_for
from .ui_helpers import idle

CALC = "def add(a, b):\n    return a - b\n"
EDIT = '(edit-file "calc.py" "a - b" "a + b")'


def approval_window(nv) -> dict | None:
    """The approval float: its lines, filetype, title and footer (None when closed)."""
    return nv.exec_lua("""
        local win = require('nodecode.ui.approval').win
        if not (win and vim.api.nvim_win_is_valid(win)) then return nil end
        local buf = vim.api.nvim_win_get_buf(win)
        local c = vim.api.nvim_win_get_config(win)
        return { lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), ft = vim.bo[buf].filetype,
                 title = c.title and c.title[1][1] or '', footer = c.footer and c.footer[1][1] or '',
                 current = vim.api.nvim_get_current_win() == win }
    """)


def test_an_edit_file_shows_its_diff_and_a_accepts_it(nvim, home, workspace, loopback):
    (workspace / "calc.py").write_text(CALC)
    srv = loopback([{"calls": [{"code": EDIT}]}, {"text": "Fixed."}])
    write_config(home, srv)

    nvim.command("Nodecode fix add")

    shown = wait_for(lambda: approval_window(nvim))
    assert shown["lines"] == [
        "--- a/calc.py",
        "+++ b/calc.py",
        "@@ -1,2 +1,2 @@",
        " def add(a, b):",
        "-    return a - b",
        "+    return a + b",
    ]
    assert shown["ft"] == "diff" and shown["title"] == " write calc.py " and shown["current"]
    assert shown["footer"] == (
        " a accept · r reject · R reject with a reason · A always write this session · ? keys "
    )
    nvim.input("a")
    wait_for(lambda: "Fixed." in chat(nvim))
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "> write: approved" in chat(nvim)


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_rejection_with_a_reason_is_the_calls_result_in_the_next_request(
    nvim, home, workspace, loopback, ptype
):
    (workspace / "calc.py").write_text(CALC)
    srv = loopback([{"calls": [{"code": EDIT}]}, {"text": "I see."}])
    write_config(home, srv, ptype)

    nvim.command("Nodecode fix add")
    wait_for(lambda: approval_window(nvim))
    nvim.input("R")
    nvim.input("use the helper in ops.py<CR>")

    wait_for(lambda: "I see." in chat(nvim))
    assert (workspace / "calc.py").read_text() == CALC
    second = srv.model_requests[1].body
    results = [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in second["messages"]
        if m["role"] in ("tool", "user")
    ]
    assert any(
        "error: write to calc.py not approved: use the helper in ops.py" in r for r in results
    ), results
    assert "> write: refused: use the helper in ops.py" in chat(nvim)


def test_always_allows_the_kind_for_the_rest_of_the_session(nvim, home, workspace, loopback):
    srv = loopback(
        [
            {"calls": [{"code": '(write-file "one.txt" "1")'}]},
            {"calls": [{"code": '(write-file "two.txt" "2")'}]},
            {"text": "Both written."},
            {"calls": [{"code": '(write-file "three.txt" "3")'}]},
            {"text": "Third written."},
        ]
    )
    write_config(home, srv)

    nvim.command("Nodecode write two files")
    wait_for(lambda: approval_window(nvim))
    nvim.input("A")
    wait_for(lambda: "Both written." in chat(nvim))
    wait_for(lambda: idle(nvim))
    nvim.command("Nodecode and a third")
    wait_for(lambda: "Third written." in chat(nvim))

    assert [(workspace / f).read_text() for f in ("one.txt", "two.txt", "three.txt")] == [
        "1",
        "2",
        "3",
    ]
    assert chat(nvim).count("> write: approved (write always allowed this session)") == 1
    assert approval_window(nvim) is None


def test_a_shell_approval_shows_the_command_and_its_directory(nvim, home, workspace, loopback):
    srv = loopback([{"calls": [{"code": '(shell "touch ran.txt")'}]}, {"text": "Ran."}])
    write_config(home, srv)

    nvim.command("Nodecode run it")

    shown = wait_for(lambda: approval_window(nvim))
    assert shown["lines"] == [f"cwd: {workspace}", "$ touch ran.txt"]
    assert shown["title"] == " run a command "
    nvim.input("r")
    wait_for(lambda: "> shell: refused" in chat(nvim))
    assert not (workspace / "ran.txt").exists()
