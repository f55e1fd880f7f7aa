"""bench/README.md: the whole take and the whole export of a 2,000-message, ~200k-token
context, each against a ``json`` round-trip of the same messages.

Goal: each ≤ 3× ``json.loads(json.dumps(rows))`` of the context's messages as
a list of ``{id, role, text}``, measured in the same run, alternated with it.

The session is the one bench/_grow.py grows through the real agent loop
(asks, tool rounds of real cells, replies, and the request events the agent
logs) to exactly 2,000 messages; a copy of its home is opened once, as a host
holds it. Each repetition measures:

* whole export: ``takes.export(app.workspace, sid)``, all of it — a changed
  file recorded first, the context read, nonce, render, the ``export`` event
  with its blob, context.txt written (0600, fsync'd);
* whole take: after an export off the clock, context.txt is edited as a
  person would (3 blocks deleted, 2 bodies rewritten, one ``[[note]]`` added)
  and saved; then the clock runs over ``takes.take`` called as the agent calls
  it at a request (its budget and token count, for the receipt): the file
  read and recorded as a pending edit, both texts diffed and validated, the
  new order stored with its snapshot, the receipt event and
  context.receipt.txt. ``edits.read_file_edit`` + ``edits.apply`` alone (the
  bar before issue 12) is printed beside it as a note.

Each take shrinks the context by 3 messages and adds a note; the json anchor
is always the context as it stands before the take it is paired with.
Medians of the repetitions, with each side's spread (p10–p90); UNRESOLVED
when the ratio's run-to-run spread reaches across the goal.

    python bench/context_io.py [--json] [--reps 21] [--warmup 2] [--profile [ROWS]]
"""

from __future__ import annotations

import cProfile
import gc
import io
import json
import pstats
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, arg_parser, band, prose, ratio_verdict  # noqa: E402
from _grow import Grown, grown  # noqa: E402
from nodecode import budget as budgets  # noqa: E402
from nodecode.app import App  # noqa: E402
from nodecode.context import (
    derived,
    edits,  # noqa: E402
)
from nodecode.context import take as takes  # noqa: E402
from nodecode.context.model import Message  # noqa: E402
from nodecode.loopback.tokens import count_text  # noqa: E402

GOAL = 3.0
N = 2000
DEAD = "http://127.0.0.1:9"  # nothing here sends a request


# ------------------------------------------------------------------ the edit


