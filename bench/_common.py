"""What every benchmark shares: one result line per bar, or one JSON object per bar,
and the pieces that build a realistic session (texts, logged messages, a config).

A benchmark reports and never fails the build: it exits 0 whatever it measured.
With ``--json`` each bar is one line ``{"bar", "measured", "goal", "pass", "unit"}``
on stdout (notes go to stderr), for the ``make bench`` table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodecode.agent.loop import format_result
from nodecode.log.store import Event, Store

WORDS = (  # noqa: SIM905 - a run of words reads better than 48 quoted ones
    "the parser function returns value list error file test module config buffer "
    "context request token stream line column index read write call result path "
    "session turn message cache provider model event store seq handle check update "
    "should would because when then with without into from after before instead"
).split()
FILES = [
    "src/parser.py",
    "src/lexer.py",
    "src/config.py",
    "tests/test_parser.py",
    "src/store.py",
    "README.md",
    "src/cli.py",
    "src/render.py",
]


def arg_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per bar instead of text lines"
    )
    return parser


def median(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float], digits: int = 1) -> str:
    """Every run, sorted, for a note line."""
    return " ".join(f"{x:.{digits}f}" for x in sorted(values))


BOOTSTRAP = 2000  # resamples behind a row's run-to-run spread


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0–100), linearly interpolated between runs."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def band(values: list[float], digits: int = 1) -> str:
    """``median [p10–p90]`` of the runs: the figure and its run-to-run spread."""
    return (
        f"{median(values):.{digits}f} [{pct(values, 10):.{digits}f}–{pct(values, 90):.{digits}f}]"
    )


def width(values: list[float]) -> float:
    """The run-to-run spread: p90 − p10."""
    return pct(values, 90) - pct(values, 10)


@dataclass
class Verdict:
    """A bar's outcome: ``result`` is PASS, FAIL or ``UNRESOLVED (spread … > margin …)``."""

    measured: float
    result: str
    figures: str

    @property
    def passed(self) -> bool:
        return self.result == "PASS"


def _resolved(
    ours: list[float], anchor: list[float], distance: Callable[[float, float], float]
) -> str:
    """PASS or FAIL by ``distance(median(ours), median(anchor))`` (ms past the bar:
    ≤ 0 passes), or UNRESOLVED when the figure's run-to-run spread reaches across
    the bar. That spread is how far the distance moves when each side's
    repetitions are resampled (the far end of its 95% bootstrap interval), so it
    counts both sides' noise and how many repetitions there were."""
    point = distance(median(ours), median(anchor))
    rng = random.Random(20)
    boot = sorted(
        distance(median(rng.choices(ours, k=len(ours))), median(rng.choices(anchor, k=len(anchor))))
        for _ in range(BOOTSTRAP)
    )
    far = boot[int(0.975 * (BOOTSTRAP - 1))] if point <= 0 else boot[int(0.025 * (BOOTSTRAP - 1))]
    spread_ms, margin_ms = abs(far - point), abs(point)
    if spread_ms >= margin_ms:
        return f"UNRESOLVED (spread {spread_ms:.1f} ms > margin {margin_ms:.1f} ms)"
    return "PASS" if point <= 0 else "FAIL"


def ratio_verdict(
    ours: list[float], anchor: list[float], goal: float, names: tuple[str, str]
) -> Verdict:
    """Bar ``median(ours) / median(anchor) ≤ goal``. Its distance, in the anchor's
    ms, is how far the anchor's median is from making the ratio exactly the goal."""
    ratio = median(ours) / median(anchor)
    figures = f"{names[0]} {band(ours)} ms vs {names[1]} {band(anchor)} ms"
    result = _resolved(ours, anchor, lambda o, a: o / goal - a)
    return Verdict(round(ratio, 2), result, figures)


def difference_verdict(
    ours: list[float], anchor: list[float], goal: float, names: tuple[str, str]
) -> Verdict:
    """Bar ``median(ours) − median(anchor) ≤ goal`` ms."""
    over = median(ours) - median(anchor)
    figures = f"{names[0]} {band(ours)} ms vs {names[1]} {band(anchor)} ms"
    result = _resolved(ours, anchor, lambda o, a: o - a - goal)
    return Verdict(round(over, 2), result, figures)


