"""What the store keeps as a session grows (issue 12, item 4): a taken file
edit stores what changed, not the file twice; an export stores no copy of the
file; a take's snapshot does not grow with the context; and what recall and
`nodecode blob` show of those events is what they showed before."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from helpers import run_cli, write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.cells.evaluate import evaluate
from nodecode.checkpoints import moves as checkpoints
from nodecode.context import derived, model
from nodecode.context import take as takes
from nodecode.recall import recall_entry

WORDS = [
    "parser",
    "token",
    "commit",
    "branch",
    "value",
    "tree",
    "index",
    "cache",
    "budget",
    "window",
    "stub",
    "note",
]
ENV = {"NODECODE_CONTEXT_TOKENS": "50000000"}  # never evicts on its own


def prose(rng: random.Random, n: int) -> str:
    """About ``n`` bytes of words, in lines of ten."""
    words = [rng.choice(WORDS) for _ in range(n // 6)]
    return "\n".join(" ".join(words[i : i + 10]) for i in range(0, len(words), 10))


class Grown:
    """A session of real turns (an ask and a long reply each) against the loopback."""

    def __init__(self, tmp, loopback, turns: int, size: int = 1500):
        self.ws = tmp / "ws"
        self.ws.mkdir(parents=True)
        self.srv = loopback([])
        self.home = write_config(tmp / "home", self.srv, auto_approve=True)
        self.app = App.open(self.home, "default", self.ws, environ=ENV)
        self.sid = self.app.new_session("grown")
        self.rng = random.Random(turns)
        self.size = size
        self.grow(turns)

    @property
    def store(self):
        return self.app.store

    def ask(self, text: str, reply: str) -> None:
        self.srv.add_rounds([{"text": reply}])
        assert Agent(self.app, self.sid).ask(text, TurnCallbacks()).status == "done"

    def grow(self, turns: int) -> None:
        for i in range(turns):
            self.ask(f"ask {i}: " + prose(self.rng, 200), prose(self.rng, self.size))

    def stored(self) -> int:
        """The bytes the log and the blob table hold: every row's text and payload."""
        events = self.store.read(
            "SELECT COALESCE(SUM(length(text) + COALESCE(length(payload), 0)), 0) FROM events"
        )[0][0]
        return events + self.store.read("SELECT COALESCE(SUM(length(data)), 0) FROM blobs")[0][0]

    def form(self, code: str) -> None:
        evaluate(code, self.app.cell_env(self.sid, approve=lambda *a: True))


@pytest.fixture
def grown(tmp_path, loopback):
    made: list[Grown] = []

    def make(turns: int, **kw) -> Grown:
        g = Grown(tmp_path / f"g{len(made)}", loopback, turns, **kw)
        made.append(g)
        return g

    yield make
    for g in made:
        g.app.close()


def rewrite_body(text: str, k: int, body: str) -> str:
    """context.txt with the body of its k-th assistant block replaced."""
    nonce = text.split("\n", 1)[0].rstrip("]").split()[-1]
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith(f"[[m:{nonce} ")]
    mine = [h for h in heads if lines[h].endswith(" assistant]]")]
    head = mine[k]
    end = next(h for h in heads + [len(lines) - 1] if h > head)
    lines[head + 1 : end] = body.split("\n")
    return "\n".join(lines)


def changed_bytes(a: bytes, b: bytes) -> int:
    """Bytes removed + inserted, as one hunk between the common prefix and suffix."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return (len(a) - p - s) + (len(b) - p - s)


def dump_of(entry: str) -> dict:
    """The payload a recall entry shows, below the event's text."""
    return json.loads(entry[entry.index("\n{\n") + 1 :])


# -- a taken file edit ------------------------------------------------------------


def test_a_taken_file_edit_stores_what_changed_not_the_file_twice(grown):
    g = grown(150)  # context.txt of about 250 KB
    path = takes.export(g.app.workspace, g.sid)
    before = g.stored()
    path = takes.export(g.app.workspace, g.sid)
    exported = g.stored()
    text = path.read_bytes()
    edited = rewrite_body(text.decode(), 70, "a shorter answer\n(rewritten in the file)").encode()
    path.write_bytes(edited)
    g.ask("go on", "ok")
    receipt = takes.receipt_file(g.app.workspace, g.sid).read_text()
    assert "\ntaken at seq " in receipt and "rewrote 1" in receipt
    took = g.stored() - exported
    changed = changed_bytes(text, edited)
    assert len(text) > 200_000
    # What the export stored, and the edit with its take (the ask's own rows aside).
    assert exported - before < len(text) // 20, (exported - before, len(text))
    assert took < 10 * changed + 16 * 1024, (took, changed, len(text))


