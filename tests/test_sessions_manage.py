"""Sessions you can manage, through the real CLI against the loopback server
(doc/design.md "Decisions", Titles and Deleting a session): a rename is logged
and shown everywhere, a delete asks first and takes the session's text out of
recall and the store, and with ``session_title`` set the first reply is
followed by one small title request whose answer becomes the title."""

from __future__ import annotations

import json
import os
import sqlite3

from helpers import ask, run_cli, run_cli_on_a_terminal, session_titles, write_config
from nodecode.agent import title as titles

ANSWER = "Adding numbers in calc"


def new(home, workspace, *args: str) -> str:
    return run_cli("new", *args, home=home, cwd=workspace).stdout.strip()


def plain(message: dict) -> dict:
    """A message or block without its cache marks."""
    out = {k: v for k, v in message.items() if k != "cache_control"}
    if isinstance(out.get("content"), list):
        out["content"] = [plain(b) for b in out["content"]]
    return out


def test_a_rename_is_logged_as_a_row_and_shown_by_sessions(home, workspace, loopback):
    write_config(home, loopback([{"text": "it adds"}]))
    sid = new(home, workspace, "--title", "given at creation")
    ask(home, workspace, "what does add do?")

    done = run_cli("sessions", "rename", sid, "the", "adder", home=home, cwd=workspace)

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{sid}  the adder\n"
    assert session_titles(home, workspace)[sid] == "the adder"
    (row,) = [x for x in run_cli("sessions", home=home).stdout.splitlines() if sid in x]
    assert row.endswith("turns=1  the adder")
    # A row per title set; the session row and the log are as they were.
    db = sqlite3.connect(home / "store" / "default.db")
    assert db.execute("SELECT title, source FROM titles").fetchall() == [("the adder", "user")]
    assert db.execute("SELECT title FROM sessions").fetchall() == [("given at creation",)]


def test_a_rename_holding_a_key_is_stored_and_shown_redacted(home, workspace, loopback):
    key = "sk-ant-" + "k3y" * 10
    write_config(home, loopback([]))
    sid = new(home, workspace)
    env = {"ANTHROPIC_API_KEY": key}
    done = run_cli("sessions", "rename", sid, f"uses {key}", home=home, cwd=workspace, env=env)
    assert done.stdout == f"{sid}  uses [redacted:ANTHROPIC_API_KEY]\n"
    db = sqlite3.connect(home / "store" / "default.db")
    assert key not in repr(db.execute("SELECT * FROM titles").fetchall())


def test_a_rename_of_no_session_or_to_nothing_is_one_line(home, workspace):
    sid = new(home, workspace)
    missing = run_cli("sessions", "rename", "s-nothere", "x", home=home, cwd=workspace)
    empty = run_cli("sessions", "rename", sid, "  ", home=home, cwd=workspace)
    assert missing.returncode == 1 and empty.returncode == 1
    assert missing.stderr == "nodecode: session 's-nothere' does not exist in store 'default'\n"
    assert empty.stderr == f"nodecode: rename {sid}: expected a title (got '  ')\n"


def test_a_delete_asks_first_and_then_recall_no_longer_finds_its_text(home, workspace, loopback):
    write_config(home, loopback([{"text": "zebrafish answer"}, {"text": "kept answer"}]))
    gone = new(home, workspace)
    ask(home, workspace, "tell me about zebrafish")
    kept = new(home, workspace)
    ask(home, workspace, "tell me about otters")
    assert "zebrafish" in run_cli("recall-search", "zebrafish", home=home).stdout

    no_terminal = run_cli("sessions", "delete", gone, home=home, cwd=workspace)
    said_no = run_cli_on_a_terminal(home, workspace, "n", "sessions", "delete", gone)
    still = run_cli("recall-search", "zebrafish", home=home).stdout
    said_yes = run_cli_on_a_terminal(home, workspace, "y", "sessions", "delete", gone)

    assert no_terminal.returncode == 1 and no_terminal.stderr == (
        f"nodecode: sessions delete: not deleted: {gone} (tell me about zebrafish) needs "
        "a yes on a terminal, or --yes\n"
    )
    assert said_no.returncode == 1 and said_no.stderr.endswith("[y/N] not deleted\n")
    assert f"delete session {gone} (tell me about zebrafish, 1 turn)?" in said_no.stderr
    assert "zebrafish" in still  # recallable until deleted
    assert said_yes.returncode == 0, said_yes.stderr
    assert said_yes.stdout.startswith(f"deleted {gone} (tell me about zebrafish): ")

    found = run_cli("recall-search", "zebrafish", home=home)
    assert "zebrafish" not in found.stdout
    assert list(session_titles(home, workspace)) == [kept]
    assert "otters" in run_cli("recall-search", "otters", home=home).stdout
    db = sqlite3.connect(home / "store" / "default.db")
    assert db.execute("SELECT COUNT(*) FROM events WHERE session = ?", (gone,)).fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM turns WHERE session = ?", (gone,)).fetchone() == (0,)
    assert not (home / "context" / "default" / gone).exists()
    # The log still refuses any other delete.
    try:
        db.execute("DELETE FROM events WHERE session = ?", (kept,))
        raise AssertionError("a delete of another session's events went through")
    except sqlite3.IntegrityError as e:
        assert "append-only" in str(e)


