"""A store written before issue 12 (tests/fixtures/store_before_issue12.db, made
by the pre-change main through its CLI; see tests/fixtures/SOURCES.md) opens,
migrates, shows the context, log and tree it showed, and works on: another
turn, another file edit taken."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest
from helpers import FIXTURES, run_cli, write_config
from nodecode.context.fileformat import parse_first, split

OLD = FIXTURES / "store_before_issue12.db"
SID = "s-tpd56sq9j"

# What the old code printed for this store (captured with it, right after writing it).
# A request row names the model that answered (issue 15): an old store's request
# events recorded it already.
RECALL_LOG = """\
[seq 1 · turn 1 · user] what does a.txt say?
[seq 2 · turn 1 · request] loopback/loopback-model usage in=738 out=19 cache_read=0
[seq 3 · turn 1 · assistant] Reading a.
[seq 4 · turn 1 · call] ;; read a⏎(read-file "a.txt")
[seq 5 · turn 1 · tool] alpha: the parser reads one token at a time⏎[seq 5]
[seq 6 · turn 1 · request] loopback/loopback-model usage in=781 out=12 cache_read=0
[seq 7 · turn 1 · assistant] a.txt describes the parser: one token at a time.
[seq 8 · turn 2 · user] and b.txt?
[seq 9 · turn 2 · request] loopback/loopback-model usage in=805 out=16 cache_read=0
[seq 10 · turn 2 · call] ;; read b⏎(read-file "b.txt")
[seq 11 · turn 2 · tool] beta: the writer keeps a cursor⏎beta: the writer keeps a cursor⏎\
beta: the writer keeps a cursor⏎[seq 11]
[seq 12 · turn 2 · request] loopback/loopback-model usage in=858 out=12 cache_read=0
[seq 13 · turn 2 · assistant] b.txt says the writer keeps a cursor, three times.
[seq 14 · turn 3 · user] set VALUE to 2 in c.txt
[seq 15 · turn 3 · request] loopback/loopback-model usage in=886 out=26 cache_read=0
[seq 16 · turn 3 · assistant] Editing.
[seq 17 · turn 3 · call] (edit-file "c.txt" "VALUE = 1" "VALUE = 2")
[seq 18 · turn 3 · tool] edited c.txt: replaced 1 occurrence (line 1)⏎[seq 18]
[seq 19 · turn 3 · request] loopback/loopback-model usage in=938 out=9 cache_read=0
[seq 20 · turn 3 · assistant] c.txt now holds VALUE = 2.
[seq 21 · turn 4 · user] summarise what you read
[seq 22 · turn 4 · request] loopback/loopback-model usage in=961 out=18 cache_read=0
[seq 23 · turn 4 · assistant] Summary: a is the parser, b the writer, c a value now 2.
[seq 24 · turn 4 · export] [[export default/s-tpd56sq9j 1 b2dru8]]
[seq 25 · turn 5 · user] go on with the edited context
[seq 26 · turn 5 · edit] file edit
[seq 27 · turn 5 · note] The person noted: the summary is right.
[seq 28 · turn 5 · receipt] [[receipt default/s-tpd56sq9j export 1]]⏎taken at seq 28: kept 14 · \
deleted 1 (13) · rewrote 1 (20) · noted 1 (27) · restored 0⏎tokens: 993 → 995⏎cache: unchanged \
through 11
[seq 29 · turn 5 · request] loopback/loopback-model usage in=987 out=9 cache_read=0
[seq 30 · turn 5 · assistant] Noted: the edited context reads well.
[seq 31 · turn 5 · stub] [history evicted: seq 1–7 · 1 turns · recall: (recall-log :match "text" \
:before 8)]⏎;; read a
[seq 32 · turn 5 · evict] [[receipt default/s-tpd56sq9j evict]]⏎evicted at seq 32: turn 1 \
(seq 1–7) · tokens: 1000 → 964
[seq 33 · turn 6 · user · undone] one more thing
[seq 34 · turn 6 · request · undone] loopback/loopback-model usage in=971 out=7 cache_read=0
[seq 35 · turn 6 · assistant · undone] A turn that will be undone.
[seq 36 · turn 5 · move] undo: head turn 6 → turn 5
[seq 37 · turn 5 · export] [[export default/s-tpd56sq9j 2 3hny01]]
"""
TREE = """\
1  what does a.txt say? · seq 1–7 · done
2  and b.txt? · seq 8–13 · done
3  set VALUE to 2 in c.txt · seq 14–20 · done
4  summarise what you read · seq 21–23 · done
5  go on with the edited context · seq 25–30 · done ← head
6  one more thing · seq 33–35 · done (undone)
"""
TEXT_20 = "baa65ade225490403b00a880d4454cd82f78c34b7ba73dac590e3fd29faa4417"
EXPORT_1 = "fca4ccddf19bad241ec101e3c0c6ad9f09d4df6f7467748550c0a590365957cc"
EDIT_1 = "8fc256aaac537fe4324ca07f819829087029976366413005724f98606358acac"
EXPORT_2 = "8b2d4cc7238e98eb5c69927cb8c3def9daa78bf299ab0b77fb54895fae20d0d5"
ORDER_28 = [1, 3, 4, 5, 7, 8, 10, 11, 14, 16, 17, 18, 20, 21, 23, 27, 25]
ORDER_32 = [31, 8, 10, 11, 14, 16, 17, 18, 20, 21, 23, 27, 25, 30]
ENTRIES = {  # seq: (head line, text lines, payload)
    24: (
        "[seq 24 · turn 4 · export]",
        ["[[export default/s-tpd56sq9j 1 b2dru8]]"],
        {
            "number": 1,
            "nonce": "b2dru8",
            "base": 0,
            "blob": EXPORT_1,
            "ids": [1, 3, 4, 5, 7, 8, 10, 11, 13, 14, 16, 17, 18, 20, 21, 23],
        },
    ),
    26: (
        "[seq 26 · turn 5 · edit]",
        ["file edit"],
        {"source": "file", "export": 1, "base": 0, "blob": EDIT_1},
    ),
    28: (
        "[seq 28 · turn 5 · receipt]",
        [
            "[[receipt default/s-tpd56sq9j export 1]]",
            "taken at seq 28: kept 14 · deleted 1 (13) · rewrote 1 (20) · noted 1 (27) · restored 0",
            "tokens: 993 → 995",
            "cache: unchanged through 11",
        ],
        {"edits": [26], "context": {"order": ORDER_28, "texts": [[20, TEXT_20]], "restored": []}},
    ),
    32: (
        "[seq 32 · turn 5 · evict]",
        [
            "[[receipt default/s-tpd56sq9j evict]]",
            "evicted at seq 32: turn 1 (seq 1–7) · tokens: 1000 → 964",
        ],
        {
            "context": {"order": ORDER_32, "texts": [[20, TEXT_20]], "restored": []},
            "reason": "manual",
            "evicted": [1, 3, 4, 5, 7],
            "stubs": [31],
            "before": 1000,
            "after": 964,
            "budget": None,
        },
    ),
    37: (
        "[seq 37 · turn 5 · export]",
        ["[[export default/s-tpd56sq9j 2 3hny01]]"],
        {"number": 2, "nonce": "3hny01", "base": 3, "blob": EXPORT_2, "ids": ORDER_32},
    ),
}


@pytest.fixture
def old_home(tmp_path, loopback):
    """A home holding a copy of the old store, its provider a fresh loopback server."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    (ws / "c.txt").write_text("VALUE = 2\n")
    (home / "store").mkdir(parents=True)
    shutil.copyfile(OLD, home / "store" / "default.db")
    srv = loopback([])
    write_config(home, srv, auto_approve=True)
    return home, ws, srv


