"""Slash commands typed in the chat's input area: each runs as its :Nodecode…
command does (the same window, report or message) and sends nothing; `//`
escapes; an unknown `/word` is one error and the input keeps it; `/` at the
start of the input offers the names."""

from __future__ import annotations

from pathlib import Path

import pynvim
import pytest
from nodecode import slash
from nodecode.log.store import open_store

from .conftest import buffer_lines, chat, configure, last_user_text, wait_for
from .ui_helpers import idle, make_session, notes, notified

MODEL = {"context_window": 3000, "max_tokens": 500}
LONG = "a long answer about the parser and its tests. " * 40


@pytest.fixture
def asked(home: Path, workspace: Path, loopback):
    """A session with two finished turns; the server (nothing more may reach it)."""
    srv = loopback([{"text": LONG}, {"text": LONG}, {"text": "an answer"}])
    configure(home, srv, model_fields=MODEL)
    sid = make_session(home, workspace, ["where is the parser", "and its tests"])
    return srv, sid


def kinds(home: Path, sid: str) -> list[str]:
    store = open_store(home, "default")
    try:
        return [e.kind for e in store.events(sid)]
    finally:
        store.close()


def typed(nv: pynvim.Nvim, text: str) -> None:
    """Open the input area, type ``text`` and send it with <C-s>."""
    nv.command("Nodecode")
    assert nv.current.buffer.name == "nodecode://input"
    nv.input(text.replace("<", "<lt>") + "<C-s>")


def asks_in_chat(nv: pynvim.Nvim) -> int:
    return chat(nv).count("## you")


def test_each_command_the_table_names_is_a_nodecode_command_taking_its_words(nvim):
    commands = nvim.exec_lua("""
        local out = {}
        for name, c in pairs(require('nodecode.commands').commands) do
          out[name] = { nargs = c.nargs or 0, bang = c.bang == true }
        end
        return out
    """)
    for c in slash.COMMANDS:
        if c.nvim is None:
            continue
        assert c.nvim in commands, c.nvim
        takes = commands[c.nvim]
        assert (takes["nargs"] != 0) == (c.nargs != "0"), c.name
        assert takes["bang"] or not (c.bang or c.force), c.name


def test_slash_context_shows_the_status_report_as_nodecode_status_does(nvim, asked, home):
    srv, sid = asked

    typed(nvim, "/context")

    wait_for(lambda: nvim.eval("&filetype") == "nodecode-status")
    report = nvim.current.buffer[:]
    assert report[0].startswith(f"session {sid} · loopback/loopback-model")
    nvim.input("q")
    nvim.command("NodecodeStatus")
    assert nvim.current.buffer[:] == report
    assert buffer_lines(nvim, "nodecode://input") == [""]
    assert len(srv.requests) == 2 and kinds(home, sid).count("user") == 2
    assert asks_in_chat(nvim) == 2


def test_slash_tree_opens_the_tree_window(nvim, asked):
    typed(nvim, "/tree")

    wait_for(lambda: nvim.current.buffer.name == "nodecode://tree")
    assert [line.split("  seq")[0].strip() for line in nvim.current.buffer[:]] == [
        "○ 1  where is the parser",
        "● 2  and its tests",
    ]


def test_slash_undo_undoes_as_nodecode_undo_and_the_ask_comes_back(nvim, asked, home):
    srv, sid = asked
    notified(nvim)

    typed(nvim, "/undo")

    wait_for(lambda: buffer_lines(nvim, "nodecode://input") == ["and its tests"])
    assert notes(nvim) == ["nodecode: undone"]  # what :NodecodeUndo says of a turn without files
    assert "_undone_" in chat(nvim)
    assert kinds(home, sid)[-1] == "move"
    nvim.command("stopinsert")
    nvim.command("%delete")
    nvim.input("i/redo<C-s>")
    wait_for(lambda: notes(nvim) == ["nodecode: undone", "nodecode: redone"])
    assert buffer_lines(nvim, "nodecode://input") == [""]
    nvim.command("NodecodeUndo")  # the same again, by the command
    wait_for(lambda: len(notes(nvim)) == 3)
    assert notes(nvim)[2] == "nodecode: undone"
    assert buffer_lines(nvim, "nodecode://input") == ["and its tests"]
    assert kinds(home, sid).count("user") == 2 and len(srv.requests) == 2


