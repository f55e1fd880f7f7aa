"""Run every benchmark of bench/README.md and print one table: bar, measured, goal, result.

Each ``bench/*.py`` (not ``_*.py``, not this file) runs in its own process
with ``--json`` when it takes it (one JSON row per bar on stdout, see
``_common.Report``); a benchmark without ``--json`` is read from its text
lines. Sizes are reduced where a benchmark offers a knob for it (fewer
repetitions and seeds; recall's 10,000-event ``--small`` store unless the
1,000,000-event one is already cached), so the whole run takes minutes on
two cores; the bars' own sizes (2,000 messages, 20,000 lines) are kept.
``BENCH_FULL=1`` (or ``--full``) runs every benchmark at its defaults.
A result is PASS or FAIL, or UNRESOLVED when the measured figure's run-to-run
spread (its 95% bootstrap interval over the repetitions of both sides) is
wider than its distance to the goal: the method cannot tell, on this machine,
now. Under each bar, its two sides' medians with their p10–p90 spread. A row
whose result begins NOT A BAR is a figure shown beside the bars and not counted
among them (it says why, and what it would be against its goal). A benchmark
that crashes, times out or reports nothing is an ERROR row; this script always
exits 0.

    python bench/run_all.py [--full] [--only NAME[,NAME]] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ORDER = [
    "first_token",
    "fresh_host",
    "cache_retention",
    "context_io",
    "open_buffer",
    "responsive",
    "host_turns",
    "flat_costs",
    "fill",
    "notes",
    "recall",
]
# Reduced runs: flag → value, passed only when the benchmark's --help lists the flag.
# Never below what a bar itself names: first token is a median of ≥ 30, the
# many-takes home has 50 takes, the sessions keep 200 / 1,000 / 2,000 messages.
# The repetitions are as many as a ratio of a few ms needs to be resolved on a
# shared 2-core machine (its bootstrap spread within the bar's margin): fewer left
# rows UNRESOLVED that more repetitions settle.
REDUCED: dict[str, dict[str, str | None]] = {
    "first_token": {"--reps": "40", "--warmup": "1"},
    "fresh_host": {"--reps": "5"},
    "cache_retention": {"--seeds": "2"},
    "context_io": {"--reps": "25", "--warmup": "1"},
    "open_buffer": {"--reps": "15"},
    "responsive": {"--reps": "4"},
    "host_turns": {},  # 300 turns, the bar's own size; 30 alternated turns a side
    "flat_costs": {"--reps": "25"},
    "fill": {"--reps": "7", "--warmup": "1"},
    "notes": {"--reps": "5"},
    "recall": {"--small": None},
}
RECALL_FULL = BENCH / ".cache" / "recall-1000000" / "built.json"
LOWER_BOUNDS = ("retention",)  # bars whose goal is a minimum; the others are maxima


@dataclass
class Row:
    bench: str
    bar: str
    measured: str
    goal: str
    result: str  # PASS, FAIL, UNRESOLVED (…) or ERROR …
    figures: str = ""  # each side's median [p10–p90], when the bench gives them


def scripts(only: set[str] | None) -> list[Path]:
    found = {p.stem: p for p in BENCH.glob("[!_]*.py") if p.stem != Path(__file__).stem}
    names = [n for n in ORDER if n in found] + sorted(n for n in found if n not in ORDER)
    return [found[n] for n in names if only is None or n in only]


def options(script: Path, full: bool) -> tuple[list[str], bool, str]:
    """The arguments to run ``script`` with, whether it speaks --json, and a size note."""
    try:
        helped = subprocess.run(
            [sys.executable, str(script), "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stdout
    except subprocess.TimeoutExpired:
        helped = ""
    supports = set(re.findall(r"(--[a-z][a-z0-9-]*)", helped))
    args, note = [], ""
    if not full:
        for flag, value in REDUCED.get(script.stem, {}).items():
            if flag not in supports:
                continue
            if script.stem == "recall" and flag == "--small" and _recall_cached():
                continue  # the full store is already built: querying it is quick
            args += [flag] if value is None else [flag, value]
        note = " ".join(args)
    speaks_json = "--json" in supports
    return args + (["--json"] if speaks_json else []), speaks_json, note


def _recall_cached() -> bool:
    try:
        return json.loads(RECALL_FULL.read_text()).get("events") == 1_000_000
    except (OSError, ValueError):
        return False


def run(script: Path, full: bool, timeout: float) -> list[Row]:
    args, speaks_json, note = options(script, full)
    name = script.stem + (f" ({note})" if note else "")
    started = time.perf_counter()
    print(f"== bench/{script.name} {' '.join(args)}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(
            [sys.executable, str(script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=BENCH.parent,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [Row(name, script.stem, "-", "-", f"ERROR timed out after {timeout:g} s")]
    except OSError as exc:
        return [Row(name, script.stem, "-", "-", f"ERROR {exc}")]
    took = time.perf_counter() - started
    print(f"   {took:.0f} s, exit {done.returncode}", file=sys.stderr, flush=True)
    rows = (json_rows if speaks_json else text_rows)(name, done.stdout)
    if done.returncode != 0:
        rows.append(
            Row(
                name,
                script.stem,
                "-",
                "-",
                f"ERROR exit {done.returncode}: {last_line(done.stderr)}",
            )
        )
    elif not rows:
        rows.append(
            Row(
                name,
                script.stem,
                "-",
                "-",
                f"ERROR no result: {last_line(done.stderr or done.stdout)}",
            )
        )
    return rows


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:100] if lines else "no output"


def json_rows(name: str, out: str) -> list[Row]:
    rows = []
    for line in out.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a note on stdout
        if isinstance(row, dict) and "bar" in row:
            rows.append(from_json(name, row))
    return rows


def from_json(name: str, row: dict[str, Any]) -> Row:
    bar, unit = str(row["bar"]), str(row.get("unit") or "")
    measured, goal = row.get("measured"), row.get("goal")
    if row.get("error") or measured is None:
        result = "ERROR " + str(row.get("error") or "nothing measured")[:80]
    else:
        result = str(row.get("result") or ("PASS" if row.get("pass") else "FAIL"))
    figures = str(row.get("figures") or "")
    return Row(name, bar, shown(measured, unit), goal_text(bar, goal, unit), result, figures)


def shown(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        return f"{value:.3g} {unit}".strip() if abs(value) < 1000 else f"{value:,.0f} {unit}"
    return str(value)


def goal_text(bar: str, goal: Any, unit: str) -> str:
    if goal is None:
        return "-"
    if isinstance(goal, (int, float)):
        sign = "≥" if any(word in bar for word in LOWER_BOUNDS) else "≤"
        return f"{sign} {goal:g} {unit}".strip()
    return str(goal)


# Text lines: _common.Report's default line, and recall.py's summary line.
_REPORT_LINE = re.compile(
    r"^(?P<bar>.+?): measured (?P<measured>.+?), goal (?P<goal>.+?) → "
    r"(?P<verdict>PASS|FAIL)(?: \((?P<figures>.*)\))?$"
)
_RECALL_LINE = re.compile(
    r"^(?P<bar>recall-search) worst ratio (?P<measured>[\d.]+) over "
    r"(?P<n>\d+) queries \((?P<verdict>met|MISSED): goal (?P<goal>[^)]+)\)"
)


def text_rows(name: str, out: str) -> list[Row]:
    rows = []
    for line in out.splitlines():
        line = line.strip()
        m = _REPORT_LINE.match(line)
        if m:
            rows.append(
                Row(name, m["bar"], m["measured"], m["goal"], m["verdict"], m["figures"] or "")
            )
            continue
        m = _RECALL_LINE.match(line)
        if m:
            rows.append(
                Row(
                    name,
                    f"recall-search vs grep -F (worst of {m['n']} queries)",
                    f"{float(m['measured']):.3g} ×",
                    m["goal"] + " ×",
                    "PASS" if m["verdict"] == "met" else "FAIL",
                )
            )
    return rows


def table(rows: list[Row]) -> str:
    """The bars, one line each; below each, indented, its two sides' figures."""
    head = Row("benchmark", "bar", "measured", "goal", "result")
    cols = ("bar", "measured", "goal", "result")
    width = {c: max(len(getattr(r, c)) for r in [head, *rows]) for c in cols}
    lines = []
    for i, r in enumerate([head, *rows]):
        lines.append("  ".join(getattr(r, c).ljust(width[c]) for c in cols) + "  " + r.bench)
        if i == 0:
            lines.append("  ".join("-" * width[c] for c in cols) + "  " + "-" * 9)
        elif r.figures:
            lines.append("    " + r.figures)
    bars = [r for r in rows if not r.result.startswith("NOT A BAR")]
    others = len(rows) - len(bars)
    passed = sum(r.result == "PASS" for r in bars)
    failed = sum(r.result == "FAIL" for r in bars)
    unresolved = sum(r.result.startswith("UNRESOLVED") for r in bars)
    errors = sum(r.result.startswith("ERROR") for r in bars)
    lines.append(
        f"{len(bars)} bars: {passed} pass, {failed} fail, {unresolved} unresolved, {errors} error"
        f"; {others} {'row' if others == 1 else 'rows'} shown that {'is' if others == 1 else 'are'} "
        "not a bar"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--full",
        action="store_true",
        help="every benchmark at its default sizes (also BENCH_FULL=1)",
    )
    parser.add_argument("--only", help="comma-separated benchmark names, e.g. fill,recall")
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(os.environ.get("BENCH_TIMEOUT", "900")),
        help="seconds per benchmark before it counts as an ERROR (900)",
    )
    args = parser.parse_args(argv)
    full = args.full or os.environ.get("BENCH_FULL", "") not in ("", "0")
    only = set(args.only.split(",")) if args.only else None
    rows: list[Row] = []
    started = time.perf_counter()
    for script in scripts(only):
        try:
            rows += run(script, full, args.timeout)
        except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the rest
            rows.append(Row(script.stem, script.stem, "-", "-", f"ERROR {exc}"))
    print(
        f"\nThe bars of bench/README.md ({'full' if full else 'reduced'} run, "
        f"{time.perf_counter() - started:.0f} s)\n",
        flush=True,
    )
    print(table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