def cli(home, ws, *args: str) -> str:
    done = run_cli(*args, home=home, cwd=ws)
    assert done.returncode == 0, done.stderr
    return done.stdout


def blocks(text: str) -> list[tuple[int, str, str]]:
    nonce = parse_first(text.split("\n", 1)[0])[3]
    return [(b.id, b.role, b.body) for b in split(text, nonce).blocks]


def old_blob(digest: str) -> bytes:
    """A blob as the old code stored it, read from the fixture itself."""
    db = sqlite3.connect(f"file:{OLD}?immutable=1", uri=True)  # never touched
    try:
        return bytes(db.execute("SELECT data FROM blobs WHERE hash = ?", (digest,)).fetchone()[0])
    finally:
        db.close()


def test_the_old_store_migrates_and_shows_the_same_context_log_and_tree(old_home):
    home, ws, _ = old_home
    assert cli(home, ws, "recall-log", "--limit", "100") == RECALL_LOG
    assert cli(home, ws, "tree") == TREE
    for seq, (head, lines, payload) in ENTRIES.items():
        got = cli(home, ws, "recall-entry", str(seq)).rstrip("\n").split("\n")
        assert got[0] == head and got[1 : 1 + len(lines)] == lines, got
        assert json.loads("\n".join(got[1 + len(lines) :])) == payload

    path = cli(home, ws, "context").strip()
    with open(path, encoding="utf-8") as f:
        now = f.read()
    assert parse_first(now.split("\n", 1)[0])[1:3] == (SID, 3)
    assert blocks(now) == blocks(old_blob(EXPORT_2).decode())

    db = sqlite3.connect(home / "store" / "default.db")
    names = {r[0] for r in db.execute("SELECT name FROM migrations")}
    rows = {
        h: (base, len(data)) for h, base, data in db.execute("SELECT hash, base, data FROM blobs")
    }
    db.close()
    assert "m011_encode_file_blobs_as_deltas" in names
    # The edited file is now kept as a delta against its export, smaller than itself.
    assert rows[EDIT_1][0] == EXPORT_1 and rows[EDIT_1][1] < len(old_blob(EDIT_1)) // 3
    assert rows[EXPORT_2] == (None, len(old_blob(EXPORT_2)))  # the newest export stays whole
    for digest in (EXPORT_1, EDIT_1, EXPORT_2):  # and every file reads back byte for byte
        shown = run_cli("blob", digest[:12], home=home, cwd=ws)
        assert shown.returncode == 0 and shown.stdout.encode() == old_blob(digest)
        assert hashlib.sha256(shown.stdout.encode()).hexdigest() == digest