def test_slash_compact_evicts_with_a_receipt_as_nodecode_evict_does(nvim, asked, home):
    srv, sid = asked
    notified(nvim)

    typed(nvim, "/compact through 1")

    [said] = wait_for(lambda: notes(nvim))
    assert said.startswith(f"nodecode: [[receipt default/{sid} evict]]\nevicted at seq 8: turn 1")
    assert kinds(home, sid).count("evict") == 1 and kinds(home, sid).count("user") == 2
    assert len(srv.requests) == 2


def test_slash_budget_sets_the_override_and_slash_model_opens_the_picker(nvim, asked, home):
    srv, _ = asked
    notified(nvim)

    typed(nvim, "/budget 9000")

    [said] = wait_for(lambda: notes(nvim))
    assert "store override 9000" in said and "shadowed by config.jsonc (3000)" in said
    typed(nvim, "/model")
    title = wait_for(
        lambda: nvim.exec_lua("""
        local st = require('nodecode.ui.float_picker').current
        return st and vim.api.nvim_win_get_config(st.pwin).title[1][1]
    """)
    )
    assert "model of the next request" in title
    assert len(srv.requests) == 2


def test_slash_model_with_a_name_switches_as_nodecode_model_does(nvim, asked):
    notified(nvim)

    typed(nvim, "/model loopback/loopback-model")

    [said] = wait_for(lambda: notes(nvim))
    assert said.startswith("nodecode: model: loopback/loopback-model from the next request")


def test_slash_recall_opens_the_picker_on_every_session(nvim, asked):
    typed(nvim, "/recall parser")

    shown = wait_for(
        lambda: nvim.exec_lua("""
        local st = require('nodecode.ui.float_picker').current
        if not st then return nil end
        return { title = vim.api.nvim_win_get_config(st.pwin).title[1][1],
                 prompt = vim.api.nvim_buf_get_lines(st.pbuf, 0, -1, false)[1] }
    """)
    )
    assert "every session" in shown["title"] and shown["prompt"] == "parser"


def test_slash_fork_works_in_the_child(nvim, asked):
    _, sid = asked
    notified(nvim)

    typed(nvim, "/fork")

    said = wait_for(lambda: [n for n in notes(nvim) if "forked" in n])
    child = nvim.exec_lua("return require('nodecode.rpc').call('info').id")
    assert child != sid and said == [f"nodecode: forked: this Neovim now works in session {child}"]


def test_slash_help_lists_the_commands_in_the_chat(nvim, asked):
    srv, _ = asked

    typed(nvim, "/help")

    text = wait_for(lambda: "//TEXT" in chat(nvim) and chat(nvim))
    for line in slash.help_lines():
        assert f"> {line}" in text
    assert buffer_lines(nvim, "nodecode://input") == [""]
    assert len(srv.requests) == 2


def test_an_unknown_command_is_one_error_and_the_input_keeps_it(nvim, asked, home):
    srv, sid = asked
    notified(nvim)

    typed(nvim, "/contxt now")

    said = wait_for(lambda: notes(nvim))
    assert said == [
        "nodecode: /contxt is not a command (did you mean /context?): "
        "/help lists them, //contxt sends it as text"
    ]
    assert buffer_lines(nvim, "nodecode://input") == ["/contxt now"]
    assert len(srv.requests) == 2 and kinds(home, sid).count("user") == 2
    assert asks_in_chat(nvim) == 2


