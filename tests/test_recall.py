"""Recall (doc/design.md "Recall"): the log, one entry, full-text search — over real stores."""

from __future__ import annotations

import re

import pytest
from helpers import run_cli, write_config
from nodecode import recall
from nodecode.agent.loop import format_result
from nodecode.app import App
from nodecode.cells.evaluate import CellResult, evaluate
from nodecode.errors import CellError
from nodecode.log import sessions, turns
from nodecode.log.store import Store, open_store
from nodecode.verbs.env import SessionEnv
from nodecode.verbs.table import VERBS


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "home", "default")
    yield s
    s.close()


def ask(store: Store, sid: str, text: str, *replies: tuple[str, str]) -> int:
    """One finished turn: the user's ask, then (role, text) replies; returns its number."""
    turn = turns.begin(store, sid, store.last_seq(sid) + 1)
    store.append(sid, "user", role="user", turn=turn.number, text=text)
    for role, body in replies:
        store.append(sid, role, role=role, turn=turn.number, text=body)
    turns.finish(store, sid, turn.number, store.last_seq(sid), "done")
    return turn.number


def texts(lines: list[str]) -> list[str]:
    return [line.split("] ", 1)[1] if "] " in line else "" for line in lines]


# -- recall-log ---------------------------------------------------------------------


def test_log_lists_every_event_oldest_first_with_role_or_kind(store):
    sid = sessions.create(store)
    turn = turns.begin(store, sid, 1)
    store.append(sid, "user", role="user", turn=1, text="hello")
    store.append(
        sid, "request", turn=1, payload={"usage": {"input": 120, "output": 7, "cache_read": 100}}
    )
    store.append(sid, "assistant", role="assistant", turn=1, text="hi there")
    turns.finish(store, sid, turn.number, 3, "done")
    store.append(sid, "cell", text='(read-file "a")')  # no turn: the person's own cell
    assert recall.recall_log(store, sid) == [
        "[seq 1 · turn 1 · user] hello",
        "[seq 2 · turn 1 · request] usage in=120 out=7 cache_read=100",
        "[seq 3 · turn 1 · assistant] hi there",
        '[seq 4 · cell] (read-file "a")',
    ]


def test_plain_match_is_literal_with_underscore_and_backslash(store):
    sid = sessions.create(store)
    ask(
        store,
        sid,
        "set my_var now",
        ("assistant", "myXvar is different"),
        ("assistant", "path a\\b here"),
        ("assistant", "100% sure"),
    )
    assert texts(recall.recall_log(store, sid, match="my_var")) == ["set my_var now"]
    assert texts(recall.recall_log(store, sid, match="a\\b")) == ["path a\\b here"]


def test_match_with_percent_is_a_like_pattern_as_written(store):
    sid = sessions.create(store)
    ask(
        store, sid, "set my_var now", ("assistant", "myXvar is different"), ("assistant", "the end")
    )
    assert texts(recall.recall_log(store, sid, match="%my_var%")) == [
        "set my_var now",
        "myXvar is different",
    ]
    assert texts(recall.recall_log(store, sid, match="the%")) == ["the end"]


def test_match_is_ascii_case_insensitive(store):
    sid = sessions.create(store)
    ask(store, sid, "Fix The Parser", ("assistant", "ÉCOLE"), ("assistant", "école"))
    assert texts(recall.recall_log(store, sid, match="fix the")) == ["Fix The Parser"]
    assert texts(recall.recall_log(store, sid, match="école")) == ["école"]


def test_before_and_limit_pick_the_nearest_matches_printed_oldest_first(store):
    sid = sessions.create(store)
    ask(store, sid, "start", *[("assistant", f"step {i}") for i in range(1, 11)])
    lines = recall.recall_log(store, sid, match="step", before=9, limit=3)
    assert [int(re.match(r"\[seq (\d+)", x).group(1)) for x in lines] == [6, 7, 8]
    assert texts(recall.recall_log(store, sid, limit=2)) == ["step 9", "step 10"]
    assert recall.recall_log(store, sid, before=1) == []


