"""SPEC §11: export and take of a 2,000-message, ~200k-token context.

Goal: each ≤ 3× a ``json`` round-trip of the same messages.

The session is built through the store APIs (``App``, ``turns.begin`` /
``finish``, ``store.append`` of asks, replies, calls, tool results and the
``request`` events the agent logs), with realistic texts, to exactly 2,000
messages (tokens counted by the loopback's tiktoken counter). Then, in
alternation after a warm-up, each repetition measures:

* json round-trip: ``json.loads(json.dumps(rows))`` of the context's
  messages as a list of ``{id, role, text}`` (the baseline);
* export: ``takes.export(app.workspace, sid)``, all of it — a changed file recorded
  first, the context read (warm, as in a host), nonce, render, the ``export``
  event with its blob, context.txt written (0600, fsync'd);
* take: after an untimed export, context.txt is edited off the clock (3
  blocks deleted, 2 bodies rewritten, one ``[[note]]`` added). The bar (SPEC:
  "take (parse + diff + validate)") times what ``takes.take`` does with the
  text: ``edits.read_file_edit`` (both texts split into blocks, diffed and
  checked against every rule) + ``edits.apply`` (the new order), on the saved
  file, its export's text and the warm context state. Then the whole
  ``takes.take(app.workspace, sid, turn)`` runs on the same file and is timed too, and
  printed beside it: it also records the file as a pending edit (its 1.2 MB as
  a blob), reads both texts back from the blob table, logs the receipt event
  with its snapshot and writes context.receipt.txt (fsync'd): store I/O, not
  parse + diff + validate.

Medians of the repetitions; the ratio is the median of the measured path over
the median of the json round-trip.

    python bench/context_io.py [--json] [--reps 21] [--messages 2000] [--profile [ROWS]]
"""

from __future__ import annotations

import cProfile
import gc
import io
import json
import pstats
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    FILES,
    WORDS,
    Report,
    arg_parser,
    log_message,
    median,  # noqa: E402
    numbered_lines,
    prose,
    spread,
)
from nodecode import turns as turn_tree  # noqa: E402
from nodecode.app import App  # noqa: E402
from nodecode.context import edits  # noqa: E402
from nodecode.context import model as context_model  # noqa: E402
from nodecode.context import take as takes  # noqa: E402
from nodecode.context.model import Message  # noqa: E402
from nodecode.loopback.tokens import count_text  # noqa: E402

GOAL = 3.0
STORE = "default"


def _prose(rng: random.Random, chars: int) -> str:
    text = prose(rng, chars)
    if rng.random() < 0.3:  # replies often hold a short list or code span
        text += "\n\n" + "\n".join(
            f"- `{rng.choice(WORDS)}_{rng.choice(WORDS)}()` "
            f"{_prose(rng, 40) if chars > 200 else 'ok'}"
            for _ in range(rng.randint(2, 4))
        )
    return text


def _code(rng: random.Random) -> str:
    f = rng.choice(FILES)
    return rng.choice(
        [
            f'(read-file "{f}" :from {rng.randint(1, 400)} :to {rng.randint(401, 800)})',
            f'(grep "{rng.choice(WORDS)}_{rng.choice(WORDS)}" :path "src")',
            f'(edit-file "{f}" "return {rng.choice(WORDS)}" "return {rng.choice(WORDS)}")',
            '(shell "python -m pytest -q tests/test_parser.py")',
        ]
    )


def _output(rng: random.Random) -> str:
    first = rng.randint(1, 300)
    return numbered_lines(rng, first, rng.randint(300, 1600))


def _turn(rng: random.Random) -> list[tuple]:
    plan: list[tuple] = [("user", _prose(rng, rng.randint(150, 700)))]
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        plan.append(("request",))
        if rng.random() < 0.6:
            plan.append(("assistant", _prose(rng, rng.randint(80, 500))))
        calls = rng.choice([1, 1, 2])
        plan += [("call", _code(rng)) for _ in range(calls)]
        plan += [("tool", _output(rng)) for _ in range(calls)]
    plan += [("request",), ("assistant", _prose(rng, rng.randint(300, 1800)))]
    return plan


def build(root: Path, n: int) -> tuple[App, str]:
    """A home whose one session holds exactly ``n`` messages, built through the store APIs."""
    home = root / "home"
    home.mkdir(parents=True)
    app = App.open(home=home, store=STORE, cwd=root, environ={})
    store = app.store
    sid = app.new_session(title=f"context io {n}")
    rng = random.Random(n)
    count, pending = 0, []
    sent: list[list] = []
    while count < n:
        number = turn_tree.begin(store, sid, store.last_seq(sid) + 1).number
        plan = _turn(rng)
        for item in plan:
            if item[0] == "request":
                store.append(
                    sid,
                    "request",
                    turn=number,
                    payload={
                        "provider": "loopback",
                        "model": "loopback-model",
                        "sent": sent[-400:],
                        "breakpoints": [sent[-1][0]] if sent else [],
                        "retries": 0,
                        "usage": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0},
                        "stop_reason": "tool_use",
                    },
                )
                continue
            if count == n or (count == n - 1 and item[0] == "call"):
                break
            event = log_message(store, sid, number, *item, pending)
            sent.append([event.seq, context_model.message_of(event).digest])
            count += 1
        turn_tree.finish(store, sid, number, store.last_seq(sid), "done")
    return app, sid


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
            lines[head + 1 : end] = [_prose(rng, 200), "(rewritten in the file)"]
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


