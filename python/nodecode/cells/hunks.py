"""A write's change as hunks the person takes or leaves one by one.

The hunks are the unified diff's (difflib's grouping, 3 lines of context), so
the diff shown and the hunks answered are one list. Lines keep their endings
(a text is decoded with surrogateescape), so the bytes written are exactly the
old file with the taken hunks' new lines (or the person's text for a hunk) in
place of the old ones. ``apply`` also says, hunk by hunk, what happened: that
text ends the write's result, so the model learns which hunks it got.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from nodecode.errors import CellError

CONTEXT = 3
NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True)
class Hunk:
    """Hunk ``number`` (1-based): its changed lines ``old[a:b]`` become ``new[c:d]``
    (0-based, without the context lines around them); ``group`` is its opcodes."""

    number: int
    a: int
    b: int
    c: int
    d: int
    group: tuple[tuple[str, int, int, int, int], ...]


@dataclass(frozen=True)
class Change:
    """A text write as lines (endings kept) and its hunks."""

    old: list[str]
    new: list[str]
    hunks: list[Hunk]


@dataclass(frozen=True)
class Choice:
    """What the person chose for hunk ``number``: taken or not, why not, and
    the text they wrote for it instead of the proposal (lines without endings)."""

    number: int
    take: bool
    reason: str = ""
    lines: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Applied:
    """The bytes to write, how many hunks were taken, and one line per hunk."""

    data: bytes
    taken: int
    report: list[str]
    partial: bool  # a hunk left out or edited: the result must say so


def lines(text: str) -> list[str]:
    """``text`` split after each newline ("\\r\\n" stays on its line)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def change(old: str, new: str) -> Change:
    a, b = lines(old), lines(new)
    groups = difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(CONTEXT)
    return Change(a, b, [_hunk(n, g) for n, g in enumerate(groups, 1)])


def _hunk(number: int, group: list[tuple[str, int, int, int, int]]) -> Hunk:
    changed = [op for op in group if op[0] != "equal"]
    first, last = changed[0], changed[-1]
    return Hunk(number, first[1], last[2], first[3], last[4], tuple(group))


def unified(shown: str, new_file: bool, ch: Change) -> tuple[list[str], list[int]]:
    """The diff's lines as ``difflib.unified_diff`` writes them (plus git's mark of
    a last line without a newline), and the index of each hunk's ``@@`` line."""
    out = ["--- /dev/null" if new_file else f"--- a/{shown}", f"+++ b/{shown}"]
    at: list[int] = []
    for h in ch.hunks:
        first, last = h.group[0], h.group[-1]
        at.append(len(out))
        old_range = _range(first[1], last[2])
        out.append(f"@@ -{old_range} +{_range(first[3], last[4])} @@")
        for tag, i1, i2, j1, j2 in h.group:
            if tag == "equal":
                _shown(out, " ", ch.old[i1:i2])
                continue
            _shown(out, "-", ch.old[i1:i2])
            _shown(out, "+", ch.new[j1:j2])
    return out, at


def _shown(out: list[str], sign: str, part: list[str]) -> None:
    """``part`` as diff lines; a last line without a newline is marked as git
    marks it (else "-x" and "+x" would differ by nothing visible)."""
    out.extend(sign + _bare(x) for x in part)
    if part and not part[-1].endswith("\n"):
        out.append(NO_NEWLINE)


def _range(start: int, stop: int) -> str:
    """A unified diff's range of lines start..stop (0-based, stop excluded)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + (1 if length else 0)},{length}"


def _bare(line: str) -> str:
    """A line as the diff shows it: without its ending."""
    return line[:-1].removesuffix("\r") if line.endswith("\n") else line


def proposed(ch: Change, h: Hunk) -> list[str]:
    """The hunk's proposed lines as shown (and edited): without endings."""
    return [_bare(x) for x in ch.new[h.c : h.d]]


