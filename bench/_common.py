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
import sys
from pathlib import Path
from typing import Any

from nodecode.agent import format_result
from nodecode.store import Event, Store

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
        **extra: Any,
    ) -> None:
        """One bar: ``line`` (or ``bar: measured X, goal Y → PASS``) as text, or JSON."""
        if self.as_json:
            print(
                json.dumps(
                    {
                        "bar": bar,
                        "measured": measured,
                        "goal": goal,
                        "pass": passed,
                        "unit": unit,
                        **extra,
                    }
                ),
                flush=True,
            )
            return
        verdict = "PASS" if passed else "FAIL"
        shown = "n/a" if measured is None else f"{measured:.3g} {unit}"
        print(line or f"{bar}: measured {shown}, goal {goal} → {verdict}", flush=True)

    def note(self, text: str) -> None:
        """Progress and details: stdout as text, stderr with --json."""
        print(text, file=sys.stderr if self.as_json else sys.stdout, flush=True)


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
