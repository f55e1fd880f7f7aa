"""A saved edit of context.txt across an undo, redo, rewind or eviction (issue
"Trust, third round" 2): carried over, and said so, when every block it changes
is still in the context; else refused with a reason naming the move. Never
"made before another edit was taken", which no take made true.

Each case runs real turns against the loopback server and the real CLI (in
this process), and reads what the person would: the command's output, the
receipt, and the request the provider received next.
"""

from __future__ import annotations

import pytest
from nodecode.context import take as takes
from nodecode.views import status
from test_budget_support import Session, cli, texts

NOTE = "remember: two matters"


@pytest.fixture
def s(loopback, tmp_path):
    """Three turns, each a question and a one-line reply."""
    sess = Session(tmp_path, loopback([], cache_min_tokens=1), window=None, files=0)
    for n in ("one", "two", "three"):
        sess.ask(f"ask {n}", [{"text": f"Reply {n}."}])
    yield sess
    sess.close()


def run(s: Session, *args: str) -> tuple[str, str]:
    code, out, err = cli(*args, home=s.home, env={"NODECODE_SESSION": s.sid})
    assert code == 0, err
    return out, err


def edit_under(s: Session, reply: str) -> None:
    """Export, then save context.txt with a note under the block ``reply``."""
    run(s, "--cwd", str(s.ws), "context")
    path = takes.context_file(s.app.workspace, s.sid)
    text = path.read_text()
    assert f"\n{reply}\n" in text
    path.write_text(text.replace(f"\n{reply}\n", f"\n{reply}\n[[note]]\n{NOTE}\n"))


MOVES = {
    "undo": (["undo"], "the undo at seq"),
    "redo": (["redo"], "the redo at seq"),
    "rewind": (["rewind", "2"], "the rewind at seq"),
    "evict": (["evict", "through", "1"], None),
}


def before(s: Session, op: str) -> None:
    if op == "redo":
        run(s, "--cwd", str(s.ws), "undo")


@pytest.mark.parametrize("op", MOVES)
def test_a_saved_edit_whose_blocks_remain_is_taken_and_said_so(s, op):
    args, named = MOVES[op]
    before(s, op)
    edit_under(s, "Reply two.")
    out, err = run(s, "--cwd", str(s.ws), *args)
    said = out + err
    assert "context edit (export 1): taken at seq " in said, said
    if named is not None:  # carried over the move, which it names
        assert f"context edit (export 1): carried over {named} " in said, said
    assert status.report(s.app.workspace, s.app.basis(strict=True), s.sid)["pending"] == []
    s.ask("ask four", [{"text": "Reply four."}])
    sent = texts(s.srv.model_requests[-1].body)
    assert NOTE in sent and sent.index(NOTE) == sent.index("Reply two.") + 1
    receipt = takes.receipt_file(s.app.workspace, s.sid).read_text()
    assert "another edit was taken" not in receipt


@pytest.mark.parametrize("op", ["undo", "rewind"])
def test_a_saved_edit_of_a_block_the_move_removed_is_refused_naming_the_move(s, op):
    args, named = MOVES[op]
    edit_under(s, "Reply three.")  # turn 3's: gone after the undo and the rewind to 2
    out, err = run(s, "--cwd", str(s.ws), *args)
    said = out + err
    assert "context edit (export 1): refused at seq " in said, said
    assert f"made before {named} " in said and "it changes is no longer in the context" in said
    assert "another edit was taken" not in said
    s.ask("ask four", [{"text": "Reply four."}])
    assert NOTE not in texts(s.srv.model_requests[-1].body)
    assert "another edit was taken" not in takes.receipt_file(s.app.workspace, s.sid).read_text()


def test_a_file_saved_against_an_export_older_than_an_undo_is_carried_at_the_ask(s):
    # The undo comes first, the save of the older export after it (the CLI never
    # re-exports): the request's take carries it over as the undo's did.
    run(s, "--cwd", str(s.ws), "context")
    run(s, "--cwd", str(s.ws), "undo")
    path = takes.context_file(s.app.workspace, s.sid)
    path.write_text(path.read_text().replace("\nReply two.\n", f"\nReply two.\n[[note]]\n{NOTE}\n"))
    s.ask("ask four", [{"text": "Reply four."}])
    assert NOTE in texts(s.srv.model_requests[-1].body)
    receipt = takes.receipt_file(s.app.workspace, s.sid).read_text()
    assert "carried over the undo at seq " in receipt