def edit_file(text: str, rng: random.Random) -> str:
    """context.txt with 3 blocks deleted, 2 bodies rewritten and a note added."""
    nonce = text.split("\n", 1)[0].rstrip("]").split()[-1]
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith(f"[[m:{nonce} ")]

    def block(k: int) -> tuple[int, int, str]:
        end = heads[k + 1] if k + 1 < len(heads) else len(lines) - 1
        return heads[k], end, lines[heads[k]].split()[2].rstrip("]")

    plain = [k for k in range(len(heads) - 1) if block(k)[2] in ("user", "assistant")]
    picks = rng.sample(plain[: len(plain) * 9 // 10], 6)
    deleted, rewritten = picks[:3], picks[3:5]  # and picks[5] gets the note
    for k in sorted(picks, reverse=True):  # bottom-up: earlier line numbers stay valid
        head, end, _ = block(k)
        if k in deleted:
            lines[head:end] = []
        elif k in rewritten:
            lines[head + 1 : end] = [prose(rng, 200), "(rewritten in the file)"]
        else:
            lines[end:end] = [
                "[[note]]",
                "Remember: the parser change is merged; only the tests remain.",
            ]
    return "\n".join(lines)


# ------------------------------------------------------------------ timing


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


class Bench:
    def __init__(self, app: App, sid: str) -> None:
        self.app, self.sid, self.store = app, sid, app.store
        self.path = takes.context_file(app.workspace, sid)
        self.rng = random.Random(7)

    def rows(self) -> list[dict]:
        """The context's messages as plain JSON values: the anchor's input."""
        return [
            {"id": m.id, "role": m.role, "text": m.text}
            for m in derived.build(self.store, self.sid)
        ]

    def json_rt(self, data: list[dict]) -> float:
        return timed(lambda: json.loads(json.dumps(data)))

    def export(self) -> float:
        return timed(lambda: takes.export(self.app.workspace, self.sid))

    def agent_take(self) -> Callable[[], takes.TakeReport]:
        """``takes.take`` as ``Agent.request`` calls it at the start of a request
        (the budget and meter it is given are made before, off the clock)."""
        ws, config = self.app.workspace, self.app.config
        plan = budgets.of(ws, config)
        meter = budgets.Meter(config, config.wire(), derived.read(self.store, self.sid).views)
        turn = takes.head_turn(self.store, self.sid)
        return lambda: takes.take(ws, self.sid, turn, budget=plan.tokens, count=meter.fill)

    def take(self, profiler: cProfile.Profile | None = None) -> tuple[float, float]:
        """(whole take ms, read_file_edit + apply ms) of one fresh file edit."""
        takes.export(self.app.workspace, self.sid)  # off the clock: the export edited
        exp = takes.latest_export(self.store, self.sid)
        export_text = self.path.read_text(encoding="utf-8")
        edited = edit_file(export_text, self.rng)
        st = derived.state(self.store, self.sid)
        counter = iter(range(-1, -100, -1))
        got: list[edits.Edit] = []

        def pure() -> None:
            edit = edits.read_file_edit(edited, export_text, exp.payload["nonce"], st)
            edits.apply(
                list(st.messages), edit, st, lambda text: Message(next(counter), "note", text)
            )
            got.append(edit)

        pure_ms = timed(pure)
        edit = got[0]
        shape = (len(edit.deleted), len(edit.rewrites), len(edit.notes), edit.errors)
        if shape != (3, 2, 1, []):
            raise RuntimeError(f"the file edit read as {shape}, not 3 deletes, 2 rewrites, 1 note")
        self.path.write_text(edited, encoding="utf-8")
        result: list[takes.TakeReport] = []
        take = self.agent_take()
        if profiler is not None:
            profiler.enable()
        whole_ms = timed(lambda: result.append(take()))
        if profiler is not None:
            profiler.disable()
        if not result[0].taken:
            raise RuntimeError(f"the edit was not taken: {result[0].receipts or result[0].notices}")
        return whole_ms, pure_ms


def run(report: Report, root: Path, reps: int, warmup: int, profile: int) -> None:
    g: Grown = grown(note=report.note)
    home = g.copy(N, root / "home", DEAD)
    app = g.open(home)
    try:
        bench = Bench(app, g.sid)
        messages = derived.build(app.store, g.sid)
        tokens = sum(count_text(m.text) for m in messages)
        chars = sum(len(m.text) for m in messages)
        report.note(
            f"  {len(messages)} messages, {tokens} tokens (tiktoken), "
            f"{chars / 1e6:.2f} M characters"
        )
        for _ in range(warmup):
            bench.json_rt(bench.rows())
            bench.export()
            bench.take()
        json_e, ours_e, json_t, ours_t, pure_t = [], [], [], [], []
        for i in range(reps):  # alternated, so drift hits both paths alike
            data = bench.rows()
            if i % 2 == 0:
                json_e.append(bench.json_rt(data))
                ours_e.append(bench.export())
            else:
                ours_e.append(bench.export())
                json_e.append(bench.json_rt(data))
            data = bench.rows()  # the take shrinks the context: compare like with like
            if i % 2 == 1:
                json_t.append(bench.json_rt(data))
            whole, pure = bench.take()
            ours_t.append(whole)
            pure_t.append(pure)
            if i % 2 == 0:
                json_t.append(bench.json_rt(data))
        for name, ours, base in (("take", ours_t, json_t), ("export", ours_e, json_e)):
            v = ratio_verdict(ours, base, GOAL, (f"takes.{name}", "json round-trip"))
            report.verdict(
                f"whole {name}, {N} messages, vs json round-trip", v, GOAL, unit="×", reps=reps
            )
        report.note(
            f"  read_file_edit + apply alone: {band(pure_t)} ms → "
            f"{sorted(pure_t)[len(pure_t) // 2] / sorted(json_t)[len(json_t) // 2]:.2f}× json"
        )
        if profile:
            for name, fn in (
                ("export", lambda p: (p.enable(), takes.export(app.workspace, g.sid), p.disable())),
                ("take", lambda p: bench.take(p)),
            ):
                profiler = cProfile.Profile()
                for _ in range(5):
                    fn(profiler)
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
                report.note(f"  cProfile of 5 × {name}:\n{out.getvalue()}")
    finally:
        app.close()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=21, help="measurements per path (21)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs (2)")
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=15,
        default=0,
        metavar="ROWS",
        help="cProfile export and take (top 15 rows)",
    )
    args = parser.parse_args(argv)
    report = Report(args.json)
    with tempfile.TemporaryDirectory(prefix="nodecode-context-io-") as tmp:
        try:
            run(report, Path(tmp), args.reps, args.warmup, args.profile)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports; it never fails the build
            traceback.print_exc(file=sys.stderr)
            for name in ("take", "export"):
                report.error(f"whole {name}, {N} messages, vs json round-trip", GOAL, exc, unit="×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