def run(report: Report, n: int, reps: int, warmup: int, profile: int) -> None:
    with tempfile.TemporaryDirectory(prefix="nodecode-context-io-") as tmp:
        t = time.perf_counter()
        app, sid = build(Path(tmp), n)
        try:
            store = app.store
            messages = context_model.build(store, sid)
            tokens = sum(count_text(m.text) for m in messages)
            chars = sum(len(m.text) for m in messages)
            report.note(
                f"  {len(messages)} messages, {tokens} tokens (tiktoken), "
                f"{chars / 1e6:.2f} M characters, built in {time.perf_counter() - t:.1f} s"
            )
            turn = takes.head_turn(store, sid)
            rng = random.Random(7)
            path = takes.context_file(app.workspace, sid)

            def rows() -> list[dict]:
                return [
                    {"id": m.id, "role": m.role, "text": m.text}
                    for m in context_model.build(store, sid)
                ]

            def json_rt(data: list[dict]) -> float:
                return timed(lambda: json.loads(json.dumps(data)))

            def export() -> float:
                return timed(lambda: takes.export(app.workspace, sid))

            def take_once(profiler: cProfile.Profile | None = None) -> tuple[float, float, bool]:
                """(full take ms, read_file_edit + apply ms, taken) for one fresh file edit."""
                takes.export(app.workspace, sid)  # off the clock: the edit's export, state warm
                exp = takes.latest_export(store, sid)
                export_text = path.read_text(encoding="utf-8")
                edited = edit_file(export_text, rng)
                st = context_model.state(store, sid)
                counter = iter(range(-1, -100, -1))

                got: list[edits.Edit] = []

                def pure() -> None:
                    edit = edits.read_file_edit(edited, export_text, exp.payload["nonce"], st)
                    edits.apply(
                        list(st.messages),
                        edit,
                        st,
                        lambda text: Message(next(counter), "note", text),
                    )
                    got.append(edit)

                pure_ms = timed(pure)
                edit = got[0]
                shape = (len(edit.deleted), len(edit.rewrites), len(edit.notes), edit.errors)
                if shape != (3, 2, 1, []):
                    raise RuntimeError(
                        f"the file edit read as {shape}, not 3 deletes, 2 rewrites and 1 note"
                    )
                path.write_text(edited, encoding="utf-8")
                result: list[takes.TakeReport] = []
                if profiler is not None:
                    profiler.enable()
                full_ms = timed(lambda: result.append(takes.take(app.workspace, sid, turn)))
                if profiler is not None:
                    profiler.disable()
                return full_ms, pure_ms, result[0].taken

            for _ in range(warmup):
                json_rt(rows())
                export()
                take_once()
            base_e, ours_e, base_t, ours_t, pure_t = [], [], [], [], []
            for i in range(reps):
                data = rows()
                if i % 2 == 0:
                    base_e.append(json_rt(data))
                    ours_e.append(export())
                else:
                    ours_e.append(export())
                    base_e.append(json_rt(data))
                data = rows()  # the take shrinks the context: compare like with like
                full, pure, taken = take_once()
                if not taken:
                    raise RuntimeError(
                        f"the edit was not taken: {takes.receipt_file(app.workspace, sid)}"
                    )
                ours_t.append(full)
                pure_t.append(pure)
                base_t.append(json_rt(data))
            for name, ours, base, what in (
                ("export", ours_e, base_e, "takes.export"),
                (
                    "take",
                    pure_t,
                    base_t,
                    "parse + diff + validate + apply: edits.read_file_edit + edits.apply",
                ),
            ):
                mine, ref = median(ours), median(base)
                ratio = mine / ref
                ok = ratio <= GOAL
                report.row(
                    f"context {name}, {n} messages",
                    round(ratio, 2),
                    GOAL,
                    ok,
                    unit="×",
                    line=(
                        f"{name}: {mine:.1f} ms vs json round-trip {ref:.1f} ms → "
                        f"{ratio:.2f}× (goal ≤ {GOAL:g}×) {'PASS' if ok else 'FAIL'}"
                        f" [{what}]"
                    ),
                    ms=round(mine, 2),
                    json_ms=round(ref, 2),
                    messages=n,
                    reps=reps,
                    measured_through=what,
                )
            report.note(
                f"  whole takes.take (+ the file's blob, receipt event and snapshot, "
                f"receipt file): {median(ours_t):.1f} ms → "
                f"{median(ours_t) / median(base_t):.2f}× the json round-trip"
            )
            report.note(f"  export runs (ms): {spread(ours_e)}")
            report.note(f"  take runs (ms):   {spread(pure_t)}")
            report.note(f"  takes.take (ms):  {spread(ours_t)}")
            report.note(f"  json runs (ms):   {spread(base_e)}")
            if profile:
                for name, fn in (
                    (
                        "export",
                        lambda p: (p.enable(), takes.export(app.workspace, sid), p.disable()),
                    ),
                    ("take", lambda p: take_once(p)),
                ):
                    profiler = cProfile.Profile()
                    for _ in range(5):
                        fn(profiler)
                    out = io.StringIO()
                    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
                    report.note(f"  cProfile of 5 × {name}:\n{out.getvalue()}")
        finally:
            app.close()


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=21, help="measurements per path (21)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs (2)")
    parser.add_argument("--messages", type=int, default=2000, help="context size (2000)")
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
    try:
        run(report, args.messages, args.reps, args.warmup, args.profile)
    except Exception as exc:  # noqa: BLE001 — a benchmark reports; it never fails the build
        traceback.print_exc(file=sys.stderr)
        for name in ("export", "take"):
            report.row(
                f"context {name}, {args.messages} messages",
                None,
                GOAL,
                False,
                unit="×",
                error=str(exc),
                line=f"{name}: ERROR {exc} → FAIL",
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
