"""Benchmark recall (bench/README.md): recall-search over 1,000,000 events vs grep -F, and recall-log.

The store (1,000 sessions; one holds 100,000 events) and a plain dump of the
same texts are generated from a fixed seed and cached under bench/.cache/.
Run: .venv/bin/python bench/recall.py [--small]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
from nodecode import recall
from nodecode.log import sessions
from nodecode.log.store import Store, open_store

CACHE = Path(__file__).resolve().parent / ".cache"
SEED = 7_2024
VOCABULARY = 30_000
T0 = 1_700_000_000.0
COMMON = [
    "the",
    "to",
    "a",
    "of",
    "and",
    "in",
    "is",
    "it",
    "that",
    "for",
    "file",
    "this",
    "test",
    "def",
    "return",
    "self",
    "import",
    "error",
    "line",
    "value",
    "function",
    "name",
    "path",
    "with",
    "not",
    "from",
    "on",
    "be",
    "if",
    "as",
    "list",
    "call",
]
SYLLABLES = [
    "ka",
    "ro",
    "mi",
    "su",
    "te",
    "na",
    "lo",
    "vi",
    "pe",
    "da",
    "zu",
    "ri",
    "mo",
    "ke",
    "sa",
    "tu",
    "ne",
    "li",
    "fa",
    "go",
    "bu",
    "che",
    "ly",
    "qua",
    "xen",
    "dor",
    "pli",
    "str",
    "ing",
    "ent",
    "ast",
]
# (role or kind, how often, fewest words, most words)
SHAPES = [
    ("assistant", 25, 8, 60),
    ("call", 20, 4, 16),
    ("tool", 22, 10, 120),
    ("request", 20, 0, 0),
    ("note", 2, 5, 30),
    ("edit", 3, 3, 10),
]
# Queries as vocabulary ranks (0 = most common): common + rarer words, as people search.
QUERIES = [(40, 900), (150, 2500, 6000), (8, 30), (1200, 4000), (300, 15000)]


@dataclass(frozen=True)
class Size:
    events: int
    sessions: int

    @property
    def big(self) -> int:
        return self.events // 10


FULL, SMALL = Size(1_000_000, 1_000), Size(10_000, 10)


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    """Words by rank (real common words first, then made-up ones) and Zipf cumulative weights."""
    words, seen = list(COMMON), set(COMMON)
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    total, cum = 0.0, []
    for rank in range(1, len(words) + 1):
        total += 1.0 / rank**1.07
        cum.append(total)
    return words, cum


def session_sizes(size: Size) -> list[int]:
    """One big session, the rest of the events shared evenly by the others."""
    rest, others = size.events - size.big, size.sessions - 1
    return [size.big] + [rest // others + (i < rest % others) for i in range(others)]


class Texts:
    """Draws texts from the vocabulary in large batches (one ``choices`` call per refill)."""

    def __init__(self, rng: random.Random, words: list[str], cum: list[float]):
        self.rng, self.words, self.cum = rng, words, cum
        self.pool: list[str] = []
        self.at = 0

    def take(self, n: int) -> list[str]:
        if self.at + n > len(self.pool):
            self.pool = self.rng.choices(self.words, cum_weights=self.cum, k=200_000 + n)
            self.at = 0
        self.at += n
        return self.pool[self.at - n : self.at]

    def text(self, kind: str, low: int, high: int) -> str:
        words = self.take(self.rng.randint(low, high))
        if kind == "tool":
            return "\n".join(" ".join(words[i : i + 9]) for i in range(0, len(words), 9))
        if kind == "call":
            return f';; {" ".join(words)}\n(grep "{words[0]}" :path "src/{words[-1]}.py")'
        return " ".join(words)


def session_rows(
    sid: str, count: int, texts: Texts, clock: Iterator[float]
) -> tuple[list[tuple], list[tuple]]:
    """``count`` events in turns (an ask, then rounds) and the turns rows; turns form one chain."""
    rng, events, turn_rows = texts.rng, [], []
    kinds = [s[0] for s in SHAPES]
    weights = [s[1] for s in SHAPES]
    shapes = {s[0]: s for s in SHAPES}
    turn = 0
    while len(events) < count:
        turn += 1
        first = len(events) + 1
        length = min(rng.randint(4, 16), count - len(events))
        for i in range(length):
            kind = "user" if i == 0 else rng.choices(kinds, weights)[0]
            _, _, low, high = shapes.get(kind, ("user", 0, 3, 40))
            role = None if kind in ("request", "edit") else kind
            payload = None
            if kind == "request":
                payload = msgpack.packb(
                    {
                        "usage": {
                            "input": rng.randint(1000, 90000),
                            "output": rng.randint(10, 900),
                            "cache_read": rng.randint(0, 80000),
                        }
                    }
                )
            text = texts.text(kind, low, high) if high else ""
            events.append((sid, len(events) + 1, kind, role, turn, text, payload, next(clock)))
        turn_rows.append((sid, turn, turn - 1 or None, first, len(events), "done"))
    return events, turn_rows


def build(size: Size, home: Path) -> None:
    """Generate the store and the dump through the real schema (migrations and FTS trigger)."""
    shutil.rmtree(home, ignore_errors=True)
    rng = random.Random(SEED)
    texts = Texts(rng, *vocabulary(rng))
    clock = (T0 + i for i in range(size.events * 2))
    store = open_store(home, "bench")
    with open(home / "texts.txt", "w", encoding="utf-8") as dump:
        for n, count in enumerate(session_sizes(size)):
            sid = sessions.create(store, title=f"bench {n}")
            events, turn_rows = session_rows(sid, count, texts, clock)
            with store.atomic() as db:
                db.executemany(
                    "INSERT INTO events (session, seq, kind, role, turn, text, "
                    "payload, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    events,
                )
                db.executemany(
                    "INSERT INTO turns (session, number, parent, first_seq, last_seq,"
                    " status) VALUES (?, ?, ?, ?, ?, ?)",
                    turn_rows,
                )
                db.execute("UPDATE sessions SET head = ? WHERE id = ?", (turn_rows[-1][1], sid))
            dump.writelines(e[5] + "\n" for e in events if e[3] is not None)
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    (home / "built.json").write_text(
        json.dumps({"events": size.events, "sessions": size.sessions, "seed": SEED})
    )


def cached(size: Size) -> Path:
    """The cached home for ``size``, built first when missing or stale."""
    home = CACHE / f"recall-{size.events}"
    marker = home / "built.json"
    want = {"events": size.events, "sessions": size.sessions, "seed": SEED}
    if not marker.exists() or json.loads(marker.read_text()) != want:
        started = time.perf_counter()
        print(
            f"building {size.events:,} events in {size.sessions:,} sessions under {home} …",
            flush=True,
        )
        build(size, home)
        print(f"built in {time.perf_counter() - started:.0f} s", flush=True)
    return home


def timed(fn: Callable[[], object], runs: int = 7) -> float:
    """Median wall time of ``fn`` in milliseconds, after one warm-up run."""
    fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def grep_ms(word: str, dump: Path) -> float:
    return timed(
        lambda: subprocess.run(
            ["grep", "-F", "-c", word, str(dump)], capture_output=True, check=False
        )
    )


def bench_search(store: Store, dump: Path, words: list[str]) -> list[float]:
    """recall-search vs grep -F of each query's rarest word; returns the ratios."""
    ratios = []
    for ranks in QUERIES:
        query = " ".join(words[r] for r in ranks)
        rarest = words[max(ranks)]
        hits = len(recall.recall_search(store, query))
        ours = timed(lambda query=query: recall.recall_search(store, query))
        theirs = grep_ms(rarest, dump)
        ratios.append(ours / theirs)
        print(f"  {query!r} ({hits} hits; grep -F {rarest!r})")
        print(
            f"recall-search: {ours:.2f} ms vs grep -F: {theirs:.2f} ms → ratio "
            f"{ours / theirs:.3f} (goal < 1)"
        )
    return ratios


