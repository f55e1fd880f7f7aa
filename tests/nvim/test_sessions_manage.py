"""Sessions managed from Neovim: a rename from the sessions picker (and
:NodecodeSessionRename), a delete from it after a confirmation, and the
automatic title after the first reply; each title the same in the picker,
the tree's winbar and `nodecode sessions`."""

from __future__ import annotations

import pytest
from helpers import run_cli, session_titles

from .conftest import configure, wait_for
from .test_approval import approval_window
from .test_picker import picker_key, wait_rows
from .ui_helpers import idle, make_session, messages_of


@pytest.fixture
def sessions(home, workspace, loopback):
    """An older session about parsers, then the current one about tests."""
    srv = loopback([{"text": "in parse.py"}, {"text": "a tokenizer"}, {"text": "pytest -q"}])
    configure(home, srv)
    older = make_session(home, workspace, ["where is the parser"])
    current = make_session(home, workspace, ["how do I run the tests", "did they pass"])
    return older, current


def tree_winbar(nv) -> str:
    nv.command("NodecodeTree")
    return nv.exec_lua("return vim.wo.winbar")


def test_rename_from_the_picker_shows_the_title_in_picker_tree_and_cli(
    nvim, sessions, home, workspace
):
    _, current = sessions
    nvim.command("NodecodeSessions")
    wait_rows(nvim, lambda rows: len(rows) == 3)

    nvim.input(picker_key(nvim, "rename"))
    wait_for(lambda: nvim.api.get_mode()["mode"] == "c")  # vim.ui.input's prompt
    nvim.input("<C-u>running the tests<CR>")

    rows = wait_rows(nvim, lambda rows: any("running the tests" in r for r in rows))["rows"]
    nvim.input("<Esc>")
    assert rows[0].startswith(f"* {current}") and rows[0].endswith("2 turns  running the tests")
    assert tree_winbar(nvim) == f" running the tests  · {current}"
    assert session_titles(home, workspace)[current] == "running the tests"

    nvim.command("NodecodeSessionRename the test run")
    assert tree_winbar(nvim) == f" the test run  · {current}"
    assert session_titles(home, workspace)[current] == "the test run"

    nvim.input(":NodecodeSessionRename<CR>")  # no title: the prompt holds the current one
    wait_for(lambda: nvim.api.get_mode()["mode"] == "c")
    assert nvim.funcs.getcmdline() == "the test run"
    nvim.input("<Esc>")


def test_delete_from_the_picker_asks_and_takes_the_session_out_of_recall(
    nvim, sessions, home, workspace
):
    older, current = sessions
    nvim.ui_attach(80, 24, ext_linegrid=True)  # without a UI, confirm() answers its default
    assert "parser" in run_cli("recall-search", "parser", home=home).stdout
    nvim.command("NodecodeSessions")
    wait_rows(nvim, lambda rows: len(rows) == 3)
    nvim.input("where is")
    wait_rows(nvim, lambda rows: len(rows) == 1 and older in rows[0])

    nvim.input(picker_key(nvim, "delete"))
    wait_for(lambda: nvim.api.get_mode()["mode"] == "r?")  # confirm()
    nvim.input("k")  # Keep
    wait_rows(nvim, lambda rows: len(rows) == 3)
    assert older in session_titles(home, workspace)

    nvim.input("where is")
    wait_rows(nvim, lambda rows: len(rows) == 1 and older in rows[0])
    nvim.input(picker_key(nvim, "delete"))
    wait_for(lambda: nvim.api.get_mode()["mode"] == "r?")
    nvim.input("d")  # Delete

    rows = wait_rows(nvim, lambda rows: len(rows) == 2)["rows"]
    nvim.input("<Esc>")
    assert rows[0].startswith(f"* {current}") and rows[1] == "+ new session"
    assert list(session_titles(home, workspace)) == [current]
    assert "parser" not in run_cli("recall-search", "parser", home=home).stdout
    assert nvim.exec_lua("return require('nodecode.rpc').call('info').id") == current


