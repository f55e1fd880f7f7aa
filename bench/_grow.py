"""A realistic session grown through the real agent loop, shared by the benches.

Turns as a person has them: an ask, 2–4 tool rounds (a sentence or none, then
one or two cells: ``read-file`` ranges, ``grep``, ``list-files`` and now and
then an ``edit-file``, each evaluated for real in a workspace of source
files), then a final reply in paragraphs. Every turn goes through
``Agent.ask`` against bench/_sse_server.py, so the store holds exactly what
today's code writes for such a session (its request events, results, file
changes), whatever format that is. The turns are planned so the session holds
exactly each of ``stops`` messages at a turn's end; there the App is closed
(the WAL checkpointed) and the store's bytes are recorded and the home copied.

Growing 2,000 messages takes a minute or two, so the result is cached under
bench/.cache/grown/, keyed by a digest of every file of the nodecode package
and of this file: any change to the code that writes the store grows it again.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import FILES, WORDS, ServerProcess, prose, write_config
from nodecode.agent.loop import Agent
from nodecode.app import App
from nodecode.context import derived

BENCH = Path(__file__).resolve().parent
PACKAGE = BENCH.parent / "python" / "nodecode"
CACHE = BENCH / ".cache" / "grown"
STORE = "default"
ENVIRON = {"ANTHROPIC_API_KEY": "sk-ant-bench-0000-not-a-real-key-1234567890"}
COUNTER = "src/counter.py"
SETTINGS: dict[str, Any] = {"auto_approve": ["write"]}
STOPS = [200, 1000, 2000]  # one grown session serves every bench


# ------------------------------------------------------------------ the plan


@dataclass
class Turn:
    ask: str
    rounds: list[dict[str, Any]] = field(default_factory=list)

    @property
    def messages(self) -> int:
        """What the turn logs: the ask, each round's text (if any), calls and results."""
        return 1 + sum(bool(r["text"]) + 2 * len(r["calls"]) for r in self.rounds)


