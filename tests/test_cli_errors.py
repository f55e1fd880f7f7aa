"""Bad input to the real CLI: one line on stderr, never a traceback, nothing
stored (doc/design.md "Rules the tests enforce"; issue 11, item 9)."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from helpers import run_cli, write_config
from nodecode.log.store import open_store

HUGE = "99999999999999999999999"  # past SQLite's (and msgpack's) 64-bit integers
NOT_UTF8 = os.fsdecode(b"caf\xe9")  # argv's undecodable bytes arrive as surrogates


@pytest.fixture
def cli(loopback, home, workspace):
    """A home with one finished turn; ``run(*args)`` runs the real CLI in it."""
    srv = loopback([{"text": "hello"}])
    write_config(home, srv)
    sid = run_cli("new", "--title", "t", home=home).stdout.strip()
    assert run_cli("ask", "hi", home=home, cwd=workspace).returncode == 0

    def run(*args: str):
        return run_cli(*args, home=home, cwd=workspace)

    run.home, run.sid, run.srv = home, sid, srv
    return run


def dump(home) -> list[str]:
    """Every row of the store, to see that a refused command stored nothing."""
    db = sqlite3.connect(home / "store" / "default.db")
    try:
        return [line for line in db.iterdump() if 'INTO "leases"' not in line]
    finally:
        db.close()


def one_line_error(proc, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nodecode: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args, names",
    [
        (["ask", NOT_UTF8], "TEXT"),
        (["new", "--title", NOT_UTF8], "--title"),
        (["eval", NOT_UTF8], "CELL"),
        (["recall-log", "--match", NOT_UTF8], "--match"),
        (["recall-search", NOT_UTF8], "WORDS"),
    ],
)
def test_a_non_utf8_argument_is_one_line_naming_it_and_stores_nothing(cli, args, names):
    before = dump(cli.home)
    line = one_line_error(cli(*args), 2)
    assert names in line and "UTF-8" in line and "0xe9" in line, line
    assert dump(cli.home) == before
    assert len(cli.srv.model_requests) == 1  # nothing was sent either


INTEGER_ARGS = [
    ["recall-entry", HUGE],
    ["recall-log", "--limit", HUGE],
    ["recall-log", "--before", HUGE],
    ["recall-search", "hi", "--limit", HUGE],
    ["budget", "set", HUGE],
    ["continue", HUGE],
    ["rewind", HUGE],
    ["fork", "--at", HUGE],
]


@pytest.mark.parametrize("args", INTEGER_ARGS, ids=lambda a: " ".join(a[:-1]))
def test_a_huge_integer_is_one_line_naming_the_argument_and_stores_nothing(cli, args):
    before = dump(cli.home)
    line = one_line_error(cli(*args), 2)
    assert HUGE in line and "whole number" in line, line
    assert dump(cli.home) == before


@pytest.mark.parametrize(
    "args",
    [["evict", HUGE], ["evict", "through", HUGE], ["recall-entry", "-" + HUGE]],
    ids=lambda a: " ".join(a),
)
def test_other_out_of_range_numbers_are_one_line_user_errors(cli, args):
    before = dump(cli.home)
    one_line_error(cli(*args), 1 if args[0] == "evict" else 2)
    assert dump(cli.home) == before


def integer_arguments():
    """(command, argv) for every integer argument of every command, set to HUGE."""
    from nodecode.cli import parser

    sub = next(a for a in parser()._actions if a.dest == "command")
    for name, p in sub.choices.items():
        for action in p._actions:
            if getattr(action.type, "__name__", None) not in ("int", "integer"):
                continue
            if name == "budget":
                yield name, ["budget", "set", HUGE]
            elif action.option_strings:
                required = [a for a in p._actions if not a.option_strings and a.required]
                yield name, [name, *["hi"] * len(required), action.option_strings[0], HUGE]
            else:
                yield name, [name, HUGE]


def test_every_integer_argument_of_every_command_is_range_checked(cli):
    """The fuzz: whatever command takes an integer, a huge one is a usage error."""
    found = list(integer_arguments())
    assert {n for n, _ in found} >= {a[0] for a in INTEGER_ARGS}
    before = dump(cli.home)
    for _, args in found:
        one_line_error(cli(*args), 2)
    assert dump(cli.home) == before


def test_budget_set_refuses_a_window_the_store_cannot_hold_from_any_caller(cli):
    from nodecode import budget as budgets
    from nodecode.app import App
    from nodecode.errors import UserError

    app = App.open(cli.home, "default", cli.home, environ={})
    try:
        with pytest.raises(UserError, match="positive whole number"):
            budgets.set_override(app.workspace, app.config, int(HUGE))
    finally:
        app.close()


def test_a_context_file_replaced_by_a_directory_fails_the_turn_in_one_line(cli):
    exported = cli("context")
    assert exported.returncode == 0, exported.stderr
    path = exported.stdout.strip()
    os.remove(path)
    os.mkdir(path)
    cli.srv.add_rounds([{"text": "never sent"}])
    line = one_line_error(cli("ask", "go on"), 1)
    assert path in line and "directory" in line and "regular file" in line, line
    assert len(cli.srv.model_requests) == 1
    store = open_store(cli.home, "default")
    try:
        turns = store.read("SELECT number, status FROM turns WHERE session = ?", (cli.sid,))
        assert sorted(turns)[-1] == (2, "failed")
        assert store.events(cli.sid)[-1].kind == "error"
    finally:
        store.close()
    again = one_line_error(cli("context"), 1)
    assert path in again and "directory" in again
    cell = cli("eval", "(context)")  # the agent's (context) gets the same line as its result
    assert cell.returncode == 1 and cell.stderr.startswith(f"error: {path}: expected"), cell.stderr


def verb_integer_cells() -> list[str]:
    """A cell per integer argument of every verb, that argument set to HUGE."""
    from nodecode.verbs.table import VERBS

    def filler(p) -> str:
        return "1" if p.kind is int else '"x"'

    cells = []
    for name, verb in VERBS.items():
        for i, p in enumerate(verb.args):
            if p.kind is int:
                rest = [filler(q) if j != i else HUGE for j, q in enumerate(verb.args)]
                cells.append(f"({name} {' '.join(rest)})")
        for key, p in verb.keywords.items():
            if p.kind is int:
                needed = " ".join(filler(q) for q in verb.args)
                cells.append(f"({name} {needed} :{key} {HUGE})")
    return cells


def test_every_integer_argument_of_every_verb_is_range_checked(cli):
    """The agent's cells too: a clear error result, not an internal error."""
    cells = verb_integer_cells()
    assert any(c.startswith("(recall-entry ") for c in cells) and len(cells) >= 4
    for cell in cells:
        proc = cli("eval", cell)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (cell, proc.stderr)
        assert "internal error" not in proc.stderr, (cell, proc.stderr)
        assert "must be a whole number from" in proc.stderr and HUGE in proc.stderr, cell