def test_bodies_clip_at_200_characters_with_newlines_shown(store):
    sid = sessions.create(store)
    ask(store, sid, "line one\nline two", ("tool", "x" * 199 + "\nyz"), ("tool", "y" * 200))
    first, cut, exact = texts(recall.recall_log(store, sid))
    assert first == "line one⏎line two"
    assert cut == "x" * 199 + "⏎…" and len(cut) == 201
    assert exact == "y" * 200


def test_a_limit_below_one_is_an_error(store):
    sid = sessions.create(store)
    with pytest.raises(CellError, match=r"recall-log: :limit must be 1 or more \(got 0\)"):
        recall.recall_log(store, sid, limit=0)


# -- undone turns and forks -----------------------------------------------------------


def undo_story(store: Store) -> str:
    """Turns 1, 2, 3, then an undo back to 2 and a new turn 4: turn 3 is undone."""
    sid = sessions.create(store)
    ask(store, sid, "first ask")
    ask(store, sid, "second ask")
    ask(store, sid, "third ask")
    sessions.set_head(store, sid, 2)
    ask(store, sid, "fourth ask")
    return sid


def test_undone_turns_are_marked_in_the_log(store):
    sid = undo_story(store)
    assert recall.recall_log(store, sid) == [
        "[seq 1 · turn 1 · user] first ask",
        "[seq 2 · turn 2 · user] second ask",
        "[seq 3 · turn 3 · user · undone] third ask",
        "[seq 4 · turn 4 · user] fourth ask",
    ]


def test_a_fork_sees_its_parent_up_to_the_fork_point_only(store):
    parent = sessions.create(store)
    ask(store, parent, "parent ask one", ("assistant", "parent reply one"))
    ask(store, parent, "parent ask two")
    child = sessions.create(store, parent=parent, fork_seq=3, fork_turn=2, head=2)
    ask(store, parent, "parent after the fork")
    ask(store, child, "child ask")
    assert recall.recall_log(store, child) == [
        "[seq 1 · turn 1 · user] parent ask one",
        "[seq 2 · turn 1 · assistant] parent reply one",
        "[seq 3 · turn 2 · user] parent ask two",
        "[seq 4 · turn 3 · user] child ask",
    ]
    assert recall.recall_entry(store, child, 2) == (
        "[seq 2 · turn 1 · assistant]\nparent reply one"
    )
    assert recall.recall_entry(store, child, 4).endswith("child ask")
    assert texts(recall.recall_log(store, child, match="ask", limit=2)) == [
        "parent ask two",
        "child ask",
    ]


def test_a_fork_of_a_fork_stops_at_each_fork_point(store):
    root = sessions.create(store)
    ask(store, root, "root one")
    ask(store, root, "root two")
    middle = sessions.create(store, parent=root, fork_seq=1, fork_turn=2, head=1)
    ask(store, middle, "middle three")
    leaf = sessions.create(store, parent=middle, fork_seq=2, fork_turn=3, head=3)
    ask(store, leaf, "leaf four")
    assert texts(recall.recall_log(store, leaf)) == ["root one", "middle three", "leaf four"]


def test_a_fork_sees_the_turns_its_parent_undid_before_the_fork_as_undone(store):
    parent = undo_story(store)  # turns 1, 2, 3 (undone), 4; seqs 1-4
    child = sessions.create(store, parent=parent, fork_seq=4, fork_turn=4, head=4)
    ask(store, child, "child ask")
    assert recall.recall_log(store, child)[2:] == [
        "[seq 3 · turn 3 · user · undone] third ask",
        "[seq 4 · turn 4 · user] fourth ask",
        "[seq 5 · turn 5 · user] child ask",
    ]
    expected = {(t.session, t.number) for t in turns.path(store, child)}
    assert (
        recall.head_path(store, child)
        == expected
        == {(parent, 1), (parent, 2), (parent, 4), (child, 5)}
    )


# -- recall-entry ---------------------------------------------------------------------


