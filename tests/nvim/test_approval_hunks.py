"""A write answered hunk by hunk in the approval window: the file on disk holds
exactly the hunks taken (as edited), the model's next request names each hunk,
and undo/redo restore the bytes before and the bytes written."""

from __future__ import annotations

import json

from helpers import write_config

from .conftest import chat, wait_for
from .ui_helpers import idle, messages_of

OLD = "".join(f"line {i}\n" for i in range(1, 21))
NEW = OLD.replace("line 2\n", "line two\n").replace("line 15\n", "line fifteen\nline 15b\n")
WRITE = "(write-file " + json.dumps("f.txt") + " " + json.dumps(NEW) + ")"


def review(nv) -> dict | None:
    """The open approval's window lines, footer and each hunk's state and mark."""
    return nv.exec_lua("""
        local a = require('nodecode.ui.approval')
        if not (a.win and vim.api.nvim_win_is_valid(a.win) and a.review) then return nil end
        local c = vim.api.nvim_win_get_config(a.win)
        return { lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(a.win), 0, -1, false),
                 footer = c.footer and c.footer[1][1] or '',
                 hunks = require('nodecode.ui.approval_hunks').state(a.review),
                 current = vim.api.nvim_get_current_win() == a.win }
    """)


def results(body: dict) -> str:
    """The text of every tool result of an (Anthropic) request."""
    return "\n".join(
        block["content"]
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    )


def ask_to_write(nvim, home, workspace, loopback):
    """f.txt holds OLD; the scripted model proposes WRITE (two hunks) to an ask."""
    (workspace / "f.txt").write_text(OLD)
    srv = loopback([{"calls": [{"code": WRITE}]}, {"text": "Noted."}])
    write_config(home, srv)
    nvim.command("Nodecode rename two things")
    return srv


def test_taking_hunk_1_and_rejecting_hunk_2_writes_hunk_1_and_undo_restores_the_bytes(
    nvim, home, workspace, loopback
):
    srv = ask_to_write(nvim, home, workspace, loopback)
    shown = wait_for(lambda: review(nvim))
    assert [(h["n"], shown["lines"][h["row"] - 1]) for h in shown["hunks"]] == [
        (1, "@@ -1,5 +1,5 @@"),
        (2, "@@ -12,7 +12,8 @@"),
    ]
    assert [h["mark"] for h in shown["hunks"]] == ["  · hunk 1 of 2", "  · hunk 2 of 2"]
    assert shown["footer"] == " a all · r none · y take · x reject · e edit · <CR> write · ? keys "
    nvim.input("y")  # the cursor is above hunk 1: it is the one taken; y moves on to hunk 2
    nvim.input("X")
    nvim.input("keep the number<CR>")
    marks = wait_for(lambda: (r := review(nvim)) and r["hunks"][1].get("take") is False and r)
    assert [h["mark"] for h in marks["hunks"]] == [
        "  ✓ hunk 1 of 2: take",
        "  ✗ hunk 2 of 2: reject: keep the number",
    ]
    nvim.input("<CR>")

    wait_for(lambda: "Noted." in chat(nvim))
    taken = OLD.replace("line 2\n", "line two\n")
    assert (workspace / "f.txt").read_bytes() == taken.encode()
    told = results(srv.model_requests[1].body)
    assert f"wrote f.txt ({len(taken)} bytes): the person took 1 of 2 hunks" in told
    assert "hunk 1 applied: old line 2 became line 2" in told
    assert (
        "hunk 2 rejected: old line 15 kept (it proposed new lines 15–16 there); "
        "the person's reason: keep the number"
    ) in told
    assert "> write: took hunk 1; rejected hunk 2: keep the number" in chat(nvim)

    wait_for(lambda: idle(nvim))
    nvim.command("NodecodeUndo")
    wait_for(lambda: (workspace / "f.txt").read_bytes() == OLD.encode())
    nvim.command("NodecodeRedo")
    wait_for(lambda: (workspace / "f.txt").read_bytes() == taken.encode())