def reply_text(rng: random.Random, lo: int, hi: int) -> str:
    """A reply as models write them: paragraphs, sometimes a list or a code span."""
    paras = [prose(rng, rng.randint(lo, hi) // 2) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.35:
        paras.append(
            "\n".join(
                f"- `{rng.choice(WORDS)}_{rng.choice(WORDS)}()` {prose(rng, 40)}"
                for _ in range(rng.randint(2, 5))
            )
        )
    return "\n\n".join(paras)


class Planner:
    """Cells that are valid against the workspace as it will be when they run."""

    def __init__(self, rng: random.Random, lines: dict[str, int]) -> None:
        self.rng, self.lines, self.value = rng, lines, 0

    def call(self) -> str:
        rng = self.rng
        pick = rng.random()
        f = rng.choice(FILES)
        if pick < 0.55:
            first = rng.randint(1, self.lines[f] - 55)
            return f'(read-file "{f}" :from {first} :to {first + rng.randint(10, 48)})'
        if pick < 0.75:
            return f'(grep "{rng.choice(WORDS)}_" :path "{f}")'
        if pick < 0.88:
            return f'(list-files "{f.rsplit("/", 1)[0] if "/" in f else "."}")'
        self.value += 1
        return f'(edit-file "{COUNTER}" "VALUE = {self.value - 1}" "VALUE = {self.value}")'

    def turn(self) -> Turn:
        rng = self.rng
        turn = Turn(reply_text(rng, 100, 500))
        for _ in range(rng.randint(2, 4)):
            text = reply_text(rng, 80, 400) if rng.random() < 0.4 else ""
            turn.rounds.append(
                {"text": text, "calls": [self.call() for _ in range(rng.choice([1, 1, 1, 2]))]}
            )
        turn.rounds.append({"text": reply_text(rng, 400, 1300), "calls": []})
        return turn


def fit(turn: Turn, room: int) -> Turn:
    """``turn`` cut to at most ``room`` messages, still ending on a final reply."""
    if turn.messages <= room:
        return turn
    cut = Turn(turn.ask)
    final = turn.rounds[-1]
    for r in turn.rounds[:-1]:
        if cut.messages + bool(r["text"]) + 2 * len(r["calls"]) + 1 > room:
            break
        cut.rounds.append(r)
    cut.rounds.append(final if cut.messages < room else {"text": "", "calls": []})
    return cut


def plan(stops: list[int], seed: int, lines: dict[str, int]) -> list[list[Turn]]:
    """The turns of each segment, so that the session holds exactly ``stops[i]``
    messages at the end of segment ``i``."""
    planner = Planner(random.Random(seed), lines)
    segments, count = [], 0
    for stop in stops:
        turns: list[Turn] = []
        while count < stop:
            turn = fit(planner.turn(), stop - count)
            turns.append(turn)
            count += turn.messages
        segments.append(turns)
    return segments


# ------------------------------------------------------------------ the workspace


def code_file(rng: random.Random, lines: int) -> str:
    out = []
    for i in range(lines):
        w = [rng.choice(WORDS) for _ in range(rng.randint(2, 7))]
        kind = rng.choice(["def", "return", "if", "#", "x =", "call"])
        if kind == "def":
            out.append(f"def {w[0]}_{w[1]}({', '.join(w[2:]) or 'value'}):")
        elif kind == "call":
            out.append(f"    result = {w[0]}_{w[-1]}({', '.join(w[1:-1])})")
        else:
            out.append(f"    {kind} {' '.join(w)}")
        if i % 17 == 16:
            out.append("")
    return "\n".join(out) + "\n"


def make_workspace(ws: Path, seed: int) -> dict[str, int]:
    """The source tree the cells read and edit; returns each file's line count."""
    rng = random.Random(seed)
    lines = {}
    for f in FILES:
        text = code_file(rng, rng.randint(180, 420))
        (ws / f).parent.mkdir(parents=True, exist_ok=True)
        (ws / f).write_text(text, encoding="utf-8")
        lines[f] = text.count("\n")
    (ws / COUNTER).write_text(code_file(rng, 120) + "VALUE = 0\n", encoding="utf-8")
    return lines


# ------------------------------------------------------------------ growing


def store_bytes(home: Path) -> int:
    """What the store holds on disk: the database and any WAL or shared memory."""
    db = home / "store" / f"{STORE}.db"
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists())


@dataclass
class Grown:
    """A grown session: ``homes[n]`` is the home holding exactly n messages (its
    config pointing at no live server), ``bytes[n]`` its store's bytes."""

    root: Path
    sid: str
    workspace: Path
    homes: dict[int, Path]
    bytes: dict[int, int]
    seconds: float
    requests: int

    def copy(self, n: int, dest: Path, url: str) -> Path:
        """A copy of the n-message home at ``dest``, its provider at ``url``."""
        shutil.copytree(self.homes[n], dest)
        write_config(dest, url, **SETTINGS)
        return dest

    def open(self, home: Path) -> App:
        return App.open(home=home, store=STORE, cwd=self.workspace, environ=ENVIRON)


def _key(stops: list[int], seed: int) -> str:
    h = hashlib.sha256(json.dumps([stops, seed]).encode())
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.json"), *BENCH.glob("_*.py")]):
        if "__pycache__" in path.parts:
            continue
        h.update(str(path.relative_to(BENCH.parent)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def grown(stops: list[int] = STOPS, seed: int = 2000, note: Any = print) -> Grown:
    """The session grown to each of ``stops`` messages, from the cache when the
    code that writes it has not changed."""
    key = _key(stops, seed)
    root = CACHE / key
    built = root / "built.json"
    if built.exists():
        meta = json.loads(built.read_text())
        note(f"  grown session: cached ({root})")
        return _from_meta(root, meta)
    if CACHE.exists():
        shutil.rmtree(CACHE)  # one grown session at a time: older code's is stale
    root.mkdir(parents=True)
    meta = _grow(root, stops, seed, note)
    built.write_text(json.dumps(meta))
    return _from_meta(root, meta)


def _from_meta(root: Path, meta: dict[str, Any]) -> Grown:
    return Grown(
        root,
        meta["sid"],
        root / "ws",
        {int(n): root / f"home-{n}" for n in meta["bytes"] if int(n) > 0},
        {int(n): b for n, b in meta["bytes"].items()},
        meta["seconds"],
        meta["requests"],
    )


def _grow(root: Path, stops: list[int], seed: int, note: Any) -> dict[str, Any]:
    ws = root / "ws"
    ws.mkdir()
    segments = plan(stops, seed, make_workspace(ws, seed))
    rounds = [r for turns in segments for t in turns for r in t.rounds]
    home = root / "home"
    started = time.perf_counter()
    with ServerProcess(root / "server", rounds) as server:
        write_config(home, server.url, **SETTINGS)
        app = App.open(home=home, store=STORE, cwd=ws, environ=ENVIRON)
        sid = app.new_session(title="grown")
        app.close()
        sizes = {0: store_bytes(home)}
        for stop, turns in zip(stops, segments, strict=True):
            app = App.open(home=home, store=STORE, cwd=ws, environ=ENVIRON)
            try:
                for turn in turns:
                    result = Agent(app, sid).ask(turn.ask)
                    if result.status != "done":
                        raise RuntimeError(f"a grown turn ended {result.status}: {result}")
                got = len(derived.build(app.store, sid))
            finally:
                app.close()  # the WAL checkpointed into the .db
            if got != stop:
                raise RuntimeError(f"the grown session holds {got} messages, not {stop}")
            sizes[stop] = store_bytes(home)
            shutil.copytree(home, root / f"home-{stop}")
            note(
                f"  grown to {stop} messages in {time.perf_counter() - started:.0f} s, "
                f"store {sizes[stop] / 1e6:.1f} MB"
            )
    shutil.rmtree(home)
    return {
        "sid": sid,
        "bytes": {str(n): b for n, b in sizes.items()},
        "seconds": round(time.perf_counter() - started, 1),
        "requests": len(rounds),
    }
