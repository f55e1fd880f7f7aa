"""`:w` in the context buffer says what the take will do, pairs included, and
the receipt says the same after; a refused write is one message, not an
autocommand error; a restore chosen from a picker leaves the cursor where
`:w` saves it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import chat, configure, open_context, wait_for
from .test_picker import picker_key
from .ui_helpers import make_session, messages_of, notes, notified

READ = {"text": "reading", "calls": [{"code": ';; read a\n(read-file "a.txt")'}]}


@pytest.fixture
def a_read(home: Path, workspace: Path, loopback):
    """Turn 1: ask 1, reply 3, call 4, result 5, reply 7."""
    (workspace / "a.txt").write_text("hello\n")
    srv = loopback(
        [READ, {"text": "done reading"}, {"text": "second answer"}, {"text": "third answer"}]
    )
    configure(home, srv)
    make_session(home, workspace, ["first question"])
    return srv


def nonce(nv) -> str:
    return nv.current.buffer[0].split()[-1].rstrip("]")


def said(nv, *words: str) -> str:
    return wait_for(lambda: next((n for n in notes(nv) if all(w in n for w in words)), None))


def receipts(nv) -> list[str]:
    """The take receipts quoted in the chat (the person is told their first line)."""
    text = chat(nv)
    return [r.split("\n\n")[0] for r in text.split("> receipt: ")[1:] if r.startswith("[[receipt ")]


def test_write_and_receipt_name_the_pair_a_delete_or_restore_takes_along(nvim, a_read):
    notified(nvim)
    open_context(nvim)
    n = nonce(nvim)
    lines = nvim.current.buffer[:]
    at = lines.index(f"[[m:{n} 5 tool]]")
    del nvim.current.buffer[at : at + 3]  # the result's block: its call goes too

    nvim.command("write")

    summary = said(nvim, "saved: ")
    assert "delete 2 (4 5)" in summary and "deleting 5 takes its call 4" in summary, summary
    nvim.command("Nodecode second question")
    receipt = wait_for(lambda: receipts(nvim))[0]
    assert "deleted 2 (4 5)" in receipt and "pairs: deleting 5 took its call 4" in receipt
    wait_for(lambda: nvim.current.buffer[-1] == "second answer")

    n = nonce(nvim)
    lines = nvim.current.buffer[:]
    nvim.current.buffer.append(f"[[m:{n} 5 tool]]", lines.index(f"[[m:{n} 7 assistant]]"))
    nvim.command("write")

    summary = said(nvim, "saved: ", "restore")
    assert "restore 2 (4 5)" in summary, summary
    assert "restoring 5 brings back its call 4" in summary, summary
    nvim.command("Nodecode third question")
    receipt = wait_for(lambda: (r := receipts(nvim)) and len(r) == 2 and r)[-1]
    assert "restored 2 (4 5)" in receipt, receipt
    assert "pairs: restoring 5 brought back its call 4" in receipt, receipt


def test_a_refused_write_is_one_message_and_wq_does_not_quit(nvim, a_read):
    nvim.exec_lua("vim.o.columns = 200")  # the whole line fits: not cut to a float
    open_context(nvim)
    path = Path(nvim.current.buffer.name)
    before = path.read_bytes()
    n = nonce(nvim)
    at = nvim.current.buffer[:].index(f"[[m:{n} 3 assistant]]")
    nvim.current.buffer[at] = f"[[m:{n} 3 user]]"  # a role changed: refused
    nvim.command("let v:errmsg = ''")
    nvim.command("redir => g:shown")  # what the screen shows, autocommand headers too

    nvim.input(":w<CR>")

    wait_for(lambda: "not written" in nvim.vvars["errmsg"])
    nvim.command("redir END")
    assert nvim.vars["shown"].strip().splitlines() == [
        f"nodecode: not written, 1 problem; line {at + 1}: role of message 3 changed: "
        "expected assistant (found user)"
    ]
    assert path.read_bytes() == before and nvim.eval("&modified") == 1
    nvim.input(":wq<CR>")
    wait_for(lambda: messages_of(nvim).count("not written") == 2)
    assert nvim.eval("&modified") == 1 and nvim.current.buffer.name == str(path)


def test_a_restore_picked_from_the_chat_leaves_the_cursor_in_the_context_buffer(
    nvim, a_read, home, workspace
):
    from nodecode.app import App
    from nodecode.context import take

    app = App.open(home=home, cwd=workspace)
    sid = app.current_session()
    path = take.export(app.workspace, sid)
    n = path.read_text().split("\n", 1)[0].split()[-1].rstrip("]")
    path.write_text(path.read_text().replace(f"[[m:{n} 1 user]]\nfirst question\n", ""))
    take.take(app.workspace, sid, take.head_turn(app.store, sid))  # the ask is removed
    app.close()
    notified(nvim)
    open_context(nvim)
    context = nvim.current.buffer.number
    nvim.command("Nodecode")  # the chat, with its input
    chat_win = nvim.exec_lua("return vim.fn.bufwinid('nodecode://chat')")
    nvim.api.set_current_win(chat_win)
    nvim.command("stopinsert")
    nvim.command("NodecodeRecall first question")
    wait_for(
        lambda: nvim.exec_lua(
            "local st = require('nodecode.ui.float_picker').current "
            "return st and #vim.api.nvim_buf_get_lines(st.lbuf, 0, -1, false) == 1 "
            "and vim.api.nvim_buf_get_lines(st.lbuf, 0, 1, false)[1]:find('user') ~= nil"
        )
    )

    nvim.input(picker_key(nvim, "restore"))

    said(nvim, "message 1 goes back")
    assert nvim.current.buffer.number == context
    assert nvim.api.get_mode()["mode"] == "n"
    nvim.command("write")
    assert "restore 1 (1)" in said(nvim, "saved: ")