# A pasted key in the wrong place (Trust, third round, item 9)

KEY = "sk-ant-nodecode-SECRET-7f3a9c2e51d04b88"
FILE_KEY = "sk-file-nodecode-SECRET-3c4d5e6f7a8b9c0d"
MISPLACED = {
    "as the command": [KEY],
    "budget set": ["budget", "set", KEY],
    "budget": ["budget", KEY],
    "continue": ["continue", KEY],
    "rewind": ["rewind", KEY],
    "fork --at": ["fork", "--at", KEY],
    "recall-entry": ["recall-entry", KEY],
    "models": ["models", KEY],
    "an extra argument": ["tree", KEY],
    "a key file's key": ["recall-entry", FILE_KEY],
}


def key_home(home, srv):
    """A home whose provider has its key in a variable and another one's in a file."""
    keyfile = home.parent / "other.key"
    keyfile.write_text(FILE_KEY + "\n")
    keyfile.chmod(0o600)
    write_config(home, srv)
    config = json.loads((home / "config.jsonc").read_text().split("\n", 1)[1])
    config["providers"]["other"] = {"type": "openai", "api_key_file": str(keyfile)}
    (home / "config.jsonc").write_text(json.dumps(config))


@pytest.mark.parametrize("args", MISPLACED.values(), ids=MISPLACED.keys())
def test_a_usage_error_never_echoes_a_key(loopback, home, workspace, args):
    srv = loopback([])
    key_home(home, srv)
    out = run_cli(*args, home=home, cwd=workspace, env={"ANTHROPIC_API_KEY": KEY})
    assert KEY not in out.stderr and FILE_KEY not in out.stderr
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("nodecode: ") and out.stderr.count("\n") == 1
    assert "[redacted:" in out.stderr


def test_a_store_named_after_a_key_is_refused_and_not_created(loopback, home, workspace):
    srv = loopback([])
    key_home(home, srv)
    out = run_cli("--store", KEY, "sessions", home=home, env={"ANTHROPIC_API_KEY": KEY})
    assert KEY not in out.stderr
    assert (out.returncode, out.stderr) == (
        2,
        "nodecode: --store: expected a store name, not a key (got [redacted:ANTHROPIC_API_KEY])\n",
    )
    assert not (home / "store").exists() or list((home / "store").iterdir()) == []


def test_blob_never_echoes_a_key_in_any_case(loopback, home, workspace):
    srv = loopback([])
    key_home(home, srv)
    out = run_cli("blob", KEY, home=home, cwd=workspace, env={"ANTHROPIC_API_KEY": KEY})
    assert KEY.lower() not in out.stderr
    assert out.returncode == 1
    assert out.stderr == (
        "nodecode: blob: expected a hash or a prefix of 6+ hex digits "
        "(got '[redacted:ANTHROPIC_API_KEY]')\n"
    )
