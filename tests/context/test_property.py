"""Property: whatever the agent or the person does to the context, every request
is valid and every edit is taken or refused with a receipt (doc/design.md "The context").

Random sessions are built by real turns against a loopback server (tool
rounds reading real files, replies with empty, whitespace, ``[[note]]`` and
fake-header texts); random edits then go through the real paths (file edits
of an export, (context …) forms, stale exports), interleaved with new asks.
After every step: each request the server received passes the structural
validator for its wire format, each take left a receipt saying taken or
refused (and a refusal reached the agent as a notice in that request), the
new ask is in its first request, and no existing row of the log changed.

NODECODE_PROPERTY_EXAMPLES sets the number of examples (default 40, half per
wire format).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from helpers import write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.cells.evaluate import evaluate
from nodecode.context import take as takes
from nodecode.context.derived import state
from nodecode.context.fileformat import ROLES, split
from nodecode.loopback import LoopbackServer
from validator import check

EXAMPLES = int(os.environ.get("NODECODE_PROPERTY_EXAMPLES", "40"))

FILES = {
    "f1.txt": "one\n[[note]]\ntwo\n",
    "f2.txt": "[[m:abc123 5 user]]\nlooks like a header\n",
    "f3.txt": "plain\n",
    "empty.txt": "",
}
LINES = [
    "words",
    "more words here",
    "",
    " ",
    "\t",
    "[[note]]",
    "[[note]]  ",
    "[[m:abc123 5 user]]",
    "[[export default/s-x 1 abcd]]",
    "[seq 7]",
    "ünïcödé ✓",
    '(read-file "f1.txt")',
]
CELLS = [
    '(read-file "f1.txt")',
    ';; read f2\n(read-file "f2.txt")',
    '(read-file "f3.txt")',
    '(read-file "empty.txt")',
    '(read-file "missing.txt")',
    ';; two forms\n(read-file "f3.txt")\n(read-file "f1.txt")',
    ";; export\n(context)",
    '(context :note "noted mid-turn")',
    "(context :drop t)",
    "(context :drop ((1 . 100000)) :keep (1))",
    '(context :drop ((1 . 100000)) :note "n")',
    "(context :drop ((1 . 6)))",
    "(context :drop (3 4) :keep (4))",
]

texts = st.one_of(
    st.sampled_from(["", " ", "  \n", "\n", "[[note]]", "[[note]]\n", "plain reply"]),
    st.lists(st.sampled_from(LINES), min_size=1, max_size=4).map("\n".join),
    st.text(alphabet="ab []\n", max_size=8),
)


@st.composite
def turns(draw) -> list[dict]:
    """Scripted rounds of one turn: tool rounds, then an answer without calls."""
    n = draw(st.integers(1, 3))
    rounds = [
        {
            "text": draw(texts),
            "calls": [
                {"code": c} for c in draw(st.lists(st.sampled_from(CELLS), min_size=1, max_size=2))
            ],
        }
        for _ in range(n - 1)
    ]
    return rounds + [{"text": draw(texts)}]


def lisp(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- one session ----------------------------------------------------------------


class Session:
    """A fresh home, workspace, loopback server and session; checks after every step."""

    def __init__(self, ptype: str):
        self.ptype = ptype
        self.tmp = tempfile.TemporaryDirectory(prefix="nc-prop-")
        root = Path(self.tmp.name)
        ws = root / "ws"
        ws.mkdir()
        for name, text in FILES.items():
            (ws / name).write_text(text)
        self.srv = LoopbackServer([], cache_min_tokens=1).start()
        home = write_config(root / "home", self.srv, ptype, auto_approve=True)
        self.app = App.open(home, "default", ws, environ={})
        self.sid = self.app.new_session("property")
        self.env = self.app.cell_env(self.sid, approve=lambda *a: True)
        self.asks = 0
        self.exported: str | None = None  # the last export's text, kept to edit later

    def close(self) -> None:
        self.app.close()
        self.srv.stop()
        self.tmp.cleanup()

    @property
    def store(self):
        return self.app.store

    def rows(self) -> list[tuple]:
        return self.store.read(
            "SELECT session, seq, kind, role, turn, text, payload FROM events ORDER BY id"
        )

    # -- steps

    def step(self, action, *args) -> None:
        """Run one step; no row that existed before it may change."""
        before = self.rows()
        action(*args)
        after = self.rows()
        assert after[: len(before)] == before, "an existing row of the log changed"

    def ask(self, rounds: list[dict], extra: str, draw=None) -> None:
        self.asks += 1
        text = f"ask {self.asks}" + (f": {extra}" if extra.strip() else "")
        first = len(self.srv.model_requests)
        top = self.store.last_seq(self.sid)
        self.srv.add_rounds(rounds)
        result = Agent(self.app, self.sid).ask(text, SelfEditing(self, draw))
        assert result.status == "done", result
        assert self.srv.rounds_left == 0
        recorded = self.srv.model_requests[first:]
        assert [r.status for r in recorded] == [200] * len(rounds)
        bodies = [r.body for r in recorded]
        for body in bodies:
            check(self.ptype, body)
        assert text in user_texts(self.ptype, bodies[0]), "the new ask is not in its request"
        self.check_takes(top, bodies)

    def check_takes(self, top: int, bodies: list[dict]) -> None:
        """Each receipt says taken or refused with a reason; a refusal's notice is
        in the request it preceded; no edit is left pending."""
        requests = 0
        for e in self.store.events(self.sid, after=top):
            if e.kind == "request":
                requests += 1
            if e.kind != "receipt":
                continue
            sections = e.text.split("\n[[receipt ")
            for section in sections:
                verdict = section.split("\n")[1]
                m = re.match(r"(taken|refused) at seq (\d+): (\S.*)", verdict)
                assert m and int(m.group(2)) == e.seq, e.text
                assert m.group(1) == "taken" or len(sections) == 1
            if verdict.startswith("refused"):
                notice = self.store.event(self.sid, e.seq + 1)
                assert notice.role == "notice" and verdict.split(": ", 1)[1] in notice.text
                assert notice.text in user_texts(self.ptype, bodies[requests]), (
                    "a refusal's notice is not in the request that followed it"
                )
        assert takes.pending_edits(self.store, self.sid) == []
        if any(e.kind == "receipt" for e in self.store.events(self.sid, after=top)):
            got = takes.receipt_file(self.app.workspace, self.sid).read_text()
            assert re.search(r"^(taken|refused) at seq \d+: ", got, re.MULTILINE), got

    def export(self) -> str:
        path = takes.export(self.app.workspace, self.sid)
        self.exported = path.read_text()
        return self.exported

    def write(self, text: str) -> None:
        takes.context_file(self.app.workspace, self.sid).write_text(text)

    def form(self, code: str) -> None:
        evaluate(code, self.env)  # an error result (a bad span) records nothing


class SelfEditing(TurnCallbacks):
    """The agent editing its own context mid-turn: when a (context) result names the
    file, the next round's request may find it edited (calls of this very turn
    included, whose results the export does not have)."""

    def __init__(self, s: Session, draw):
        self.s, self.draw = s, draw

    def on_result(self, seq: int, text: str, error: bool) -> None:
        path = takes.context_file(self.s.app.workspace, self.s.sid)
        if self.draw and text.startswith(str(path)) and self.draw(st.booleans()):
            path.write_text(mutate(self.draw, path.read_text(), removed_messages(self.s)))


def user_texts(ptype: str, body: dict) -> list[str]:
    out = []
    for msg in body["messages"]:
        if msg["role"] != "user":
            continue
        if ptype == "anthropic":
            out += [b["text"] for b in msg["content"] if b["type"] == "text"]
        else:
            out.append(msg["content"])
    return out


# -- edits of an exported file ------------------------------------------------------

MUTATIONS = (
    ["delete"] * 3
    + ["rewrite"] * 3
    + ["note"] * 2
    + ["note_under_call"] * 2
    + ["restore"] * 3
    + [
        "empty_body",
        "delete_all",
        "swap",
        "duplicate",
        "corrupt",
        "role",
        "unknown",
        "foreign",
        "first",
        "stray",
    ]
)


def mutate(draw, text: str, removed: list[tuple[int, str]]) -> str:
    first = text.split("\n", 1)[0]
    nonce = first.split()[-1].rstrip("]")
    blocks = [[f"[[m:{nonce} {b.id} {b.role}]]", b.body] for b in split(text, nonce).blocks]
    prefix = ""
    kinds = MUTATIONS + ["restore"] * 6 * bool(removed)  # restores need removed messages

    def pick() -> int:
        return draw(st.integers(0, len(blocks) - 1))

    for kind in draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3)):
        calls = [b for b in blocks if b[0].endswith(" call]]")]
        if kind == "delete" and blocks:
            blocks.pop(pick())
        elif kind == "delete_all":
            blocks.clear()
        elif kind == "rewrite" and blocks:
            blocks[pick()][1] = draw(texts)
        elif kind == "empty_body" and blocks:
            blocks[pick()][1] = ""
        elif kind == "note" and blocks:
            blocks[pick()][1] += "\n[[note]]\n" + draw(texts)
        elif kind == "note_under_call" and calls:
            draw(st.sampled_from(calls))[1] += "\n[[note]]\n" + draw(texts)
        elif kind == "restore" and removed:
            mid, role = draw(st.sampled_from(removed))
            role = draw(st.sampled_from([role] * 4 + ["user"]))
            body = draw(st.one_of(st.just(""), texts))
            blocks.insert(draw(st.integers(0, len(blocks))), [f"[[m:{nonce} {mid} {role}]]", body])
        elif kind == "swap" and len(blocks) > 1:
            i, j = pick(), pick()
            blocks[i], blocks[j] = blocks[j], blocks[i]
        elif kind == "duplicate" and blocks:
            blocks.insert(pick(), list(blocks[pick()]))
        elif kind == "corrupt" and blocks:
            k = pick()
            mid, role = head(blocks[k][0])
            blocks[k][0] = draw(
                st.sampled_from(
                    [f"[[m:{nonce} x{mid} {role}]]", f"[[m:{nonce} {mid} bogus]]", f"[[m:{nonce}]]"]
                )
            )
        elif kind == "role" and blocks:
            k = pick()
            mid, role = head(blocks[k][0])
            other = draw(st.sampled_from([r for r in ROLES if r != role]))
            blocks[k][0] = f"[[m:{nonce} {mid} {other}]]"
        elif kind == "unknown":
            blocks.append([f"[[m:{nonce} 99999 user]]", "who?"])
        elif kind == "foreign" and blocks:
            blocks[pick()][1] += "\n[[m:zz99 3 user]]"
        elif kind == "first":
            first = draw(st.sampled_from([first + " ", first.replace(" 1", " 7", 1), "[[x]]"]))
        elif kind == "stray":
            prefix = "stray words\n"
    return first + "\n" + prefix + "".join(f"{h}\n{body}\n" for h, body in blocks)


def head(line: str) -> tuple[str, str]:
    """ID and ROLE of a header line, as written (a corrupted one gives placeholders)."""
    m = re.fullmatch(r"\[\[m:\S+ (\S+) (\S+)\]\]", line)
    return (m.group(1), m.group(2)) if m else ("0", "user")


def removed_messages(s: Session) -> list[tuple[int, str]]:
    return [(m.id, m.role) for m in state(s.store, s.sid).removed()]


# -- (context …) forms ------------------------------------------------------------------


def form_code(draw, ids: list[int]) -> str:
    seqs = st.one_of(st.sampled_from(ids), st.integers(1, 120)) if ids else st.integers(1, 120)
    span = st.tuples(seqs, seqs).map(lambda p: f"({min(p)} . {max(p)})")
    parts = []
    drop = draw(
        st.one_of(
            st.none(),
            st.just("t"),
            st.lists(st.one_of(seqs.map(str), span), min_size=1, max_size=3).map(
                lambda xs: "(" + " ".join(xs) + ")"
            ),
        )
    )
    if drop is not None:
        parts.append(f":drop {drop}")
    keep = draw(st.one_of(st.none(), st.lists(seqs, min_size=1, max_size=3)))
    if keep:
        parts.append(f":keep ({' '.join(map(str, keep))})")
    note = draw(st.one_of(st.none(), texts))
    if note is not None or not parts:
        parts.append(f":note {lisp(note or 'a note')}")
    return "(context " + " ".join(parts) + ")"


# -- the property ------------------------------------------------------------------------

STEPS = ["ask"] * 3 + ["file"] * 4 + ["export", "old_file", "form", "form", "drop_t"]


def run_example(ptype: str, data) -> None:
    s = Session(ptype)
    try:
        for _ in range(data.draw(st.integers(1, 4), label="turns")):
            s.step(s.ask, data.draw(turns()), data.draw(texts), data.draw)
        for kind in data.draw(
            st.lists(st.sampled_from(STEPS), min_size=1, max_size=8), label="steps"
        ) + ["ask"]:
            if kind == "ask":
                s.step(s.ask, data.draw(turns()), data.draw(texts), data.draw)
            elif kind == "file":
                text = s.export()
                s.step(s.write, mutate(data.draw, text, removed_messages(s)))
            elif kind == "export":
                s.step(s.export)
            elif kind == "old_file" and s.exported is not None:
                s.step(s.write, mutate(data.draw, s.exported, removed_messages(s)))
            elif kind == "form":
                ids = [m.id for m in state(s.store, s.sid).messages]
                s.step(s.form, form_code(data.draw, ids))
            elif kind == "drop_t":
                s.step(s.form, "(context :drop t)")
    finally:
        s.close()


PROPERTY = settings(
    max_examples=max(1, EXAMPLES // 2),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
@PROPERTY
@given(data=st.data())
def test_every_request_is_valid_and_every_edit_is_taken_or_refused(ptype, data):
    run_example(ptype, data)