def test_words_a_command_cannot_take_are_one_error(nvim, asked):
    notified(nvim)

    typed(nvim, "/tree deep")
    wait_for(lambda: notes(nvim))
    nvim.command("stopinsert")
    nvim.command("%delete")
    nvim.input("i/fork x<C-s>")
    said = wait_for(lambda: len(notes(nvim)) == 2 and notes(nvim))

    assert said == [
        "nodecode: /tree: expected no arguments (got 'deep'); /help lists the commands",
        'nodecode: :NodecodeFork expects a turn number (got "x")',
    ]


def test_while_a_turn_streams_slash_commands_run_and_slash_undo_is_refused_as_undo_is(
    nvim, home, loopback
):
    words = " ".join(f"word{i}" for i in range(60))
    srv = loopback([{"text": words}], chunk_delay=0.2)
    configure(home, srv)
    nvim.command("Nodecode tell me a long story")
    wait_for(lambda: "word0" in chat(nvim))
    notified(nvim)

    typed(nvim, "/undo")
    wait_for(lambda: notes(nvim))
    assert buffer_lines(nvim, "nodecode://input") == ["/undo"]
    nvim.command("stopinsert")
    nvim.command("%delete")
    nvim.input("i/context<C-s>")

    wait_for(lambda: nvim.eval("&filetype") == "nodecode-status")
    assert notes(nvim) == ["nodecode: a turn is running — :NodecodeStop to stop it"]
    nvim.input("q")
    nvim.command("Nodecode /help")
    said = wait_for(lambda: len(notes(nvim)) == 2 and notes(nvim)[1])
    assert said.startswith("nodecode: slash commands") and "> /context" not in chat(nvim)
    assert "word59" not in chat(nvim) and len(srv.requests) == 1
    nvim.command("NodecodeStop")
    wait_for(lambda: "_stopped_" in chat(nvim))


def test_a_double_slash_and_a_path_are_sent_as_asks(nvim, home, loopback):
    srv = loopback([{"text": "one"}, {"text": "two"}])
    configure(home, srv)

    typed(nvim, "//context please")
    wait_for(lambda: "one" in chat(nvim) and idle(nvim))
    nvim.command("Nodecode /etc/hosts is broken")
    wait_for(lambda: "two" in chat(nvim) and idle(nvim))

    assert [last_user_text(r.body) for r in srv.requests] == [
        "/context please",
        "/etc/hosts is broken",
    ]
    assert "## you\n/context please\n" in chat(nvim)


def test_nodecode_with_a_slash_command_runs_it(nvim, asked):
    srv, _ = asked

    nvim.command("Nodecode /tree")

    wait_for(lambda: nvim.current.buffer.name == "nodecode://tree")
    assert len(srv.requests) == 2


def test_a_slash_at_the_start_of_the_input_offers_the_names(nvim, asked):
    nvim.command("Nodecode")

    nvim.input("/")
    wait_for(lambda: nvim.funcs.pumvisible() == 1)
    offered = [i["word"] for i in nvim.funcs.complete_info(["items"])["items"]]
    assert offered == [f"/{n}" for n in slash.BY_NAME]
    assert nvim.current.line == "/"  # shown, not typed in

    nvim.input("tr<C-y>")
    wait_for(lambda: nvim.current.line == "/tree")
    nvim.input("<C-s>")
    wait_for(lambda: nvim.current.buffer.name == "nodecode://tree")


def test_omni_completion_completes_a_name_and_the_popup_leaves_completeopt_as_it_was(nvim, asked):
    before = nvim.eval("&completeopt")
    nvim.command("Nodecode")
    nvim.input("/con")
    wait_for(lambda: nvim.funcs.pumvisible() == 1)

    nvim.input("<C-e>")

    assert nvim.funcs.pumvisible() == 0 and nvim.current.line == "/con"
    assert nvim.eval("&completeopt") == before
    nvim.input("<C-x><C-o>")  # the one name left: typed in, as omni completion does
    wait_for(lambda: nvim.current.line == "/context")
    nvim.input(" a/b /")
    assert nvim.funcs.pumvisible() == 0 and nvim.current.line == "/context a/b /"
