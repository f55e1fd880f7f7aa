"""A chat per tab: two tabpages, two sessions, two turns at once, each streaming
into its own tab's chat; undo, the statusline and :NodecodeContext act on the
current tab's session; closing a tab stops only its turn."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from nodecode.errors import UserError
from nodecode.host import Host

from .conftest import configure, open_context, wait_for
from .test_host import RecordingPort
from .test_picker import wait_rows
from .ui_helpers import messages_of, notes, notified, user_texts

SLOW = 0.08  # seconds between SSE events: each reply streams for about a second


def streamed(word: str, n: int = 12) -> list[str]:
    return [f"{word}{i} " for i in range(n)]


@pytest.fixture
def two_turns(home: Path, workspace: Path, loopback):
    """The loopback answers the ask naming "alpha" by writing one.txt and the
    one naming "beta" by writing two.txt, each reply streamed slowly."""
    srv = loopback(
        [
            {"match_ask": "alpha", "calls": [{"code": '(write-file "one.txt" "1")'}]},
            {"match_ask": "alpha", "chunks": streamed("alpha")},
            {"match_ask": "beta", "calls": [{"code": '(write-file "two.txt" "2")'}]},
            {"match_ask": "beta", "chunks": streamed("beta")},
        ],
        chunk_delay=SLOW,
    )
    configure(home, srv, auto_approve=["write"])
    return srv


def in_tab(nv, n: int, lua: str, *args):
    """``lua`` run in tabpage number ``n`` (the cursor goes there)."""
    nv.command(f"tabnext {n}")
    return nv.exec_lua(lua, *args)


def session_of(nv, n: int) -> str:
    return in_tab(nv, n, "return require('nodecode.rpc').call('info').id")


def job_of(nv, n: int):
    return nv.exec_lua(
        "return require('nodecode.ui.chat').job(vim.api.nvim_list_tabpages()[...])", n
    )


def chat_lines(nv, n: int) -> list[str]:
    return nv.exec_lua(
        """
        local chat = require('nodecode.ui.chat')
        local b = chat.buf(vim.api.nvim_list_tabpages()[...])
        return b and vim.api.nvim_buf_get_lines(b, 0, -1, false) or {}
        """,
        n,
    )


def leases(home: Path) -> list[str]:
    """The sessions whose lease is held now (the store's leases table)."""
    db = sqlite3.connect(home / "store" / "default.db")
    try:
        return sorted(r[0] for r in db.execute("SELECT session FROM leases"))
    finally:
        db.close()


def logged_kinds(home: Path, sid: str) -> list[str]:
    """The kinds of session ``sid``'s logged events."""
    db = sqlite3.connect(home / "store" / "default.db")
    try:
        return [r[0] for r in db.execute("SELECT kind FROM events WHERE session = ?", (sid,))]
    finally:
        db.close()


def tokens(short: str) -> float:
    """A statusline's count (`812`, `1.2k`, `41k`) as a number."""
    return float(short[:-1]) * 1000 if short.endswith("k") else float(short)


def lines_shown(nv, filetype: str) -> list[str] | None:
    """The lines of the buffer of ``filetype`` shown in the current tab, if any."""
    return nv.exec_lua(
        """
        for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local b = vim.api.nvim_win_get_buf(w)
          if vim.bo[b].filetype == ... then
            return vim.api.nvim_buf_get_lines(b, 0, -1, false)
          end
        end
        """,
        filetype,
    )


def approval_shown(nv) -> bool:
    return nv.exec_lua("""
        local win = require('nodecode.ui.approval').win
        return win ~= nil and vim.api.nvim_win_is_valid(win)
          and vim.api.nvim_win_get_tabpage(win) == vim.api.nvim_get_current_tabpage()
    """)


def ask_in_two_tabs(nv) -> None:
    nv.command("Nodecode please alpha")
    nv.command("tabnew")
    nv.command("Nodecode please beta")


def test_two_tabs_run_two_turns_at_once_each_in_its_own_session_and_chat(
    nvim, two_turns, workspace, home
):
    ask_in_two_tabs(nvim)

    both = wait_for(
        lambda: job_of(nvim, 1) and job_of(nvim, 2) and (job_of(nvim, 1), job_of(nvim, 2))
    )
    assert both[0] != both[1]  # two jobs running at the same time
    # each turn holds its own session's lease, at the same time
    held = wait_for(lambda: len(leases(home)) == 2 and leases(home))
    assert held == sorted([session_of(nvim, 1), session_of(nvim, 2)])
    wait_for(lambda: not job_of(nvim, 1) and not job_of(nvim, 2), timeout=30)

    one, two = "\n".join(chat_lines(nvim, 1)), "\n".join(chat_lines(nvim, 2))
    assert "alpha11" in one and "beta" not in one.replace("please beta", "")
    assert "beta11" in two and "alpha" not in two
    assert "please alpha" in one and "please beta" in two
    assert session_of(nvim, 1) != session_of(nvim, 2)
    # the provider saw each session's requests carry only that session's messages
    bodies = [" ".join(user_texts(r.body)) for r in two_turns.requests]
    assert len(bodies) == 4
    assert sorted(("alpha" in b, "beta" in b) for b in bodies) == [
        (False, True),
        (False, True),
        (True, False),
        (True, False),
    ]
    assert (workspace / "one.txt").read_text() == "1"
    assert (workspace / "two.txt").read_text() == "2"


def test_undo_in_the_second_tab_undoes_only_that_tabs_turn(nvim, two_turns, workspace):
    ask_in_two_tabs(nvim)
    wait_for(lambda: job_of(nvim, 1) or job_of(nvim, 2))
    wait_for(lambda: not job_of(nvim, 1) and not job_of(nvim, 2), timeout=30)

    nvim.command("tabnext 2")
    nvim.command("NodecodeUndo")

    assert not (workspace / "two.txt").exists()
    assert (workspace / "one.txt").read_text() == "1"
    wait_for(lambda: "undone" in "\n".join(chat_lines(nvim, 2)))  # its turn, marked
    assert "undone" not in "\n".join(chat_lines(nvim, 1))  # tab 1's turn stays
    assert lines_shown(nvim, "nodecode-input") == ["please beta"]  # this tab's input area, shown


def test_the_statusline_and_the_context_buffer_are_the_current_tabs_sessions(nvim, two_turns, home):
    nvim.command("Nodecode please alpha " + "word " * 400)  # a fuller context than tab 2's
    nvim.command("tabnew")
    nvim.command("Nodecode please beta")
    wait_for(lambda: job_of(nvim, 1) or job_of(nvim, 2))
    wait_for(lambda: not job_of(nvim, 1) and not job_of(nvim, 2), timeout=30)
    first, second = session_of(nvim, 1), session_of(nvim, 2)

    status = "return require('nodecode').status()"
    in_tab(nvim, 1, status)  # a statusline asks: the text is refreshed
    one = wait_for(lambda: in_tab(nvim, 1, status))
    two = wait_for(lambda: in_tab(nvim, 2, status))
    fill = [tokens(s.split()[1].split("/")[0]) for s in (one, two)]
    assert one.startswith("ctx ") and two.startswith("ctx ")
    assert fill[0] > fill[1], (one, two)

    recall = "return vim.tbl_map(function(r) return r.line end, "
    recall += "require('nodecode.rpc').call('recall', nil, false))"
    in_tab(nvim, 2, "return 1")
    recalled = " ".join(map(str, nvim.exec_lua(recall)))  # what :NodecodeRecall lists
    assert "please beta" in recalled and "please alpha" not in recalled

    nvim.command("tabnext 1")
    open_context(nvim)
    name = nvim.current.buffer.name
    text = "\n".join(nvim.current.buffer[:])
    assert first in name and second not in name
    assert "please alpha" in text and "please beta" not in text


def test_a_new_tab_gets_a_new_session_and_cannot_switch_to_another_tabs(nvim, two_turns):
    nvim.command("Nodecode please alpha")
    wait_for(lambda: job_of(nvim, 1))
    wait_for(lambda: not job_of(nvim, 1), timeout=30)
    first = session_of(nvim, 1)
    nvim.command("tabnew")
    nvim.command("Nodecode")  # the chat of this tab, with its input area
    nvim.command("stopinsert")
    second = session_of(nvim, 2)

    assert second != first
    tab = nvim.exec_lua("return vim.api.nvim_get_current_tabpage()")
    assert nvim.exec_lua("return vim.api.nvim_buf_get_name(require('nodecode.ui.chat').buf())") == (
        f"nodecode://chat/{tab}"
    )
    assert "please alpha" not in "\n".join(chat_lines(nvim, 2))

    rows = nvim.exec_lua("return require('nodecode.rpc').call('sessions')")
    tab1 = nvim.exec_lua("return vim.api.nvim_list_tabpages()[1]")
    assert {r["id"]: r["tab"] for r in rows} == {first: tab1, second: None}
    nvim.command("NodecodeSessions")
    shown = wait_rows(nvim, lambda rows: len(rows) == 3)["rows"]
    assert shown[0].startswith(f"* {second}") and not shown[0].endswith(")")
    assert shown[1].startswith(f"  {first}") and shown[1].endswith("  (tab 1)")
    nvim.input("<Esc><Esc>")
    wait_for(lambda: nvim.exec_lua("return vim.bo.filetype") != "nodecode-prompt")

    nvim.command(f"NodecodeSessions {first}")

    assert f"session {first} is open in another tab's chat" in messages_of(nvim)
    assert session_of(nvim, 2) == second


def test_an_approval_of_another_tabs_turn_waits_until_that_tab_is_entered(
    nvim, home, workspace, loopback
):
    srv = loopback(
        [
            {"match_ask": "beta", "calls": [{"code": '(write-file "two.txt" "2")'}]},
            {"match_ask": "beta", "text": "wrote it"},
        ]
    )
    configure(home, srv)  # writes ask first
    notified(nvim)
    nvim.command("tabnew")
    nvim.command("Nodecode please beta")
    nvim.command("tabprevious")  # back in tab 1 before the turn asks

    wait_for(lambda: any("waits for your approval: go to tab 2" in n for n in notes(nvim)))
    assert not approval_shown(nvim) and not (workspace / "two.txt").exists()

    nvim.command("tabnext 2")
    wait_for(lambda: approval_shown(nvim))
    nvim.input("a")

    wait_for(lambda: "wrote it" in "\n".join(chat_lines(nvim, 2)))
    assert (workspace / "two.txt").read_text() == "2"


def test_closing_a_tab_stops_its_turn_and_leaves_the_other_tabs_chat(nvim, two_turns, home):
    ask_in_two_tabs(nvim)
    wait_for(lambda: job_of(nvim, 1) and job_of(nvim, 2))
    second_buf = nvim.exec_lua("return require('nodecode.ui.chat').buf()")
    second_job = job_of(nvim, 2)
    second = session_of(nvim, 2)

    nvim.command("tabclose")  # tab 2, its turn still streaming

    assert not nvim.exec_lua("return vim.api.nvim_buf_is_valid(...)", second_buf)
    jobs = "return require('nodecode.rpc').call('jobs')"
    status = {j["id"]: j["status"] for j in wait_for(lambda: nvim.exec_lua(jobs))}
    wait_for(lambda: {j["id"]: j["status"] for j in nvim.exec_lua(jobs)}[second_job] == "stopped")
    wait_for(lambda: second not in leases(home))  # its lease released
    assert "stopped" in logged_kinds(home, second)  # the log says the turn stopped
    assert status.keys() == {second_job, job_of(nvim, 1) or second_job - 1}
    wait_for(lambda: not job_of(nvim, 1), timeout=30)
    one = "\n".join(chat_lines(nvim, 1))
    assert "alpha11" in one and "beta" not in one.replace("please beta", "")


# --- the host without Neovim: a session per tab --------------------------


def test_the_host_gives_each_tab_its_own_session_and_refuses_another_tabs(
    home, workspace, two_turns
):
    port = RecordingPort()
    host = port.host = Host(port)
    one = {"home": str(home), "cwd": str(workspace), "tab": 1}
    two = {**one, "tab": 2}
    three = {**one, "tab": 3}

    first = host.session(one)["id"]  # the store's current session (a new store: a new one)
    host.status(two)  # a look from a tab of no chat, while no chat holds it: shared
    assert host.session(two)["id"] == first
    alpha = host.ask(one, "please alpha")  # tab 1 opens its chat there: now it holds it
    with pytest.raises(UserError, match="this tab has no chat of its own yet"):
        host.status(three)  # a look from a tab of no chat creates nothing
    job = host.ask(two, "please beta")  # tab 2 only looked: its chat gets a new session
    second = host.session(two)["id"]
    wait_for(lambda: all(j["status"] != "running" for j in host.jobs()), timeout=30)

    assert second != first and host.session(one)["id"] == first
    assert {"id": job, "session": second, "tab": 2, "status": "done"} in host.jobs()
    assert {"id": alpha, "session": first, "tab": 1, "status": "done"} in host.jobs()
    with pytest.raises(UserError, match=f"session {first} is open in another tab's chat"):
        host.use_session(two, first)
    host.close_tab(1)  # tab 1 closed: its session is free for another tab
    assert host.use_session(three, first)["id"] == first


def test_a_chat_opened_in_a_tab_of_its_own_stays_the_chat_of_the_tab_it_was_asked_from(
    nvim, two_turns
):
    nvim.exec_lua("require('nodecode').setup({ chat = { position = 'tab' } })")
    nvim.command("Nodecode please alpha")  # the chat opens in a new tab; the cursor stays
    assert nvim.funcs.tabpagenr("$") == 2 and nvim.funcs.tabpagenr() == 1
    wait_for(lambda: job_of(nvim, 1))
    wait_for(lambda: not job_of(nvim, 1), timeout=30)
    first = session_of(nvim, 1)

    nvim.command("tabnext 2")  # the chat's tab: its commands are the chat's
    assert session_of(nvim, 2) == first
    nvim.command("Nodecode please beta")
    wait_for(lambda: job_of(nvim, 1))
    wait_for(lambda: not job_of(nvim, 1), timeout=30)
    nvim.command("tabnext 1")
    nvim.command("Nodecode")  # shows the same chat: no third tab
    nvim.command("stopinsert")

    assert nvim.funcs.tabpagenr("$") == 2
    text = "\n".join(chat_lines(nvim, 1))
    assert "alpha11" in text and "beta11" in text  # one chat, one session, both turns
    nvim.command("1tabclose")  # the tab it was asked from closes: the chat stays
    nvim.command("sleep 100m")
    chat = "\n".join(lines_shown(nvim, "nodecode-chat") or [])
    assert "alpha11" in chat and "beta11" in chat
    assert session_of(nvim, 1) == first


def test_a_tab_closed_without_a_chat_leaves_its_session_to_the_others(nvim, two_turns):
    nvim.command("tabnew")
    looked = nvim.exec_lua("return require('nodecode.rpc').call('status')")  # a statusline's look
    current = session_of(nvim, 2)  # this tab took the store's current session
    assert looked["fill"] is not None
    nvim.command("tabclose")
    nvim.command("sleep 100m")

    nvim.command("Nodecode please alpha")  # tab 1, the only tab now

    assert session_of(nvim, 1) == current
    wait_for(lambda: not job_of(nvim, 1), timeout=30)


def test_a_tab_that_only_looked_holds_nothing_another_tab_opens_the_context(nvim, two_turns):
    """`:tabnew | NodecodeContext` before any chat: tab 1's statusline had looked at
    the session, which pinned it; the new tab's look was refused (bench/responsive.py
    found it: "this tab has no chat of its own yet")."""
    looked = nvim.exec_lua("return require('nodecode.rpc').call('status')")  # tab 1 looks
    nvim.command("tabnew")
    open_context(nvim)

    assert nvim.eval("&filetype") == "nodecode-context", messages_of(nvim)
    assert session_of(nvim, 2) == session_of(nvim, 1)
    assert looked["fill"] is not None
    nvim.command("tabnext 1")
    nvim.command("Nodecode please alpha")  # tab 1 opens its chat on that session
    wait_for(lambda: not job_of(nvim, 1), timeout=30)
    assert session_of(nvim, 1) == session_of(nvim, 2)


def test_the_context_opened_from_a_chats_own_tab_is_written_into_that_chats_session(
    nvim, home, workspace, loopback
):
    """chat.position = 'tab': :NodecodeContext and :w in the chat's tab act for
    the tab the chat was asked from, as the chat's commands there do."""
    (workspace / "a.txt").write_text("hello from a\n")
    read = {"text": "reading", "calls": [{"code": ';; read a\n(read-file "a.txt")'}]}
    srv = loopback([read, {"text": "done reading"}, {"text": "second answer"}])
    configure(home, srv)
    nvim.exec_lua("require('nodecode').setup({ chat = { position = 'tab' } })")
    nvim.command("Nodecode first question")  # the chat opens in tab 2
    wait_for(lambda: "done reading" in "\n".join(chat_lines(nvim, 1)), timeout=30)
    wait_for(lambda: not job_of(nvim, 1), timeout=30)
    first = session_of(nvim, 1)

    nvim.command("tabnext 2")  # the chat's own tab
    open_context(nvim)
    assert nvim.eval("&filetype") == "nodecode-context"
    assert first in nvim.current.buffer.name
    lines = nvim.current.buffer[:]
    at = next(i for i, s in enumerate(lines) if s.startswith("[[m:") and s.endswith(" tool]]"))
    end = next(i for i in range(at + 1, len(lines)) if lines[i].startswith("[[m:"))
    assert "hello from a" in "\n".join(lines[at:end])
    del nvim.current.buffer[at:end]  # the read's result (its call goes too)
    nvim.command("write")

    nvim.command("tabnext 1")
    nvim.command("Nodecode second question")
    wait_for(lambda: len(srv.requests) == 3, timeout=30)
    wait_for(lambda: not job_of(nvim, 1), timeout=30)
    sent = "\n".join(user_texts(srv.requests[2].body))
    assert "second question" in sent and "hello from a" not in sent, sent
    assert session_of(nvim, 1) == first