def apply(ch: Change, choices: Iterable[Choice]) -> Applied:
    """The old text with the taken hunks (as the person edited them) applied; a
    hunk missing from ``choices`` is left out as not reviewed."""
    chosen = {c.number: c for c in choices}
    out: list[str] = []
    report: list[str] = []
    taken, partial, at = 0, False, 0
    for h in ch.hunks:
        out.extend(ch.old[at : h.a])
        at = h.b
        pick = chosen.get(h.number)
        if pick is None or not pick.take:
            out.extend(ch.old[h.a : h.b])
            report.append(_left(h, pick))
            partial = True
            continue
        start = len(out)
        new = ch.new[h.c : h.d] if pick.lines is None else _ended(ch, h, pick.lines)
        out.extend(new)
        taken += 1
        partial = partial or pick.lines is not None
        report.append(_took(h, start, len(out), pick.lines))
    out.extend(ch.old[at:])
    data = "".join(out).encode("utf-8", "surrogateescape")
    return Applied(data, taken, report, partial)


def _ended(ch: Change, h: Hunk, text: tuple[str, ...]) -> list[str]:
    """The person's lines for hunk ``h`` with the file's line ending; the last
    one without when the proposal ended the file without a newline."""
    sample = ch.new[h.c : h.d] or ch.old[h.a : h.b] or ch.new or [""]
    end = "\r\n" if sample[0].endswith("\r\n") else "\n"
    out = [x + end for x in text]
    open_end = h.d == len(ch.new) and ch.new and not ch.new[-1].endswith("\n")
    if out and open_end:
        out[-1] = text[-1]
    return out


def _span(start: int, stop: int) -> str:
    """Lines start..stop (0-based, stop excluded) as a person numbers them."""
    return f"line {start + 1}" if stop - start == 1 else f"lines {start + 1}–{stop}"


def _after(a: int) -> str:
    return "at the start of the file" if a == 0 else f"after old line {a}"


def _took(h: Hunk, start: int, stop: int, edited: tuple[str, ...] | None) -> str:
    how = "applied as the person edited it" if edited is not None else "applied"
    if h.a == h.b:
        got = _span(start, stop) if stop > start else "nothing"
        what = f"{got} inserted {_after(h.a)}"
    elif start == stop:
        what = f"old {_span(h.a, h.b)} deleted"
    else:
        what = f"old {_span(h.a, h.b)} became {_span(start, stop)}"
    line = f"hunk {h.number} {how}: {what}"
    if edited is None:
        return line
    body = "".join(f"\n  | {x}" for x in edited)
    return f"{line}; written as:{body}" if edited else f"{line} (the person's text: nothing)"


def _left(h: Hunk, pick: Choice | None) -> str:
    how = "not applied (the person did not review it)" if pick is None else "rejected"
    if h.a == h.b:
        what = f"nothing inserted {_after(h.a)} (it proposed new {_span(h.c, h.d)})"
    elif h.c == h.d:
        them = "it" if h.b - h.a == 1 else "them"
        what = f"old {_span(h.a, h.b)} kept (it proposed deleting {them})"
    else:
        what = f"old {_span(h.a, h.b)} kept (it proposed new {_span(h.c, h.d)} there)"
    reason = " ".join(pick.reason.split()) if pick is not None else ""
    return f"hunk {h.number} {how}: {what}" + (f"; the person's reason: {reason}" if reason else "")


def picked(
    before: bytes | None, after: bytes, choices: Iterable[Choice], refused: str
) -> tuple[bytes, str]:
    """The bytes to write when the person picked hunks of the change from
    ``before`` to ``after``, and the lines the result adds (none when they took
    it whole); CellError ``refused`` naming each hunk when they took none."""
    old = (before or b"").decode("utf-8", "surrogateescape")
    done = apply(change(old, after.decode("utf-8", "surrogateescape")), choices)
    if not done.taken:
        raise CellError(f"{refused}: the person rejected every hunk\n" + "\n".join(done.report))
    if not done.partial:
        return done.data, ""
    total = len(done.report)
    head = f": the person took {done.taken} of {total} hunks, reviewing them one by one"
    return done.data, head + "".join(f"\n{x}" for x in done.report)