def test_the_edit_and_its_export_are_still_printed_by_nodecode_blob(grown):
    g = grown(20)
    path = takes.export(g.app.workspace, g.sid)
    text = path.read_bytes()
    path.write_bytes(rewrite_body(text.decode(), 3, "changed").encode())
    g.ask("go on", "ok")
    [exp] = g.store.events(g.sid, kinds=("export",))
    [edit] = g.store.events(g.sid, kinds=("edit",))
    assert checkpoints.find_blob(g.store, exp.payload["blob"]) == text
    assert checkpoints.find_blob(g.store, edit.payload["blob"]) == path.read_bytes()
    shown = run_cli("blob", edit.payload["blob"][:12], home=g.home, cwd=g.ws)
    assert shown.returncode == 0 and shown.stdout.encode() == path.read_bytes()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == edit.payload["blob"]


def test_recall_entry_of_an_export_and_a_receipt_shows_the_whole_order(grown):
    g = grown(6)
    g.form("(context :drop (3 4))")
    g.ask("after the drop", "ok")
    g.form("(context :drop (7))")
    g.ask("after the second drop", "ok")
    path = takes.export(g.app.workspace, g.sid)
    st = derived.state(g.store, g.sid)
    ids = [m.id for m in st.messages]
    exp = g.store.last_event(g.sid, "export")
    entry = recall_entry(g.store, g.sid, exp.seq)
    head, first, _ = entry.split("\n", 2)
    assert head == f"[seq {exp.seq} · turn {exp.turn} · export]"
    assert first == path.read_text().split("\n", 1)[0]
    shown = dump_of(entry)
    assert list(shown) == ["number", "nonce", "base", "blob", "ids"]
    assert shown["ids"] == ids and shown["blob"] == hashlib.sha256(path.read_bytes()).hexdigest()
    receipt = g.store.last_event(g.sid, "receipt")
    shown = dump_of(recall_entry(g.store, g.sid, receipt.seq))
    assert shown["context"]["order"] == [i for i in ids if i < receipt.seq]
    assert shown["context"]["texts"] == [] and shown["context"]["restored"] == []


# -- snapshots ----------------------------------------------------------------------


def take_bytes(g: Grown, takes_: int) -> list[int]:
    """The bytes each of ``takes_`` takes stored in its receipt (a drop of one
    old reply each, taken at the next ask)."""
    sizes = []
    replies = [m.id for m in derived.state(g.store, g.sid).messages if m.role == "assistant"]
    for k in range(takes_):
        g.form(f"(context :drop ({replies[k]}))")
        g.ask(f"after take {k}", "ok")
        receipt = g.store.last_event(g.sid, "receipt")
        assert "\ntaken at seq " in receipt.text, receipt.text
        sizes.append(
            g.store.read(
                "SELECT length(payload) FROM events WHERE session = ? AND seq = ?",
                (g.sid, receipt.seq),
            )[0][0]
        )
    return sizes


def test_a_takes_snapshot_does_not_grow_with_the_context(grown):
    small = sorted(take_bytes(grown(40, size=60), 9))[4]
    large = sorted(take_bytes(grown(400, size=60), 9))[4]
    assert large <= 1.5 * small, (small, large)


def test_the_context_decodes_from_a_bounded_chain_of_snapshots(grown):
    g = grown(60, size=60)
    take_bytes(g, 40)
    g.app.close()
    g.app = App.open(g.home, "default", g.ws, environ=ENV)  # nothing decoded yet
    receipt = g.store.last_event(g.sid, "receipt")
    chain, context = 0, receipt.payload["context"]
    while "after" in context:
        chain += 1
        session, seq = context["after"]
        context = g.store.event(session, seq).payload["context"]
    assert chain < model.SNAPSHOT_CHAIN
    replies = [m.id for m in derived.state(g.store, g.sid).messages if m.role == "assistant"]
    assert len(replies) == 60 + 40 - 40