def test_an_edited_hunk_is_written_as_edited_and_the_model_reads_the_edit(
    nvim, home, workspace, loopback
):
    srv = ask_to_write(nvim, home, workspace, loopback)
    wait_for(lambda: review(nvim))
    nvim.input("]c]c")  # to hunk 2
    nvim.input("e")
    wait_for(lambda: nvim.current.buffer.name.endswith("nodecode://approval/hunk-2"))
    assert nvim.current.buffer[:] == ["line fifteen", "line 15b"]
    nvim.current.buffer[:] = ["line 15 (kept)", "line 15c"]
    nvim.command("write")

    edited = wait_for(lambda: (r := review(nvim)) and r["current"] and r)
    assert edited["hunks"][1]["mark"] == "  ✓ hunk 2 of 2: take, as edited"
    row = edited["hunks"][1]["row"]
    assert edited["lines"][row : row + 8] == [
        " line 12",
        " line 13",
        " line 14",
        "-line 15",
        "+line 15 (kept)",
        "+line 15c",
        " line 16",
        " line 17",
    ]
    nvim.input("[cx")  # back to hunk 1, which is rejected (no reason)
    wait_for(lambda: review(nvim)["hunks"][0].get("take") is False)
    nvim.input("<CR>")

    wait_for(lambda: "Noted." in chat(nvim))
    written = OLD.replace("line 15\n", "line 15 (kept)\nline 15c\n")
    assert (workspace / "f.txt").read_bytes() == written.encode()
    told = results(srv.model_requests[1].body)
    assert "hunk 1 rejected: old line 2 kept (it proposed new line 2 there)" in told
    assert (
        "hunk 2 applied as the person edited it: old line 15 became lines 15–16; written as:"
        "\n  | line 15 (kept)\n  | line 15c"
    ) in told
    assert "> write: took hunk 2 (edited); rejected hunk 1" in chat(nvim)


def test_question_mark_lists_the_hunk_keys_and_confirming_before_choosing_sends_nothing(
    nvim, home, workspace, loopback
):
    ask_to_write(nvim, home, workspace, loopback)
    wait_for(lambda: review(nvim))
    nvim.input("?")
    keys = wait_for(
        lambda: nvim.exec_lua("""local w = require('nodecode.ui.hints').win
            return w and vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)""")
    )
    assert keys[-8:] == [
        "]c    a write's next hunk",
        "[c    its previous hunk",
        "y     take the hunk under the cursor",
        "x     reject the hunk under the cursor",
        "X     reject it, saying why (the agent reads it)",
        "e     edit the hunk's new lines (:w keeps them)",
        "<CR>  write the hunks taken (the rest are left out)",
        "?     these keys",
    ]
    nvim.input("<Esc>")  # closes the key list, and only that
    wait_for(lambda: nvim.exec_lua("return require('nodecode.ui.hints').win == nil"))
    nvim.input("<CR>")

    warned = wait_for(
        lambda: next(
            (m for m in messages_of(nvim).split("\n") if "no hunk taken or rejected yet" in m),
            None,
        )
    )
    assert (
        "y takes the hunk under the cursor, x rejects it (a and r answer the whole change)"
        in warned
    )
    assert review(nvim) is not None
    nvim.input("a")  # the whole change, whatever the hunks
    wait_for(lambda: "Noted." in chat(nvim))
    assert (workspace / "f.txt").read_text() == NEW


def test_in_a_split_the_hunk_keys_work_the_same(nvim, home, workspace, loopback):
    nvim.exec_lua("require('nodecode').setup({ approval = { window = 'split' } })")
    srv = ask_to_write(nvim, home, workspace, loopback)
    wait_for(lambda: review(nvim))
    nvim.input("]c]cy")  # hunk 2 only; hunk 1 is left out unreviewed

    wait_for(lambda: review(nvim)["hunks"][1].get("take"))
    nvim.input("<CR>")
    wait_for(lambda: "Noted." in chat(nvim))
    assert (workspace / "f.txt").read_text() == OLD.replace("line 15\n", "line fifteen\nline 15b\n")
    told = results(srv.model_requests[1].body)
    assert (
        "hunk 1 not applied (the person did not review it): old line 2 kept "
        "(it proposed new line 2 there)"
    ) in told
    assert "> write: took hunk 2; left out unreviewed hunk 1" in chat(nvim)


def test_an_edit_of_a_hunk_ending_the_file_without_a_newline_keeps_it_open(
    nvim, home, workspace, loopback
):
    (workspace / "g.txt").write_bytes(b"a\nb")
    srv = loopback([{"calls": [{"code": '(write-file "g.txt" "a\\nc")'}]}, {"text": "Noted."}])
    write_config(home, srv)

    nvim.command("Nodecode change the last line")
    wait_for(lambda: review(nvim))
    nvim.input("e")
    wait_for(lambda: nvim.current.buffer.name.endswith("nodecode://approval/hunk-1"))
    nvim.current.buffer[:] = ["d", "e"]
    nvim.command("write")

    edited = wait_for(lambda: (r := review(nvim)) and r["current"] and r)
    assert edited["lines"][2:] == [
        "@@ -1,2 +1,2 @@",
        " a",
        "-b",
        "+d",
        "+e",
        "\\ No newline at end of file",
    ]
    nvim.input("<CR>")
    wait_for(lambda: "Noted." in chat(nvim))
    assert (workspace / "g.txt").read_bytes() == b"a\nd\ne"