def test_entry_of_a_cut_result_shows_the_whole_output(store):
    sid = sessions.create(store)
    turn = turns.begin(store, sid, 1)
    store.append(
        sid,
        "call",
        role="call",
        turn=turn.number,
        text=';; look\n(read-file "big")',
        payload={"name": "eval", "input": {"code": ';; look\n(read-file "big")'}},
    )
    output = "\n".join(f"line {i}" for i in range(500))
    result = store.append(
        sid,
        "tool",
        role="tool",
        turn=turn.number,
        payload={"call": 1, "error": False, "output": output},
        text=lambda seq: format_result(output, seq, 100),
    )
    assert "[cut:" in result.text
    assert recall.recall_entry(store, sid, 2) == "[seq 2 · turn 1 · tool]\n" + output
    assert recall.recall_entry(store, sid, 1) == (
        '[seq 1 · turn 1 · call]\n;; look\n(read-file "big")'
    )


def test_entry_of_an_event_that_is_not_a_message_dumps_its_payload(store):
    sid = sessions.create(store)
    store.append(sid, "receipt", text="took 2 changes", payload={"dropped": [3, 4], "ok": True})
    entry = recall.recall_entry(store, sid, 1)
    assert entry.startswith("[seq 1 · receipt]\ntook 2 changes\n{")
    assert '"dropped": [\n    3,\n    4\n  ]' in entry and '"ok": true' in entry


def test_entry_of_an_unknown_seq_names_the_log_extent(store):
    sid = sessions.create(store)
    ask(store, sid, "one", ("assistant", "two"))
    with pytest.raises(
        CellError,
        match=rf"recall-entry: no event at seq 999 in session {sid} "
        r"\(its log has seqs 1–2\)",
    ):
        recall.recall_entry(store, sid, 999)
    empty = sessions.create(store)
    with pytest.raises(CellError, match=r"its log is empty"):
        recall.recall_entry(store, empty, 1)


# -- recall-search --------------------------------------------------------------------


def test_search_needs_every_word_and_covers_every_session_newest_first(store):
    a = sessions.create(store)
    ask(store, a, "the parser fails on tabs", ("assistant", "parser fixed"))
    b = sessions.create(store)
    ask(store, b, "tabs again in the parser", ("assistant", "tabs only"))
    assert recall.recall_search(store, "parser tabs") == [
        f"[{b} · seq 1 · turn 1 · user] tabs again in the parser",
        f"[{a} · seq 1 · turn 1 · user] the parser fails on tabs",
    ]
    assert recall.recall_search(store, "PARSER", limit=1) == [
        f"[{b} · seq 1 · turn 1 · user] tabs again in the parser"
    ]
    assert recall.recall_search(store, "pars") == []  # whole words only


def test_search_treats_fts_operators_as_plain_text(store):
    sid = sessions.create(store)
    ask(store, sid, 'keep a-b AND say "quoted" NEAR star* x', ("assistant", "unrelated"))
    hit = f"[{sid} · seq 1 · turn 1 · user]"
    for words in ("AND", "NEAR", '"quoted"', "star*", "a-b", "a -b", 'say "quoted'):
        assert [x.split("] ")[0] + "]" for x in recall.recall_search(store, words)] == [hit], words
    assert texts(recall.recall_search(store, "and near")) == [
        'keep a-b AND say "quoted" NEAR star* x'
    ]  # still case-insensitive


def test_search_marks_undone_hits(store):
    sid = undo_story(store)
    assert recall.recall_search(store, "ask", limit=2) == [
        f"[{sid} · seq 4 · turn 4 · user] fourth ask",
        f"[{sid} · seq 3 · turn 3 · user · undone] third ask",
    ]


def test_search_reads_message_text_only(store):
    sid = sessions.create(store)
    store.append(sid, "receipt", text="zebra receipt")
    store.append(sid, "note", role="note", text="zebra note")
    assert texts(recall.recall_search(store, "zebra")) == ["zebra note"]


@pytest.mark.parametrize("words", ["", "   \n"])
def test_an_empty_search_is_an_error(store, words):
    with pytest.raises(CellError, match="recall-search: expected one or more words"):
        recall.recall_search(store, words)


# -- verbs, picker rows, CLI ----------------------------------------------------------


