"""The stub that stands where evicted history was (doc/design.md "Budget and
eviction"): what one evicted run of messages becomes, and the units that are evicted together."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from nodecode.cells.reader import first_comment
from nodecode.context.message import Message
from nodecode.words import plural

CONTENT = ("user", "assistant", "call", "tool")
CELL_LINE_MAX = 100
NOTE_MAX = 2000  # characters of one note a stub keeps; the whole note is one recall away


@dataclass
class Unit:
    """Messages that are evicted together: a finished turn, or one round of the
    running turn (``round`` not None), or the restored messages of either."""

    key: Hashable
    turn: int | None
    round: int | None
    ids: list[int] = field(default_factory=list)


def cell_line(code: str) -> str:
    """A cell in a stub: its ``;;`` first line, or ``;; `` and its first line, cut."""
    comment = first_comment(code)
    if comment is not None:
        return ";; " + comment
    first = next((line.strip() for line in code.splitlines() if line.strip()), "")
    return ";; " + first[:CELL_LINE_MAX]


def kept_note(m: Message) -> str:
    """A note as a stub keeps it: whole up to NOTE_MAX characters, else cut, saying
    how to read it whole. Every eviction that merges a stub writes its notes again:
    kept whole, a long one would be stored once more at every request that evicts."""
    if len(m.text) <= NOTE_MAX:
        return m.text
    return m.text[:NOTE_MAX] + f"\n[cut: {len(m.text):,} characters · whole: (recall-entry {m.id})]"


def note_lines(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    return "note: " + lines[0] + "".join("\n  " + line for line in lines[1:])


def read_lines(text: str) -> tuple[list[str], list[str]]:
    """A stub's cell lines and notes read back from its text (one the person
    rewrote): ``note_lines`` undone; any other line the person wrote is a note."""
    cells: list[str] = []
    notes: list[list[str]] = []
    lines = text.split("\n")
    if lines and lines[0].startswith("[history evicted: "):
        lines = lines[1:]
    for line in lines:
        if line.startswith("  ") and notes:
            notes[-1].append(line[2:])
        elif line.startswith(";; "):
            cells.append(line)
        elif line.startswith("note: "):
            notes.append([line[len("note: ") :]])
        elif line.strip():
            notes.append([line])
    return cells, ["\n".join(n) for n in notes]


def stub_text(
    span: tuple[int, int],
    turns: int,
    rounds: list[tuple[int, int]],
    cells: list[str],
    notes: list[str],
) -> str:
    """The stub's text: its header (what it covers: whole turns, and rounds of a
    turn not evicted whole, named by their turn), then its cell lines and notes."""
    a, b = span
    parts = [plural(turns, "turn")] if turns or not rounds else []
    per_turn: dict[int, int] = {}
    for turn, _ in rounds:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    parts += [f"{plural(n, 'round')} of turn {t}" for t, n in sorted(per_turn.items())]
    head = f"[history evicted: seq {a}\u2013{b} \u00b7 " + " \u00b7 ".join(parts)
    head += f' \u00b7 recall: (recall-log :match "text" :before {b + 1})]'
    return "\n".join([head, *cells, *(note_lines(n) for n in notes)])


@dataclass
class Run:
    """One maximal run of evicted messages (and stubs next to them)."""

    members: list[Message]
    evicted: list[Message]


def stub_payload(run: Run, unit_of: dict[int, Unit]) -> dict[str, Any]:
    content = [m.id for m in run.evicted if m.role in CONTENT] or [m.id for m in run.evicted]
    lows, highs = list(content), list(content)
    of_turns: set[int] = set()
    of_rounds: set[tuple[int, int]] = set()
    cells: list[str] = []
    notes: list[str] = []
    evicted = {m.id for m in run.evicted}
    kept = [m for m in run.members if m.role == "stub" and m.id not in evicted]
    # The calls and notes a line stands for: one restored from a stub here, then
    # evicted again, already has its line.
    listed = {i for m in kept for i in m.payload.get("listed", [])}
    replaces = []
    for m in run.members:
        if m.role == "stub" and m.id not in evicted:
            p = m.payload
            lows.append(p.get("span", [m.id, m.id])[0])
            highs.append(p.get("span", [m.id, m.id])[1])
            of_turns.update(p.get("of_turns", []))
            of_rounds.update(tuple(r) for r in p.get("of_rounds", []))
            if m.rewritten:  # as the person left it: an edited or deleted note stays so
                kept_cells, kept_notes = read_lines(m.text)
                cells += kept_cells
                notes += kept_notes
            else:
                cells += p.get("cells", [])
                notes += p.get("notes", [])
            replaces.append(m.id)
            continue
        unit = unit_of[m.id]
        if unit.round is None and unit.turn is not None:
            of_turns.add(unit.turn)
        elif unit.round is not None and unit.turn is not None:
            of_rounds.add((unit.turn, unit.round))
        if m.id in listed or _listed_before(m, kept):
            continue
        if m.role == "call":
            cells.append(cell_line(m.text))
            listed.add(m.id)
        elif m.role == "note":
            notes.append(kept_note(m))
            listed.add(m.id)
    span = [min(lows), max(highs)]
    rounds = sorted(r for r in of_rounds if r[0] not in of_turns)  # a whole turn's are in it
    return {
        "span": span,
        "turns": len(of_turns),
        "rounds": len(rounds),
        "cells": cells,
        "notes": notes,
        "of_turns": sorted(of_turns),
        "of_rounds": [list(r) for r in rounds],
        "listed": sorted(listed),
        "replaces": replaces,
    }


def _listed_before(m: Message, stubs: list[Message]) -> bool:
    """Whether one of ``stubs`` written before stubs recorded what they list (no
    ``listed``) has ``m``'s line: ``m`` inside its span, its line among its own."""
    if m.role not in ("call", "note"):
        return False
    line = cell_line(m.text) if m.role == "call" else kept_note(m)
    for s in stubs:
        if "listed" in s.payload:
            continue
        a, b = s.payload.get("span", [s.id, s.id])
        if a <= m.id <= b and line in s.payload.get("cells" if m.role == "call" else "notes", []):
            return True
    return False


def runs(order: list[Message], evicted: set[int]) -> list[Run | Message]:
    """The order as kept messages and runs of evicted ones (stubs next to them join)."""
    out: list[Run | Message] = []
    pending: list[Message] = []

    def close() -> None:
        if any(m.id in evicted for m in pending):
            out.append(Run(list(pending), [m for m in pending if m.id in evicted]))
        else:
            out.extend(pending)
        pending.clear()

    for m in order:
        if m.id in evicted or m.role == "stub":
            pending.append(m)
        else:
            close()
            out.append(m)
    close()
    return out
