"""context.txt: render an export and split a file back into blocks.

```
[[export STORE/SESSION N NONCE]]
[[m:NONCE ID ROLE]]
body…
```
Bodies are the message text byte for byte plus one ``\\n``; the parser strips
exactly one. Only ``\\n`` separates lines (a ``\\r`` is body text). A header
with a foreign nonce is body text; one with this export's nonce must be
well formed.
"""

from __future__ import annotations

import functools
import re
import secrets
from dataclasses import dataclass, field

from nodecode.context.model import Message

ROLES = ("user", "assistant", "call", "tool", "note", "stub", "notice", "thinking")
NOTE_LINE = "[[note]]"
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_FIRST = re.compile(r"^\[\[export (\S+)/(\S+) (\d+) ([a-z0-9]{4,8})\]\]$")


def first_line(store: str, sid: str, number: int, nonce: str) -> str:
    return f"[[export {store}/{sid} {number} {nonce}]]"


def choose_nonce(messages: list[Message], length: int = 6) -> str:
    """A fresh nonce no message line starts with (after ``[[m:``)."""
    starts = {
        line[4 : 4 + length]
        for m in messages
        if "[[m:" in m.text
        for line in m.text.split("\n")
        if line.startswith("[[m:")
    }
    while True:
        nonce = "".join(secrets.choice(_ALPHABET) for _ in range(length))
        if nonce not in starts:
            return nonce


def render(store: str, sid: str, number: int, nonce: str, messages: list[Message]) -> str:
    parts = [first_line(store, sid, number, nonce), "\n"]
    for m in messages:
        parts.append(f"[[m:{nonce} {m.id} {m.role}]]\n")
        parts.append(m.text)
        parts.append("\n")
    return "".join(parts)


@dataclass
class Block:
    id: int
    role: str
    body: str
    line: int  # 1-based line of the header


@dataclass
class Split:
    first: str
    blocks: list[Block] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)


def split(text: str, nonce: str) -> Split:
    """The file's first line and blocks; malformed own headers and text before
    the first header are errors with their line numbers."""
    # Header candidates are found with str.find and bodies sliced from the text
    # (no per-line Python loop): a 2,000-message file splits in a few ms.
    nl = text.find("\n")
    out = Split(text if nl < 0 else text[:nl])
    own = f"[[m:{nonce}"
    probe, cut = "\n" + own, len(own)
    heads: list[tuple[int, int, str, int, int]] = []  # (line index, id, role, start, body)
    line_no = counted = 0  # line index of offset ``counted``
    at = text.find(probe)
    while at >= 0:
        start = at + 1
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        line = text[start:end]
        if line[cut : cut + 1] in (" ", "]", ""):
            line_no += text.count("\n", counted, start)
            counted = start
            parsed = _header(line, nonce)
            if parsed is None:
                out.errors.append(
                    (
                        line_no + 1,
                        f"malformed header {line[:60]!r}: expected "
                        f"[[m:{nonce} ID ROLE]] with ROLE one of "
                        f"{', '.join(ROLES)}",
                    )
                )
            else:
                heads.append((line_no, *parsed, start, end + 1))
        at = text.find(probe, end)
    # Text between line 1 and the first header (with no header, a final newline is fine).
    stray = heads[0][0] > 1 if heads else nl + 1 < len(text) and nl >= 0
    if stray:
        out.errors.append(
            (
                2,
                "text between line 1 and the first header: "
                "expected a [[m:NONCE ID ROLE]] header line",
            )
        )
    for k, (i, mid, role, _, body_at) in enumerate(heads):
        stop = heads[k + 1][3] if k + 1 < len(heads) else len(text)
        if stop > body_at and text[stop - 1] == "\n":  # strip exactly one final \n
            stop -= 1
        out.blocks.append(Block(mid, role, text[body_at:stop], i + 1))
    return out


def rendered_split(first: str, messages: list[Message]) -> Split:
    """What ``split`` reads back from ``render`` of ``messages`` under the
    first line ``first`` (with a nonce from ``choose_nonce``, so no body line is
    a header), made from the messages without parsing the text."""
    out = Split(first)
    line = 2
    for m in messages:
        out.blocks.append(Block(m.id, m.role, m.text, line))
        line += m.text.count("\n") + 2  # the header, the body's lines
    return out


@functools.lru_cache(maxsize=64)
def _header_re(nonce: str) -> re.Pattern[str]:
    return re.compile(r"\[\[m:" + nonce + r" (\d+) ([a-z]+)\]\]")


def _header(line: str, nonce: str) -> tuple[int, str] | None:
    m = _header_re(nonce).fullmatch(line)
    if m is None or m.group(2) not in ROLES:
        return None
    return int(m.group(1)), m.group(2)


def parse_first(line: str) -> tuple[str, str, int, str] | None:
    m = _FIRST.match(line)
    return (m.group(1), m.group(2), int(m.group(3)), m.group(4)) if m else None