class Report:
    def __init__(self, as_json: bool = False) -> None:
        self.as_json = as_json

    def row(
        self,
        bar: str,
        measured: float | None,
        goal: Any,
        passed: bool,
        *,
        unit: str = "ms",
        line: str | None = None,
        result: str | None = None,
        figures: str | None = None,
        **extra: Any,
    ) -> None:
        """One bar: ``line`` (or ``bar: measured X, goal Y → PASS``) as text, or JSON.
        ``result`` (PASS, FAIL, UNRESOLVED …) overrides ``passed``; ``figures`` are
        the two sides' medians and spreads."""
        verdict = result or ("PASS" if passed else "FAIL")
        if self.as_json:
            row = {"bar": bar, "measured": measured, "goal": goal, "pass": passed, "unit": unit}
            if result is not None:
                row["result"] = result
            if figures is not None:
                row["figures"] = figures
            print(json.dumps({**row, **extra}), flush=True)
            return
        shown = "n/a" if measured is None else f"{measured:.3g} {unit}"
        tail = f" ({figures})" if figures else ""
        print(line or f"{bar}: measured {shown}, goal {goal} → {verdict}{tail}", flush=True)

    def verdict(self, bar: str, v: Verdict, goal: float, *, unit: str, **extra: Any) -> None:
        """One bar from its ``Verdict``; the goal is a maximum in ``unit``."""
        self.row(
            bar,
            v.measured,
            goal,
            v.passed,
            unit=unit,
            result=v.result,
            figures=v.figures,
            line=f"{bar}: {v.measured:.3g} {unit} (goal ≤ {goal:g} {unit}) {v.result} [{v.figures}]",
            **extra,
        )

    def error(self, bar: str, goal: float | None, exc: BaseException, *, unit: str) -> None:
        """A bar whose measurement broke: an ERROR row naming why."""
        self.row(bar, None, goal, False, unit=unit, error=str(exc), line=f"{bar}: ERROR {exc}")

    def note(self, text: str) -> None:
        """Progress and details: stdout as text, stderr with --json."""
        print(text, file=sys.stderr if self.as_json else sys.stdout, flush=True)


class ServerProcess:
    """bench/_sse_server.py in its own process (never holding our GIL), its URL read
    from its first line; ``rounds`` is what it replies, cycling."""

    def __init__(
        self,
        root: Path,
        rounds: list[dict[str, Any]],
        save: Path | None = None,
        timings: Path | None = None,
    ):
        root.mkdir(parents=True, exist_ok=True)
        script = root / f"rounds-{id(self)}.jsonl"
        script.write_text("\n".join(json.dumps(r) for r in rounds) + "\n", encoding="utf-8")
        argv = [
            sys.executable,
            str(Path(__file__).with_name("_sse_server.py")),
            "--script",
            str(script),
        ]
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
            argv += ["--save", str(save)]
        if timings is not None:
            argv += ["--timings", str(timings)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the bench server did not start (printed {self.url!r})")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------ realistic sessions


def prose(rng: random.Random, chars: int) -> str:
    """Sentences of WORDS up to about ``chars`` characters."""
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))
        out.append(sentence[0].upper() + sentence[1:] + ".")
        size += len(out[-1]) + 1
    return " ".join(out)


def numbered_lines(rng: random.Random, first: int, chars: int) -> str:
    """Code-like lines numbered from ``first``, about ``chars`` characters: a tool's output."""
    lines: list[str] = []
    size, n = 0, first
    while size < chars:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
        lines.append(f"{n}: {rng.choice(['def', 'return', 'if', '#', 'x ='])} {words}")
        size += len(lines[-1]) + 1
        n += 1
    return "\n".join(lines)


def log_message(
    store: Store, sid: str, turn: int, kind: str, text: str, pending: list[int]
) -> Event:
    """One message as the agent logs it: a call (its seq queued on ``pending``), the
    result of the oldest pending call, or a plain ``kind`` message."""
    if kind == "call":
        event = store.append(
            sid,
            "call",
            role="call",
            turn=turn,
            text=text,
            payload={
                "name": "eval",
                "input": {"code": text},
                "provider_id": f"toolu_b{store.last_seq(sid) + 1}",
            },
        )
        pending.append(event.seq)
        return event
    if kind == "tool":
        return store.append(
            sid,
            "tool",
            role="tool",
            turn=turn,
            payload={"call": pending.pop(0), "error": False},
            text=lambda seq: format_result(text, seq, 20000),
        )
    return store.append(sid, kind, role=kind, turn=turn, text=text)


def rss(pid: int) -> float:
    """A process's resident memory, MiB (``VmRSS`` of ``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def write_config(home: Path, url: str, **settings: Any) -> None:
    """As tests/conftest.py: the home's provider is a loopback server (Anthropic format)."""
    config = {
        "provider": "loopback",
        "model": "loopback-model",
        **settings,
        "providers": {"loopback": {"type": "anthropic", "base_url": url, "api_key_env": None}},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.jsonc").write_text("// bench config\n" + json.dumps(config, indent=2))