@pytest.fixture
def app_env(tmp_path):
    app = App.open(tmp_path / "home", "default", tmp_path, environ={})
    sid = sessions.create(app.store)
    yield app, sid, SessionEnv(workspace=tmp_path, verbs=VERBS, ws=app.workspace, session=sid)
    app.close()


def test_verbs_read_the_session_of_the_cell(app_env):
    app, sid, env = app_env
    ask(app.store, sid, "find the_thing", ("assistant", "found the_thing"))
    assert evaluate('(recall-log :match "the_thing" :limit 1)', env) == CellResult(
        "[seq 2 · turn 1 · assistant] found the_thing", False
    )
    assert evaluate("(recall-entry 1)", env) == CellResult(
        "[seq 1 · turn 1 · user]\nfind the_thing", False
    )
    assert evaluate('(recall-search "found")', env).output == (
        f"[{sid} · seq 2 · turn 1 · assistant] found the_thing"
    )
    assert evaluate('(recall-log :match "nowhere")', env) == CellResult("(no matches)", False)


def test_verb_errors_become_error_results(app_env):
    _, sid, env = app_env
    assert evaluate("(recall-entry 7)", env) == CellResult(
        f"error: recall-entry: no event at seq 7 in session {sid} (its log is empty)", True
    )
    assert evaluate('(recall-search "")', env).output.startswith(
        "error: recall-search: expected one or more words"
    )
    assert "recall-log :match" in evaluate('(recall-log :before "x")', env).output


def test_picker_rows_are_nearest_first(store):
    sid = undo_story(store)
    rows = recall.recall_items(store, sid, query=None, everywhere=False, limit=2)
    assert [(r["seq"], r["undone"]) for r in rows] == [(4, False), (3, True)]
    assert rows[1] == {
        "session": sid,
        "seq": 3,
        "turn": 3,
        "kind": "user",
        "role": "user",
        "line": "[seq 3 · turn 3 · user · undone] third ask",
        "undone": True,
    }
    found = recall.recall_items(store, sid, query="third", everywhere=True)
    assert [r["line"] for r in found] == [f"[{sid} · seq 3 · turn 3 · user · undone] third ask"]
    assert recall.recall_items(store, sid, query="", everywhere=True) == []


def test_cli_recall_after_a_real_turn(loopback, home, workspace):
    (workspace / "a.txt").write_text("hello from a.txt\n" * 10)
    srv = loopback(
        [
            {"text": "Reading.", "calls": [{"code": ';; read\n(read-file "a.txt")'}]},
            {"text": "It says hello."},
        ]
    )
    write_config(home, srv, result_max_chars=40)
    sid = run_cli("new", home=home).stdout.strip()
    assert run_cli("ask", "--yes", "what is in a.txt?", home=home, cwd=workspace).returncode == 0

    log = run_cli("recall-log", home=home)
    assert log.returncode == 0, log.stderr
    lines = log.stdout.splitlines()
    assert lines[0] == "[seq 1 · turn 1 · user] what is in a.txt?"
    assert lines[1].startswith("[seq 2 · turn 1 · request] loopback/loopback-model usage in=")
    assert lines[4].startswith("[seq 5 · turn 1 · tool] hello from a.txt⏎")
    assert "[cut:" in lines[4]
    assert lines[-1] == "[seq 7 · turn 1 · assistant] It says hello."
    assert run_cli("recall-log", "--match", "READ", "--before", "4", home=home).stdout == (
        "[seq 3 · turn 1 · assistant] Reading.\n"
    )

    entry = run_cli("recall-entry", "5", home=home)
    assert entry.stdout == "[seq 5 · turn 1 · tool]\n" + "hello from a.txt\n" * 10

    found = run_cli("recall-search", "says", "hello", home=home)
    assert found.stdout == f"[{sid} · seq 7 · turn 1 · assistant] It says hello.\n"

    bad = run_cli("recall-entry", "99", home=home)
    assert bad.returncode == 1 and f"no event at seq 99 in session {sid}" in bad.stderr
    assert run_cli("recall-search", "", home=home).returncode == 1
