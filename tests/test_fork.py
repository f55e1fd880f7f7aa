"""Forks (doc/design.md "Checkpoints"): the child starts with the parent's context, seqs continue, the parent
is untouched, and the child's next request reads exactly what the parent would."""

from __future__ import annotations

import pytest
from helpers import run_cli
from nodecode import recall
from nodecode.checkpoints import moves as checkpoints
from nodecode.context import derived
from nodecode.context import take as takes
from nodecode.errors import UserError
from nodecode.log import sessions
from nodecode.views import tree
from test_checkpoints import Session, needs_git, s  # noqa: F401  (s: fixture)
from test_tree import TURN_1


def view(messages):
    return [(m.role, m.text, m.rewritten, m.restored) for m in messages]


@needs_git
def test_fork_at_the_head_starts_with_the_parents_context(s):  # noqa: F811
    parent_events = s.store.events(s.sid)
    parent_context = derived.build(s.store, s.sid)
    last = s.store.last_seq(s.sid)
    child = checkpoints.fork(s.app.store, s.sid)
    assert sessions.current(s.store) == child
    info = sessions.get(s.store, child)
    assert (info.parent, info.fork_seq, info.fork_turn, info.head) == (s.sid, last, 2, 2)
    assert derived.build(s.store, child) == parent_context
    assert s.store.events(s.sid) == parent_events
    [fork_event] = s.store.events(child)
    assert (fork_event.seq, fork_event.kind, fork_event.turn) == (last + 1, "fork", 2)
    # The child's next request reads the parent's context, then its own ask (turn 3).
    parent_sent = s.sent()
    kid = Session(s.app, s.srv, child)
    assert kid.turn("in the child") == 3
    assert kid.sent() == parent_sent + [("assistant", "Done."), ("user", "in the child")]
    assert s.store.events(s.sid) == parent_events
    # Recall in the child reads the parent up to the fork point.
    assert recall.recall_log(s.store, child, match="change things") == [
        "[seq 8 · turn 2 · user] change things"
    ]


@needs_git
def test_fork_at_an_earlier_turn_reads_the_context_as_that_turn_left_it(s):  # noqa: F811
    child = checkpoints.fork(s.app.store, s.sid, 1)
    info = sessions.get(s.store, child)
    assert (info.fork_seq, info.head) == (7, 1)
    kid = Session(s.app, s.srv, child)
    assert kid.turn("from turn 1") == 3
    assert s.store.events(child)[0].seq == 8  # F + 1
    assert kid.sent() == TURN_1 + [("user", "from turn 1")]
    assert [n.number for n in tree.nodes(s.store, child)] == [1, 3]


@needs_git
def test_fork_keeps_edits_taken_while_idle(s):  # noqa: F811
    takes.record_form_edit(s.store, s.sid, {"drop": [4], "note": "remember: a is alpha"}, 2)
    takes.take(s.app.workspace, s.sid, 2)  # taken while idle: the note is logged after turn 2 ended
    parent_context = derived.build(s.store, s.sid)
    assert any(m.role == "note" for m in parent_context)
    child = checkpoints.fork(s.app.store, s.sid)
    assert view(derived.build(s.store, child)) == view(parent_context)
    assert [e.kind for e in s.store.events(child)] == ["note", "fork"]  # the note, copied
    kid = Session(s.app, s.srv, child)
    kid.turn("and now")
    sent = kid.sent()
    assert ("assistant", "remember: a is alpha") in sent
    assert ("tool_use", ';; read a\n(read-file "a.txt")') not in sent


@needs_git
def test_a_fork_of_a_fork_sees_only_what_its_parent_saw(s):  # noqa: F811
    child = checkpoints.fork(s.app.store, s.sid)
    grandchild = checkpoints.fork(s.app.store, child, 1)
    assert [n.number for n in tree.nodes(s.store, grandchild)] == [1]
    assert view(derived.build(s.store, grandchild)) == view(
        [m for m in derived.build(s.store, s.sid) if m.turn == 1]
    )


def test_fork_of_an_empty_session_is_a_user_error(s):  # noqa: F811
    empty = s.app.new_session("empty")
    with pytest.raises(UserError, match="no turn to fork at"):
        checkpoints.fork(s.app.store, empty)


@needs_git
def test_cli_fork_prints_only_the_child_id_and_makes_it_current(s):  # noqa: F811
    out = run_cli("fork", "--at", "1", home=s.app.home, cwd=s.app.cwd)
    assert out.returncode == 0, out.stderr
    [child] = out.stdout.splitlines()
    assert sessions.current(s.store) == child
    assert sessions.get(s.store, child).parent == s.sid


@needs_git
def test_undo_in_a_fork_moves_past_the_fork_point_but_leaves_the_parents_files(s):  # noqa: F811
    child = checkpoints.fork(s.app.store, s.sid)
    files = s.files()
    moved = checkpoints.undo(s.app.workspace, child)
    assert moved.lines == [
        (
            f"files of turn 2 were left as they are: it ran in session {s.sid}, "
            "which this one forked from"
        )
    ]
    assert s.files() == files and sessions.get(s.store, child).head == 1
    kid = Session(s.app, s.srv, child)
    kid.turn("again")
    assert kid.sent() == TURN_1 + [("user", "again")]
