"""bench/README.md: the fill after appending one message to a 2,000-message context,
as a ratio to a full recount. Goal: ≤ 5%.

The session is built once through the store APIs (bench/_template.py: asks,
replies, calls, results and request events, ~2,000 messages). Then,
alternating after a warm-up:

* after an append: one more message is logged, and the clock runs over what
  a request does to know its fill — the context read (``state``), each
  message's tokens looked up (only the new one counted), what arranging the
  request adds or drops, and the calibration;
* a full recount: the same with the per-message count cache emptied first, so
  every message is counted again with tiktoken.

Both paths run with the garbage collector paused (as ``timeit`` does).

    python bench/fill.py [--json] [--reps 15] [--messages 2000]
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, arg_parser, median, spread
from _template import build_template
from nodecode import budget as budgets
from nodecode.app import App
from nodecode.context import derived
from nodecode.context.derived import state
from nodecode.log import turns as turn_tree

GOAL = 0.05
REPLY = (
    "Checked: the lexer keeps the trailing comma token and the parser now skips it "
    "before a closing bracket; the new test covers lists and objects."
)


def measure(report: Report, root: Path, n: int, reps: int, warmup: int) -> None:
    home, sid, messages, _ = build_template(root, n, "http://127.0.0.1:9")
    app = App.open(home=home, store="default", cwd=root, environ={})
    try:
        store = app.store
        turn = turn_tree.path(store, sid)[-1].number
        meter = budgets.Meter(app.config, None, derived.read(app.store, sid).views)

        def fill(cached: bool = True) -> tuple[float, int]:
            gc.collect()
            gc.disable()  # as timeit does: a collection is not the code's own cost
            try:
                start = time.perf_counter()
                messages = state(store, sid).messages
                value = round(meter.total(messages, cached) * meter.ratio())
                return (time.perf_counter() - start) * 1000, value
            finally:
                gc.enable()

        def append() -> None:
            store.append(sid, "assistant", role="assistant", turn=turn, text=REPLY)

        def recount() -> tuple[float, int]:
            return fill(cached=False)

        recount()
        appended: list[float] = []
        full: list[float] = []
        for i in range(warmup + reps):
            append()
            quick, after = fill()
            slow, again = recount()
            if after != again:
                raise AssertionError(f"the cached fill {after} differs from a recount {again}")
            if i >= warmup:
                appended.append(quick)
                full.append(slow)
        tokens = meter.count(state(store, sid).messages).total
    finally:
        app.close()
    mine, base = median(appended), median(full)
    ratio = mine / base
    ok = ratio <= GOAL
    report.row(
        f"fill after one append, {n} messages",
        round(100 * ratio, 2),
        "≤ 5%",
        ok,
        unit="%",
        line=(
            f"fill after one append, {n} messages (~{tokens} tokens): {mine:.2f} ms, "
            f"full recount {base:.2f} ms → {100 * ratio:.1f}% (goal ≤ 5%) "
            f"{'PASS' if ok else 'FAIL'}"
        ),
        append_ms=round(mine, 3),
        recount_ms=round(base, 3),
        messages=messages,
        tokens=tokens,
        reps=reps,
    )
    report.note(f"  after an append (ms): {spread(appended, 2)}")
    report.note(f"  full recount (ms):    {spread(full)}")


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="measurements per path (15)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured runs (3)")
    parser.add_argument("--messages", type=int, default=2000, help="context size (2000)")
    args = parser.parse_args(argv)
    report = Report(args.json)
    with tempfile.TemporaryDirectory(prefix="nodecode-bench-") as tmp:
        try:
            measure(report, Path(tmp), args.messages, args.reps, args.warmup)
        except Exception as exc:  # noqa: BLE001 — a benchmark reports; it never fails the build
            traceback.print_exc(file=sys.stderr)
            report.row(
                f"fill after one append, {args.messages} messages",
                None,
                "≤ 5%",
                False,
                error=str(exc),
                line=f"fill after one append: ERROR {exc} → FAIL",
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