def test_the_old_store_runs_another_turn_and_takes_another_edit(old_home):
    home, ws, srv = old_home
    srv.add_rounds([{"text": "Still here."}, {"text": "Taken, thanks."}])
    assert "Still here." in cli(home, ws, "ask", "are you there?")
    first = srv.model_requests[0].body["messages"]
    assert first[0]["content"][0]["text"].startswith("[history evicted: seq 1–7")
    assert "c.txt holds VALUE = 2 (rewritten in the file)." in json.dumps(first)

    path = cli(home, ws, "context").strip()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    nonce = parse_first(text.split("\n", 1)[0])[3]
    text = text.replace("Noted: the edited context reads well.", "Noted, and shortened.")
    text = text.replace(f"[[m:{nonce} 14 user]]\nset VALUE to 2 in c.txt\n", "")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    assert "Taken, thanks." in cli(home, ws, "ask", "go on")
    receipt = (home / "context" / "default" / SID / "context.receipt.txt").read_text()
    assert (
        "\ntaken at seq " in receipt and "deleted 1 (14)" in receipt and "rewrote 1 (30)" in receipt
    )
    sent = json.dumps(srv.model_requests[-1].body["messages"])
    assert "Noted, and shortened." in sent and "set VALUE to 2 in c.txt" not in sent
    assert "Noted: the edited context reads well." not in sent
