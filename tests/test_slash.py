"""Slash commands: which messages are commands (`/NAME`, a name of the one
table), which are sent (`//` escapes, paths), and what each runs: in `nodecode
ask`, the `nodecode` command the table names instead of asking (same output,
usage errors and exit status), sending nothing and recording no ask; in Neovim,
the :Nodecode… command (tests/nvim/test_slash.py drives the chat)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import run_cli, write_config
from nodecode import slash
from nodecode.errors import UserError
from nodecode.log import leases
from nodecode.log.store import open_store
from nodecode.loopback.script import last_user_text

MODEL = [{"id": "loopback-model", "context_window": 3000, "max_tokens": 500}]
LONG = "a long answer about the parser and its tests. " * 40


@pytest.fixture
def asked(loopback, home: Path, workspace: Path):
    """A session with two finished turns; the server that answered them."""
    srv = loopback([{"text": LONG}, {"text": LONG}])
    write_config(home, srv, models=MODEL)
    sid = run_cli("new", home=home).stdout.strip()
    for ask in ("where is the parser", "and its tests"):
        assert run_cli("ask", ask, home=home, cwd=workspace).returncode == 0
    return srv, sid


def kinds(home: Path, sid: str) -> list[str]:
    store = open_store(home, "default")
    try:
        return [e.kind for e in store.events(sid)]
    finally:
        store.close()


def outcome(done) -> tuple[int, str, str]:
    print("PEEK", done.args[-1], done.returncode, done.stdout[:400], done.stderr[:200])
    return done.returncode, done.stdout, done.stderr


# -- what a message is ---------------------------------------------------------------


def test_a_known_name_after_the_slash_is_a_command_with_its_words():
    call = slash.read("/evict  through 2 ")
    assert isinstance(call, slash.Call)
    assert call.command.name == "evict" and call.words() == ["through", "2"]
    assert slash.read("/compact").command.name == "evict"
    assert slash.read("/recall 'two words' three").words() == ["two words", "three"]


@pytest.mark.parametrize(
    ("typed", "sent"),
    [
        ("//context", "/context"),
        ("///x", "//x"),
        ("/etc/hosts is broken", "/etc/hosts is broken"),
        ("a/b and /tree", "a/b and /tree"),
        ("/ alone", "/ alone"),
        ("/2 is half", "/2 is half"),
        (" /tree", " /tree"),
    ],
)
def test_other_text_is_sent_as_typed_or_without_the_escapes_slash(typed, sent):
    assert slash.read(typed) == sent


def test_an_unknown_name_is_one_line_naming_it_and_pointing_at_help():
    with pytest.raises(UserError) as e:
        slash.read("/contxt the rest")
    assert str(e.value) == (
        "/contxt is not a command (did you mean /context?): "
        "/help lists them, //contxt sends it as text"
    )


def test_neovim_runs_the_nodecode_command_each_names():
    def nvim(text: str) -> dict:
        return slash.in_neovim(slash.read(text))

    assert nvim("/context") == {
        "name": "context",
        "command": "NodecodeStatus",
        "args": "",
        "bang": False,
    }
    assert nvim("/compact through 2")["command"] == "NodecodeEvict"
    assert nvim("/compact through 2")["args"] == "through 2"
    assert nvim("/undo --force")["bang"] is True and nvim("/undo")["bang"] is False
    assert nvim("/recall 'the parser'") == {
        "name": "recall",
        "command": "NodecodeRecall",
        "args": "the parser",
        "bang": True,
    }
    assert nvim("/help")["lines"] == slash.help_lines()
    with pytest.raises(UserError, match=r"^/tree: expected no arguments \(got 'x'\)"):
        nvim("/tree x")
    with pytest.raises(UserError, match=r"^/model \[PROVIDER/MODEL\]: expected"):
        nvim("/model a/b c/d")


# -- the command line ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "command"),
    [
        ("/context", ["status"]),
        ("/evict 30", ["evict", "30"]),
        ("/compact through 1", ["compact", "through", "1"]),
        ("/tree", ["tree"]),
        ("/undo", ["undo"]),
        ("/recall parser", ["recall-search", "parser"]),
        ("/budget", ["budget"]),
        ("/budget 9000", ["budget", "set", "9000"]),
        ("/budget clear", ["budget", "clear"]),
        ("/evict soon", ["evict", "soon"]),  # the matching command's user error (exit 1)
        ("/evict --now", ["evict", "--now"]),  # and its usage error (exit 2)
        ("/fork x", ["fork", "--at", "x"]),
        ("/recall", ["recall-search"]),
        ("/undo please", ["undo", "please"]),
        ("/tree --json", ["tree", "--json"]),
    ],
)
def test_ask_slash_prints_and_exits_as_the_command_it_names(
    asked, home, workspace, tmp_path, typed, command
):
    srv, sid = asked
    slashed, plain = tmp_path / "slashed", tmp_path / "plain"
    shutil.copytree(home, slashed)
    shutil.copytree(home, plain)

    by_slash = run_cli("ask", typed, home=slashed, cwd=workspace)
    by_command = run_cli(*command, home=plain, cwd=workspace)

    assert outcome(by_slash) == outcome(by_command)
    assert by_slash.stdout or by_slash.stderr
    assert len(srv.requests) == 2  # the two asks of the fixture, nothing since
    assert kinds(slashed, sid) == kinds(plain, sid)


def test_ask_slash_context_is_the_status_report_and_records_nothing(asked, home, workspace):
    srv, sid = asked
    before = kinds(home, sid)

    done = run_cli("ask", "/context", home=home, cwd=workspace)

    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == run_cli("status", home=home, cwd=workspace).stdout
    assert done.stdout.startswith(f"session {sid} · loopback/loopback-model\n")
    assert len(srv.requests) == 2 and kinds(home, sid) == before
    assert before.count("user") == 2


def test_a_slash_command_takes_no_lease_so_it_runs_beside_a_turn(asked, home, workspace):
    srv, sid = asked
    store = open_store(home, "default")
    held = leases.Lease(store, sid).acquire()  # a turn of this (live) process
    try:
        busy = run_cli("ask", "hello", home=home, cwd=workspace)
        assert busy.returncode == 1 and "busy" in busy.stderr.lower(), busy.stderr

        for typed in ("/context", "/tree", "/recall parser", "/help"):
            done = run_cli("ask", typed, home=home, cwd=workspace)
            assert done.returncode == 0, (typed, done.stderr)
        owner = store.read("SELECT owner FROM leases WHERE session = ?", (sid,))
        assert owner == [(held.owner,)]
    finally:
        held.release()
        store.close()
    assert len(srv.requests) == 2


def test_ask_slash_undo_takes_back_the_turn_and_its_files_as_undo_does(loopback, home, workspace):
    srv = loopback([{"calls": [{"code": '(write-file "made.txt" "x")'}]}, {"text": "made it"}])
    write_config(home, srv)
    run_cli("new", home=home)
    assert run_cli("ask", "--yes", "make made.txt", home=home, cwd=workspace).returncode == 0
    assert (workspace / "made.txt").read_text() == "x"

    undone = run_cli("ask", "/undo", home=home, cwd=workspace)

    assert undone.returncode == 0, undone.stderr
    assert undone.stdout == "undid turn 1; the head is the start (no turn)\nmake made.txt\n"
    assert "made.txt" in undone.stderr and not (workspace / "made.txt").exists()
    redone = run_cli("ask", "/redo", home=home, cwd=workspace)
    assert (redone.returncode, redone.stdout) == (0, "redid turn 1\n")
    assert (workspace / "made.txt").read_text() == "x"
    again = run_cli("ask", "/redo", home=home, cwd=workspace)
    assert outcome(again)[0] == 1 == run_cli("redo", home=home, cwd=workspace).returncode
    assert len(srv.requests) == 2


def test_ask_slash_fork_prints_the_child_as_fork_does(asked, home, workspace):
    _, sid = asked

    done = run_cli("ask", "/fork 1", home=home, cwd=workspace)

    assert done.returncode == 0, done.stderr
    child = done.stdout.strip()
    assert child.startswith("s-") and child != sid
    listed = run_cli("sessions", home=home).stdout
    assert f"{child}  parent={sid}" in listed


def test_an_unknown_slash_command_is_one_line_exit_1_and_nothing_sent(asked, home, workspace):
    srv, sid = asked
    before = kinds(home, sid)

    done = run_cli("ask", "/contxt", home=home, cwd=workspace)

    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        "nodecode: /contxt is not a command (did you mean /context?): "
        "/help lists them, //contxt sends it as text\n"
    )
    assert len(srv.requests) == 2 and kinds(home, sid) == before


def test_a_double_slash_sends_the_text_with_one_slash(loopback, home, workspace):
    srv = loopback([{"text": "a slash"}, {"text": "a path"}])
    write_config(home, srv)

    escaped = run_cli("ask", "//context please", home=home, cwd=workspace)
    path = run_cli("ask", "/etc/hosts is broken", home=home, cwd=workspace)

    assert (escaped.returncode, escaped.stdout) == (0, "a slash\n")
    assert (path.returncode, path.stdout) == (0, "a path\n")
    sent = [last_user_text(r.body) for r in srv.model_requests]
    assert sent == ["/context please", "/etc/hosts is broken"]


def test_ask_slash_help_lists_every_command(loopback, home, workspace):
    write_config(home, loopback([]))

    done = run_cli("ask", "/help", home=home, cwd=workspace)

    assert done.returncode == 0 and done.stdout.splitlines() == slash.help_lines()
    for c in slash.COMMANDS:
        assert f"\n/{c.name}" in "\n" + done.stdout
    assert "/compact" in done.stdout and "//TEXT" in done.stdout
    extra = run_cli("ask", "/help me", home=home, cwd=workspace)
    assert extra.returncode == 2 and extra.stderr == (
        "nodecode: ask: /help takes no arguments (got 'me') (see nodecode ask --help)\n"
    )


def test_an_unclosed_quote_is_the_commands_usage_error(asked, home, workspace):
    done = run_cli("ask", "/recall 'the parser", home=home, cwd=workspace)

    assert done.returncode == 2
    assert done.stderr == (
        "nodecode: recall-search: /recall WORDS…: No closing quotation "
        '(got "\'the parser") (see nodecode recall-search --help)\n'
    )


MODELS = [
    {"id": "loopback-model", "context_window": 3000, "max_tokens": 500},
    {"id": "big", "context_window": 400000},
]


def test_ask_slash_model_lists_the_models_and_checks_a_name(loopback, home, workspace):
    srv = loopback([])
    write_config(home, srv, models=MODELS)

    listed = run_cli("ask", "/model", home=home, cwd=workspace)
    bad = run_cli("ask", "/model loopback/nope", home=home, cwd=workspace)
    good = run_cli("ask", "/model loopback/big", home=home, cwd=workspace)

    assert listed.returncode == 0 and listed.stdout.splitlines() == [
        "* loopback/loopback-model  3k window · config",
        "  loopback/big  400k window · config",
    ]
    assert bad.returncode == 1 and "loopback has no model 'nope'" in bad.stderr
    assert good.returncode == 1 and good.stderr == (
        "nodecode: /model: a switch holds in the Neovim that makes it; for one command "
        "here: NODECODE_PROVIDER=loopback NODECODE_MODEL=big nodecode ask …\n"
    )
    assert srv.requests == []


def test_the_help_and_the_readme_name_every_slash_command():
    root = Path(__file__).resolve().parents[1]
    doc = (root / "doc" / "nodecode.txt").read_text()
    section = doc[doc.index("*nodecode-slash*") : doc.index("4. THE CHAT")]
    readme = (root / "README.md").read_text()
    table = readme[readme.index("## Slash commands") : readme.index("## Benchmarks")]
    for name in slash.BY_NAME:
        assert f"  /{name} " in section, name
        assert f"`/{name}" in table, name
    assert "*nodecode-slash*" in doc[doc.index("*nodecode-commands*") : doc.index("4. THE CHAT")]
