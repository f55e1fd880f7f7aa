"""Fuzzing (issue 7.3): context files and cells never crash, and never change the log.

Hypothesis mutates the bytes of a real export (insertions, deletions, broken
headers, duplicated, reordered and dropped blocks, 1 MB bodies, invalid UTF-8,
CRLF, NUL) and feeds them to ``take.validate`` (the editor's :w) and to a
real take of context.txt; and it writes cells (malformed s-expressions, deep
nesting, huge strings, random unicode) for ``cells.evaluate`` over a real
workspace whose approvals all say no. Zero exceptions may escape; a take
only ever appends rows (a refusal: its edit, receipt and notice).

More than 10,000 cases run by default (each test's count is in PLANNED);
NODECODE_FUZZ_EXAMPLES=N multiplies every count by N. Runs are derandomized.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from helpers import write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.cells.evaluate import CellResult, evaluate
from nodecode.context import derived
from nodecode.context import take as takes
from nodecode.loopback import LoopbackServer
from nodecode.providers import registry
from nodecode.providers.wire import Request
from nodecode.verbs.prompt import SYSTEM_PROMPT, TOOLS
from nodecode.verbs.table import VERBS

FACTOR = max(1, int(os.environ.get("NODECODE_FUZZ_EXAMPLES", "1") or 1))
# Hypothesis draws cost more than a validate: most cases draw one seed and
# mutate with random.Random(seed); the others draw each mutation (and shrink).
PLANNED = {
    "validate": 600,
    "validate_seeded": 4400,
    "huge_validate": 30,
    "take": 300,
    "huge_take": 10,
    "cells": 500,
    "cells_seeded": 2400,
    "cell_text": 400,
    "cell_text_seeded": 1200,
    "nesting": 300,
    "huge_cells": 12,
}
RAN: Counter[str] = Counter()
ROW_COLUMNS = "session, seq, kind, role, turn, text, payload, time"


def fuzz(name: str):
    return settings(
        max_examples=PLANNED[name] * FACTOR,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )


# -- a real session and its export ------------------------------------------------------


class Template:
    """A home holding a session built by real turns and its export in context.txt."""

    def __init__(self, root: Path):
        self.ws = root / "ws"
        self.ws.mkdir()
        (self.ws / "a.txt").write_text("alpha\n[[note]]\nnot a note\n[[m:zzzz 1 user]]\n")
        (self.ws / "crlf.txt").write_bytes("windows\r\nlines ☃\r\n".encode())
        srv = LoopbackServer(
            [
                {"text": "Reading.", "calls": [{"code": ';; read a\n(read-file "a.txt")'}]},
                {
                    "text": "a.txt has a [[note]] line.",
                    "calls": [
                        {"code": ';; two files\n(read-file "crlf.txt")'},
                        {"code": "(list-files)"},
                    ],
                },
                {"text": "Done: ünïcödé ✓."},
                {"text": "Second turn.", "calls": [{"code": '(grep "alpha")'}]},
                {"text": "Found it."},
            ]
        ).start()
        try:
            self.home = write_config(root / "home", srv, auto_approve=True)
            app = App.open(self.home, "default", self.ws, environ={})
            self.sid = app.new_session()
            Agent(app, self.sid).ask("read a.txt", TurnCallbacks())
            Agent(app, self.sid).ask("grep alpha", TurnCallbacks())
            self.path = takes.export(app.workspace, self.sid)
            self.export = self.path.read_bytes()
            self.nonce = self.export.split(b"\n", 1)[0].split()[-1].rstrip(b"]")
            app.close()
        finally:
            srv.stop()
        self.rows = rows(self.home / "store" / "default.db")

    def copy(self, dest: Path) -> App:
        shutil.copytree(self.home, dest)
        return App.open(dest, "default", self.ws, environ={})


def rows(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT {ROW_COLUMNS} FROM events ORDER BY session, seq").fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Template:
    return Template(tmp_path_factory.mktemp("fuzz-template"))


# -- mutations of the export's bytes -------------------------------------------------

BAD_UTF8 = [
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xc0\xaf",
    b"\x80",
    b"\xe2\x82",
]
SNIPPETS = [
    b"\n[[note]]\n",
    b"[[note]]",
    b"\r\n",
    b"\x00",
    b"\n\n",
    b"\xef\xbb\xbf",
    "é☃\u2028\u0085".encode(),
    b"[[export ",
    b"]]",
    b"[[m:",
    b"\n[[m:zzzz 4 call]]\n",
    b"\t",
    b"\r",
]


def header_snippets(nonce: bytes) -> list[bytes]:
    return [
        b"\n[[m:" + nonce + b" 999 user]]\n",
        b"\n[[m:" + nonce + b" 5 tool]]\n",
        b"[[m:" + nonce + b" ",
        b"\n[[m:" + nonce + b"]]\n",
        b"\n[[m:" + nonce + b" 1 User]]\n",
        b"\n[[m:" + nonce + b" -3 note]]\n",
        b"\n[[m:" + nonce + b" 2 note]]x\n",
        b"\n[[m:" + nonce + b" 99999999999999999999999 user]]\n",
    ]


def blocks(data: bytes, nonce: bytes) -> list[tuple[int, int]]:
    """(start, end) byte spans of each block: its header line to the next header."""
    starts = [m.start() + 1 for m in re.finditer(rb"\n\[\[m:" + re.escape(nonce) + rb" ", data)]
    return [
        (s, (starts[k + 1] if k + 1 < len(starts) else len(data))) for k, s in enumerate(starts)
    ]


def mutate(data: bytes, nonce: bytes, op: tuple) -> bytes:
    kind, a, b, extra = op
    n = len(data)
    spans = blocks(data, nonce)
    if kind == "insert":
        at = a % (n + 1)
        return data[:at] + extra + data[at:]
    if kind == "delete":
        at = a % (n + 1)
        return data[:at] + data[at + 1 + b % 200 :]
    if kind == "byte":
        at = a % max(n, 1)
        return data[:at] + bytes([b % 256]) + data[at + 1 :]
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n") if a % 2 else data.replace(b"\n", b"\r\n", 1 + b % 5)
    if not spans:
        return data + extra
    x, y = spans[a % len(spans)], spans[b % len(spans)]
    if kind == "dup":
        return data[: y[0]] + data[x[0] : x[1]] + data[y[0] :]
    if kind == "swap" and x != y:
        first, second = sorted((x, y))
        return (
            data[: first[0]]
            + data[second[0] : second[1]]
            + data[first[1] : second[0]]
            + data[first[0] : first[1]]
            + data[second[1] :]
        )
    if kind == "drop":
        return data[: x[0]] + data[x[1] :]
    if kind == "header":  # corrupt one header line at a chosen byte
        end = data.index(b"\n", x[0]) if b"\n" in data[x[0] :] else x[1]
        at = x[0] + b % max(end - x[0], 1)
        return data[:at] + extra + data[at + 1 :]
    if kind == "body":  # rewrite a body: put the snippet right after the header
        end = data.find(b"\n", x[0])
        end = x[1] if end < 0 else end + 1
        return data[:end] + extra + data[end:]
    return data


def ops(nonce: bytes, huge: bool = False):
    snippet = st.one_of(
        st.sampled_from(SNIPPETS + header_snippets(nonce) + BAD_UTF8),
        st.binary(max_size=24),
        st.text(max_size=12).map(lambda t: t.encode("utf-8")),
    )
    kinds = st.sampled_from(
        ["insert", "delete", "byte", "crlf", "dup", "swap", "drop", "header", "body"]
    )
    op = st.tuples(kinds, st.integers(0, 2**20), st.integers(0, 2**16), snippet)
    if not huge:
        return st.lists(op, min_size=1, max_size=4)
    big = st.sampled_from(
        [
            b"x" * 2**20,
            (b"long line " * 104858)[: 2**20],
            b"line\n" * 209716,
            "ü".encode() * 2**19,
            b"\x00" * 2**20,
        ]
    )
    return st.lists(op, max_size=2).flatmap(
        lambda rest: st.tuples(st.integers(0, 2**16), big).map(
            lambda hb: [("body", hb[0], hb[0], hb[1]), *rest]
        )
    )


def mutated(template: Template, data, huge: bool = False) -> bytes:
    out = template.export
    for op in data.draw(ops(template.nonce, huge)):
        out = mutate(out, template.nonce, op)
    return out


KINDS = ["insert", "delete", "byte", "crlf", "dup", "swap", "drop", "header", "body"]


def seeded(template: Template, seed: int, count: int) -> bytes:
    """The export after ``count`` mutations chosen by random.Random(seed)."""
    rng = random.Random(seed)
    pool = SNIPPETS + header_snippets(template.nonce) + BAD_UTF8
    out = template.export
    for _ in range(count):
        pick = rng.random()
        if pick < 0.5:
            snippet = rng.choice(pool)
        elif pick < 0.75:
            snippet = rng.randbytes(rng.randint(0, 24))
        else:
            snippet = "".join(
                chr(rng.choice([rng.randint(32, 126), rng.randint(0, 0x2FFFF)]))
                for _ in range(rng.randint(1, 8))
            ).encode("utf-8", "surrogatepass")
        op = (rng.choice(KINDS), rng.randint(0, 2**20), rng.randint(0, 2**16), snippet)
        out = mutate(out, template.nonce, op)
    return out


# -- context files through validate ----------------------------------------------------


@pytest.fixture(scope="module")
def validator(template, tmp_path_factory):
    app = template.copy(tmp_path_factory.mktemp("fuzz-validate") / "home")
    yield app
    app.close()


def check_validate(template: Template, app: App, raw: bytes, data) -> None:
    errors = data.draw(st.sampled_from(["surrogateescape", "replace"]))
    text = raw.decode("utf-8", errors)
    last = app.store.last_seq(template.sid)
    result = takes.validate(app.workspace, template.sid, text)
    assert isinstance(result["ok"], bool) and isinstance(result["errors"], list)
    assert all(
        isinstance(line, int) and line >= 1 and isinstance(reason, str)
        for line, reason in result["errors"]
    )
    assert result["ok"] is (not result["errors"])
    if raw == template.export:
        assert result["ok"]
    assert app.store.last_seq(template.sid) == last  # validating writes nothing


@fuzz("validate")
@given(data=st.data())
def test_fuzzed_context_files_validate_without_raising(template, validator, data):
    RAN["validate"] += 1
    check_validate(template, validator, mutated(template, data), data)


@fuzz("validate_seeded")
@given(seed=st.integers(0, 2**64), count=st.integers(1, 5), data=st.data())
def test_seeded_mutations_of_context_files_validate_without_raising(
    template, validator, seed, count, data
):
    RAN["validate_seeded"] += 1
    check_validate(template, validator, seeded(template, seed, count), data)


@fuzz("huge_validate")
@given(data=st.data())
def test_fuzzed_context_files_with_1mb_bodies_validate_without_raising(template, validator, data):
    RAN["huge_validate"] += 1
    check_validate(template, validator, mutated(template, data, huge=True), data)


# -- context files through a real take ---------------------------------------------------


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-take")


def check_take(template: Template, scratch: Path, raw: bytes) -> None:
    home = scratch / f"home-{sum(RAN.values())}"
    app = template.copy(home)
    try:
        path = takes.context_file(app.workspace, template.sid)
        path.write_bytes(raw)
        turn = takes.head_turn(app.store, template.sid)
        report = takes.take(app.workspace, template.sid, turn)
        after = rows(app.store.path)
        assert after[: len(template.rows)] == template.rows  # no existing row changed
        new = [r[2] for r in after[len(template.rows) :]]
        if raw == template.export:
            assert new == [] and not report.receipts
        elif report.taken:
            assert new[0] == "edit" and new[-1] == "receipt"
            assert set(new[1:-1]) <= {"note"}, new
        else:
            assert new == ["edit", "receipt", "notice"], new
            assert "refused at seq" in report.receipts[0]
        if new:
            assert (
                takes.receipt_file(app.workspace, template.sid)
                .read_bytes()
                .startswith(b"[[receipt ")
            )
        assert path.read_bytes() == raw  # a take writes nothing into context.txt
        messages = derived.build(app.store, template.sid)
        for ptype in ("anthropic", "openai"):
            registry.wire(ptype).build(
                Request(messages, model="m", system=SYSTEM_PROMPT, tools=TOOLS, max_tokens=1024)
            )
    finally:
        app.close()
        shutil.rmtree(home)


@fuzz("take")
@given(seed=st.integers(0, 2**64), count=st.integers(1, 4), drawn=st.booleans(), data=st.data())
def test_fuzzed_context_files_are_taken_or_refused_and_only_append(
    template, scratch, seed, count, drawn, data
):
    RAN["take"] += 1
    raw = mutated(template, data) if drawn else seeded(template, seed, count)
    check_take(template, scratch, raw)


@fuzz("huge_take")
@given(data=st.data())
def test_fuzzed_context_files_with_1mb_bodies_are_taken_or_refused(template, scratch, data):
    RAN["huge_take"] += 1
    check_take(template, scratch, mutated(template, data, huge=True))


# -- cells ---------------------------------------------------------------------------


def workspace_state(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def cell_env(template, tmp_path_factory):
    app = template.copy(tmp_path_factory.mktemp("fuzz-cells") / "home")
    before = workspace_state(template.ws)
    asked: list[str] = []

    def refuse(kind: str, detail: str) -> bool:
        asked.append(kind)
        return False

    yield app.cell_env(template.sid, approve=refuse)
    assert workspace_state(template.ws) == before  # nothing written, nothing run
    assert set(asked) <= {"write", "shell"}
    app.close()


def check_cell(env, code: str) -> None:
    result = evaluate(code, env)
    assert isinstance(result, CellResult)
    assert isinstance(result.output, str) and isinstance(result.error, bool)


KEYWORDS = [
    ":from",
    ":to",
    ":glob",
    ":path",
    ":timeout",
    ":drop",
    ":keep",
    ":note",
    ":match",
    ":before",
    ":limit",
    ":x",
    ":",
]
NAMES = sorted(VERBS) + ["frobnicate", "t", "nil", "quote", "lambda", "a.txt", "..", "/"]


def lisp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


atoms = st.one_of(
    st.sampled_from(NAMES),
    st.sampled_from(KEYWORDS),
    st.text(max_size=30).map(lisp_string),
    st.sampled_from(
        [
            '"a.txt"',
            '"../a.txt"',
            '"/etc/passwd"',
            '"~"',
            '"."',
            '"*"',
            '"**/*"',
            '"[a-"',
            '"(?P<"',
            '"\\\\"',
            '""',
            '"\\u0000"',
            '"a.txt\\nb"',
            '"%"',
            '"-x"',
            '"AND OR NOT"',
            '"\\""',
            '"link/../../x"',
        ]
    ),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True).map(repr),
    st.sampled_from(["t", "nil", "'", "'x", ".", "#t", "1e400", "-", "+1", "0x1F"]),
)
forms = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6).map(lambda xs: "(" + " ".join(xs) + ")"),
        st.lists(inner, max_size=4).map(lambda xs: "[" + " ".join(xs) + "]"),
        st.tuples(inner, inner).map(lambda p: f"({p[0]} . {p[1]})"),
        inner.map(lambda x: "'" + x),
    ),
    max_leaves=12,
)
verb_calls = st.tuples(st.sampled_from(sorted(VERBS)), st.lists(forms, max_size=5)).map(
    lambda vc: "(" + " ".join([vc[0], *vc[1]]) + ")"
)
separators = st.sampled_from([" ", "\n", "\t", "\r\n", '\n;; comment ( " [\n', " ; x\n", ""])


@fuzz("cells")
@given(parts=st.lists(st.tuples(st.one_of(verb_calls, forms), separators), min_size=1, max_size=4))
def test_fuzzed_cells_of_forms_never_raise(cell_env, parts):
    RAN["cells"] += 1
    check_cell(cell_env, "".join(form + sep for form, sep in parts))


ATOMS = [
    '"a.txt"',
    '"../a.txt"',
    '"/etc/passwd"',
    '"~"',
    '"."',
    '"*"',
    '"**/*"',
    '"[a-"',
    '"(?P<"',
    '"\\\\"',
    '""',
    '"a.txt\\nb"',
    '"%"',
    '"-x"',
    '"AND OR NOT"',
    '"\\""',
    '"link/../../x"',
    "t",
    "nil",
    "'",
    "'x",
    ".",
    "#t",
    "1e400",
    "-",
    "+1",
    "0x1F",
    "nan",
]
SEPARATORS = [" ", "\n", "\t", "\r\n", '\n;; comment ( " [\n', " ; x\n", ""]
CELL_CHARS = "()[]\"';:\\ .\n#`,@|{}a1-é\x00"


def random_text(rng: random.Random, size: int) -> str:
    return "".join(
        chr(rng.choice([rng.randint(32, 126), rng.randint(0, 0x10FFFF)])) for _ in range(size)
    )


def random_form(rng: random.Random, depth: int) -> str:
    """A form like the ``forms`` strategy builds, from a seeded generator."""
    pick = rng.random()
    if depth <= 0 or pick < 0.45:
        choice = rng.random()
        if choice < 0.3:
            return rng.choice(NAMES)
        if choice < 0.45:
            return rng.choice(KEYWORDS)
        if choice < 0.65:
            return lisp_string(random_text(rng, rng.randint(0, 20)))
        if choice < 0.8:
            return str(rng.randint(-(2**70), 2**70))
        return rng.choice(ATOMS)
    items = [random_form(rng, depth - 1) for _ in range(rng.randint(0, 5))]
    if pick < 0.55:
        return "[" + " ".join(items) + "]"
    if pick < 0.62 and len(items) >= 2:
        return f"({items[0]} . {items[1]})"
    if pick < 0.68:
        return "'" + random_form(rng, depth - 1)
    if pick < 0.9:
        return "(" + " ".join([rng.choice(sorted(VERBS)), *items]) + ")"
    return "(" + " ".join(items) + ")"


@fuzz("cells_seeded")
@given(seed=st.integers(0, 2**64))
def test_seeded_cells_of_forms_never_raise(cell_env, seed):
    RAN["cells_seeded"] += 1
    rng = random.Random(seed)
    code = "".join(
        random_form(rng, rng.randint(0, 5)) + rng.choice(SEPARATORS)
        for _ in range(rng.randint(1, 4))
    )
    check_cell(cell_env, code)


@fuzz("cell_text_seeded")
@given(seed=st.integers(0, 2**64), size=st.integers(0, 120))
def test_seeded_cell_text_never_raises(cell_env, seed, size):
    RAN["cell_text_seeded"] += 1
    rng = random.Random(seed)
    if seed % 2:
        code = "".join(rng.choice(CELL_CHARS) for _ in range(size))
    else:
        code = random_text(rng, size)
    check_cell(cell_env, code)


@fuzz("cell_text")
@given(
    code=st.one_of(
        st.text(alphabet=st.sampled_from(list(CELL_CHARS)), max_size=80),
        st.text(st.characters(codec=None), max_size=80),
        st.text(st.characters(blacklist_categories=()), max_size=40),
    )
)
def test_fuzzed_cell_text_never_raises(cell_env, code):
    RAN["cell_text"] += 1
    check_cell(cell_env, code)


@fuzz("nesting")
@given(
    depth=st.integers(1, 20000),
    opener=st.sampled_from(["(", "[", "'(", "(list-files "]),
    closer=st.sampled_from([")", "]", ""]),
    inner=st.sampled_from(["", "x", '"s"', "(", ")"]),
    balance=st.integers(-3, 3),
)
def test_deeply_nested_cells_never_raise(cell_env, depth, opener, closer, inner, balance):
    RAN["nesting"] += 1
    code = opener * depth + inner + closer * max(0, depth + balance)
    check_cell(cell_env, code)


@fuzz("huge_cells")
@given(
    size=st.sampled_from([2**20 - 40, 2**20 - 20, 2**20, 2**20 + 1, 3 * 2**20]),
    verb=st.sampled_from(
        ["read-file", "shell", "write-file", "grep", "recall-search", "context :note", "frobnicate"]
    ),
    char=st.sampled_from(["x", "é", "\\\\", ")", "\n"]),
    closed=st.booleans(),
)
def test_cells_with_huge_strings_never_raise(cell_env, size, verb, char, closed):
    RAN["huge_cells"] += 1
    body = (char * (size // len(char.encode())))[:size]
    check_cell(cell_env, f'({verb} "{body}' + ('")' if closed else ""))


def test_the_fuzzing_ran_at_least_10000_cases():
    assert sum(PLANNED.values()) >= 10_000
    for name, count in RAN.items():  # every fuzz test that ran here ran its whole count
        assert count >= PLANNED[name] * FACTOR, (name, count)