def test_delete_with_yes_and_its_refusals(home, workspace, loopback):
    write_config(home, loopback([{"text": "ok"}]))
    parent = new(home, workspace)
    ask(home, workspace, "first")
    fork = run_cli("fork", home=home, cwd=workspace).stdout
    assert fork, "the fork made no session"

    refused = run_cli("sessions", "delete", parent, "--yes", home=home, cwd=workspace)
    missing = run_cli("sessions", "delete", "s-nothere", "--yes", home=home, cwd=workspace)
    (child,) = [s for s in session_titles(home, workspace) if s != parent]
    deleted = run_cli("sessions", "delete", child, "--yes", home=home, cwd=workspace)

    assert refused.returncode == 1
    assert refused.stderr == (
        f"nodecode: session {parent} has forks that read its history ({child}): "
        "delete them first (nothing was deleted)\n"
    )
    assert missing.stderr == "nodecode: session 's-nothere' does not exist in store 'default'\n"
    assert deleted.returncode == 0, deleted.stderr
    assert list(session_titles(home, workspace)) == [parent]


def test_a_session_a_turn_holds_is_not_deleted(home, workspace, loopback):
    write_config(home, loopback([]))
    sid = new(home, workspace)
    db = sqlite3.connect(home / "store" / "default.db")
    # A live process (this one) holds the lease, as a running turn does.
    with db:
        db.execute(
            "INSERT INTO leases (session, owner, pid, host, expires) VALUES (?, 'x', ?, ?, ?)",
            (sid, os.getpid(), os.uname().nodename, 4e9),
        )
    done = run_cli("sessions", "delete", sid, "--yes", home=home, cwd=workspace)
    assert done.returncode == 1
    assert done.stderr == (
        f"nodecode: session {sid} is running a turn: stop it first (nothing was deleted)\n"
    )
    assert sid in session_titles(home, workspace)


def test_the_automatic_title_follows_the_first_reply_with_a_small_request(
    home, workspace, loopback
):
    srv = loopback(
        [
            {"text": "add returns a + b."},
            {"text": f'"{ANSWER}."', "match": "give this conversation a title"},
            {"text": "still adds."},
        ],
        cache_min_tokens=1,
    )
    write_config(home, srv, session_title="auto", session_title_timeout=20)
    sid = new(home, workspace)

    first = ask(home, workspace, "```python calc.py:1-2\nx\n```\nwhat does add do?")
    second = ask(home, workspace, "and now?")

    assert first.stdout == "add returns a + b.\n"  # the reply, and nothing of the title
    assert first.stderr.endswith(f"── session {sid} titled: {ANSWER}\n")
    assert "titled" not in second.stderr
    assert len(srv.model_requests) == 3  # the first turn, its title, the second turn
    turn, asked = srv.model_requests[0].body, srv.model_requests[1].body
    assert asked["max_tokens"] == titles.MAX_TOKENS
    # The first exchange as the turn sent it (the prefix the cache holds), its
    # reply, then the instruction.
    sent = [plain(m) for m in asked["messages"]]
    assert sent[: len(turn["messages"])] == [plain(m) for m in turn["messages"]]
    reply = sent[len(turn["messages"])]
    assert reply["role"] == "assistant" and "add returns a + b." in json.dumps(reply)
    last = asked["messages"][-1]
    assert last["role"] == "user" and titles.INSTRUCTION in json.dumps(last)
    assert len(asked["messages"]) == len(turn["messages"]) + 2
    assert [plain(b) for b in asked["system"]] == [plain(b) for b in turn["system"]]
    assert asked["tools"] == turn["tools"]
    assert srv.model_requests[1].usage["cache_read"] > 0
    assert session_titles(home, workspace)[sid] == ANSWER
    # The session's spending counts the title's request (loopback-model has no price).
    cost = run_cli("recall-cost", "--json", home=home, cwd=workspace)
    assert json.loads(cost.stdout)["unpriced"] == len(srv.model_requests) == 3

    # A rename wins over it.
    run_cli("sessions", "rename", sid, "mine", home=home, cwd=workspace)
    assert session_titles(home, workspace)[sid] == "mine"


def test_a_failed_automatic_title_leaves_the_first_line_and_says_so(home, workspace, loopback):
    srv = loopback([{"text": "add returns a + b."}])
    srv.add_fault({"at": 2, "kind": "400"})
    write_config(home, srv, session_title="auto", max_retries=0)
    sid = new(home, workspace)

    done = ask(home, workspace, "what does add do?")

    lines = done.stderr.splitlines()
    assert lines[-1].startswith(f"nodecode: no title for session {sid} (")
    assert lines[-1].endswith("): the first line stays")
    assert len(srv.model_requests) == 2
    assert session_titles(home, workspace)[sid] == "what does add do?"


def test_first_line_sends_no_title_request(home, workspace, loopback):
    srv = loopback([{"text": "ok"}])
    write_config(home, srv)  # the default: first_line
    sid = new(home, workspace)
    done = ask(home, workspace, "explain #file:calc.py please")
    assert len(srv.model_requests) == 1 and "title" not in done.stderr
    assert session_titles(home, workspace)[sid] == "explain calc.py please"
