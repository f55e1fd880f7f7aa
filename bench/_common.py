"""What every benchmark shares: one result line per bar, or one JSON object per bar.

A benchmark reports and never fails the build: it exits 0 whatever it measured.
With ``--json`` each bar is one line ``{"bar", "measured", "goal", "pass", "unit"}``
on stdout (notes go to stderr), for the ``make bench`` table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any


def arg_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object per bar instead of text lines")
    return parser


def median(values: list[float]) -> float:
    return statistics.median(values)


class Report:
    def __init__(self, as_json: bool = False) -> None:
        self.as_json = as_json

    def row(self, bar: str, measured: float | None, goal: Any, passed: bool, *,
            unit: str = "ms", line: str | None = None, **extra: Any) -> None:
        """One bar: ``line`` (or ``bar: measured X, goal Y → PASS``) as text, or JSON."""
        if self.as_json:
            print(json.dumps({"bar": bar, "measured": measured, "goal": goal, "pass": passed,
                              "unit": unit, **extra}), flush=True)
            return
        verdict = "PASS" if passed else "FAIL"
        shown = "n/a" if measured is None else f"{measured:.3g} {unit}"
        print(line or f"{bar}: measured {shown}, goal {goal} → {verdict}", flush=True)

    def note(self, text: str) -> None:
        """Progress and details: stdout as text, stderr with --json."""
        print(text, file=sys.stderr if self.as_json else sys.stdout, flush=True)
