"""The take of many notes: 3,000 ``[[note]]`` blocks in one edit of context.txt,
against 300 (issue "Trust, third round" 14).

Goal: ≤ 15× — taking notes is linear in their number (it was cubic: 1,000 /
2,000 / 3,000 notes took 2.5 s / 13.7 s / 53 s).

The session is bench/_template.py's, 200 messages logged through the store
APIs (no request is sent). Each repetition copies its home (off the clock),
exports, writes N notes into context.txt — half under a tool result, half
under a reply, as a person annotating two blocks would — and times
``takes.take`` as the agent calls it at a request: the file read and
recorded, both texts diffed, every note logged as a message, the new order's
snapshot and the receipt. 300 and 3,000 alternate (ABBA) so that the
machine's load falls on both; medians with each side's spread (p10–p90).

    python bench/notes.py [--json] [--reps 9]
"""

from __future__ import annotations

import gc
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, arg_parser, ratio_verdict  # noqa: E402
from _template import ENVIRON, STORE, build_template  # noqa: E402
from nodecode import budget as budgets  # noqa: E402
from nodecode.app import App  # noqa: E402
from nodecode.context import derived  # noqa: E402
from nodecode.context import take as takes  # noqa: E402

GOAL = 15.0
FEW, MANY = 300, 3000
MESSAGES = 200
DEAD = "http://127.0.0.1:9"  # nothing here sends a request
BAR = f"take of {MANY:,} notes in one edit vs {FEW}"


def with_notes(text: str, n: int) -> str:
    """context.txt with ``n`` notes: half under the last tool result, half under
    the last reply."""
    nonce = text.split("\n", 1)[0].rstrip("]").split()[-1]
    lines = text.split("\n")
    heads = [i for i, line in enumerate(lines) if line.startswith(f"[[m:{nonce} ")]
    ends = {
        i: (heads[k + 1] if k + 1 < len(heads) else len(lines) - 1) for k, i in enumerate(heads)
    }

    def last(role: str) -> int:
        return max(i for i in heads if lines[i].endswith(f" {role}]]"))

    picks = sorted((last("tool"), last("assistant")), reverse=True)  # bottom-up
    for k, head in enumerate(picks):
        notes = []
        for j in range(n // 2 if k == 0 else n - n // 2):
            notes += ["[[note]]", f"Note {j}: the parser's change is merged; tests remain."]
        lines[ends[head] : ends[head]] = notes
    return "\n".join(lines)


def one_take(template: Path, root: Path, n: int, k: int) -> float:
    """Milliseconds of the take of ``n`` notes, on a fresh copy of the template."""
    home = root / f"run-{k}"
    shutil.copytree(template, home)
    app = App.open(home=home, store=STORE, cwd=root, environ=ENVIRON)
    try:
        sid = app.store.read("SELECT id FROM sessions")[0][0]
        ws, config = app.workspace, app.config
        path = takes.export(ws, sid)
        path.write_text(with_notes(path.read_text(encoding="utf-8"), n), encoding="utf-8")
        plan = budgets.of(ws, config)
        meter = budgets.Meter(config, config.wire(), derived.read(app.store, sid).views)
        turn = takes.head_turn(app.store, sid)
        gc.collect()
        t0 = time.perf_counter()
        report = takes.take(ws, sid, turn, budget=plan.tokens, count=meter.fill)
        ms = (time.perf_counter() - t0) * 1000
        if not report.taken or f"noted {n} (" not in report.receipts[0]:
            raise RuntimeError(f"the {n} notes were not taken: {report.receipts[:1]}")
        return ms
    finally:
        app.close()
        shutil.rmtree(home, ignore_errors=True)


def run(report: Report, root: Path, reps: int) -> None:
    template, _, messages, _ = build_template(root, MESSAGES, DEAD)
    report.note(f"  a {messages}-message session; notes {FEW} and {MANY}")
    one_take(template, root, FEW, -1)  # warm-up: imports, the tokenizer's ranks
    few, many = [], []
    for i in range(reps):
        order = (FEW, MANY) if i % 2 == 0 else (MANY, FEW)
        for n in order:
            (few if n == FEW else many).append(one_take(template, root, n, i))
    v = ratio_verdict(many, few, GOAL, (f"{MANY} notes", f"{FEW} notes"))
    report.verdict(BAR, v, GOAL, unit="×", reps=reps)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9, help="measurements per size (9)")
    args = parser.parse_args(argv)
    report = Report(args.json)
    with tempfile.TemporaryDirectory(prefix="nodecode-notes-") as tmp:
        try:
            run(report, Path(tmp), args.reps)
        except Exception as exc:  # noqa: BLE001 - a benchmark reports; it never fails the build
            traceback.print_exc(file=sys.stderr)
            report.error(BAR, GOAL, exc, unit="×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