def bench_log(store: Store, size: Size, words: list[str]) -> None:
    """recall-log over the big session: :match + :before + :limit, common and rare matches."""
    sid = store.read("SELECT id FROM sessions WHERE title = 'bench 0'")[0][0]
    before = size.big * 3 // 4
    for rank in (40, 4000, 25000):
        match = words[rank]
        lines = recall.recall_log(store, sid, match=match, before=before, limit=20)
        ms = timed(
            lambda match=match: recall.recall_log(store, sid, match=match, before=before, limit=20)
        )
        print(
            f"recall-log over a {size.big:,}-event session (:match {match!r} :before {before} "
            f":limit 20 → {len(lines)} lines): {ms:.2f} ms"
        )
    ms = timed(lambda: recall.recall_log(store, sid, limit=20))
    print(f"recall-log over a {size.big:,}-event session (last 20): {ms:.2f} ms")


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--small", action="store_true", help="10,000 events: a quick smoke run")
    size = SMALL if args.parse_args(argv).small else FULL
    home = cached(size)
    words, _ = vocabulary(random.Random(SEED))
    store = open_store(home, "bench")
    try:
        ratios = bench_search(store, home / "texts.txt", words)
        worst = max(ratios)
        print(
            f"recall-search worst ratio {worst:.3f} over {len(ratios)} queries "
            f"({'met' if worst < 1 else 'MISSED'}: goal < 1)"
        )
        bench_log(store, size, words)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