def test_the_automatic_title_reaches_the_picker_and_the_tree(nvim, home, workspace, loopback):
    srv = loopback(
        [
            {"text": "it subtracts"},
            {"text": "Why add subtracts", "match": "give this conversation a title"},
        ]
    )
    configure(home, srv, session_title="auto")
    nvim.command("Nodecode why does add subtract?")
    wait_for(lambda: idle(nvim))

    sid = wait_for(
        lambda: next(
            (s for s, t in session_titles(home, workspace).items() if t == "Why add subtracts"),
            None,
        )
    )
    nvim.command("NodecodeSessions")
    rows = wait_rows(nvim, lambda rows: len(rows) == 2)["rows"]
    nvim.input("<Esc>")
    assert rows[0].startswith(f"* {sid}") and rows[0].endswith("1 turn  Why add subtracts")
    assert tree_winbar(nvim) == f" Why add subtracts  · {sid}"
    assert srv.model_requests[-1].body["max_tokens"] == 32


def test_a_session_the_cli_deletes_leaves_neovim_in_a_new_one(nvim, sessions, home, workspace):
    older, current = sessions
    assert nvim.exec_lua("return require('nodecode.rpc').call('info').id") == current
    done = run_cli("sessions", "delete", current, "--yes", home=home, cwd=workspace)
    assert done.returncode == 0, done.stderr

    nvim.command("NodecodeSessions")
    rows = wait_rows(nvim, lambda rows: len(rows) == 3)["rows"]
    nvim.input("<Esc>")
    now = nvim.exec_lua("return require('nodecode.rpc').call('info').id")
    assert now not in (current, older) and rows[0].startswith(f"* {now}")
    assert not any(current in r for r in rows) and older in rows[1]


def test_a_failed_automatic_title_is_one_warning_and_the_first_line_stays(
    nvim, home, workspace, loopback
):
    srv = loopback([{"text": "it subtracts"}])
    srv.add_fault({"at": 2, "kind": "400", "message": "no titles today"})
    configure(home, srv, session_title="auto")
    nvim.command("Nodecode why does add subtract?")
    wait_for(lambda: idle(nvim))

    said = wait_for(lambda: "no title for session" in messages_of(nvim) and messages_of(nvim))
    sid = nvim.exec_lua("return require('nodecode.rpc').call('info').id")
    (line,) = [x for x in said.splitlines() if "no title for session" in x]
    assert line.startswith(f"nodecode: no title for session {sid} (")
    assert "no titles today" in line and line.endswith("): the first line stays")
    assert tree_winbar(nvim) == f" why does add subtract?  · {sid}"
    assert session_titles(home, workspace)[sid] == "why does add subtract?"


def test_a_session_whose_turn_runs_is_not_deleted(nvim, home, workspace, loopback):
    srv = loopback([{"calls": [{"code": '(shell "touch ran.txt")'}]}, {"text": "Ran."}])
    configure(home, srv)
    nvim.command("Nodecode run it")
    wait_for(lambda: approval_window(nvim))  # the turn waits for the person
    sid = nvim.exec_lua("return require('nodecode.rpc').call('info').id")

    said = nvim.exec_lua(
        "local ok, err = pcall(require('nodecode.rpc').call, 'delete_session', ...); return err",
        sid,
    )
    cli = run_cli("sessions", "delete", sid, "--yes", home=home, cwd=workspace)

    assert said.endswith("a turn is running — :NodecodeStop to stop it"), said
    assert cli.returncode == 1 and cli.stderr == (
        f"nodecode: session {sid} is running a turn: stop it first (nothing was deleted)\n"
    )
    assert sid in session_titles(home, workspace)
    nvim.input("r")  # refuse, and let the turn end
    wait_for(lambda: idle(nvim))
