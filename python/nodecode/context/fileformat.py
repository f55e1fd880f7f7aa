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

import re
import secrets
from dataclasses import dataclass, field

from nodecode.context.model import Message

ROLES = ("user", "assistant", "call", "tool", "note", "stub", "notice")
NOTE_LINE = "[[note]]"
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_FIRST = re.compile(r"^\[\[export (\S+)/(\S+) (\d+) ([a-z0-9]{4,8})\]\]$")


def first_line(store: str, sid: str, number: int, nonce: str) -> str:
    return f"[[export {store}/{sid} {number} {nonce}]]"


def choose_nonce(messages: list[Message], length: int = 6) -> str:
    """A fresh nonce no message line starts with (after ``[[m:``)."""
    starts = {line[4:4 + length] for m in messages for line in m.text.split("\n")
              if line.startswith("[[m:")}
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
    body_line: int  # 1-based line where the body starts


@dataclass
class Split:
    first: str
    blocks: list[Block] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)


def split(text: str, nonce: str) -> Split:
    """The file's first line and blocks; malformed own headers and text before
    the first header are errors with their line numbers."""
    lines = text.split("\n")
    out = Split(lines[0])
    own = f"[[m:{nonce}"
    heads: list[tuple[int, int, str]] = []  # (line index, id, role)
    for i, line in enumerate(lines[1:], start=1):
        if not line.startswith(own) or line[len(own):len(own) + 1] not in (" ", "]", ""):
            continue
        parsed = _header(line, nonce)
        if parsed is None:
            out.errors.append((i + 1, f"malformed header {line[:60]!r}: expected "
                                      f"[[m:{nonce} ID ROLE]] with ROLE one of {', '.join(ROLES)}"))
            continue
        heads.append((i, *parsed))
    first_head = heads[0][0] if heads else len(lines)
    stray = lines[1:first_head]
    if not heads and stray and stray[-1] == "":
        stray = stray[:-1]  # the file's final newline
    if stray:
        out.errors.append((2, "text between line 1 and the first header: "
                              "expected a [[m:NONCE ID ROLE]] header line"))
    for k, (i, mid, role) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        segment = "\n".join(lines[i + 1:end]) + ("\n" if end < len(lines) else "")
        body = segment[:-1] if segment.endswith("\n") else segment
        out.blocks.append(Block(mid, role, body, i + 1, i + 2))
    return out


def _header(line: str, nonce: str) -> tuple[int, str] | None:
    m = re.fullmatch(r"\[\[m:" + nonce + r" (\d+) ([a-z]+)\]\]", line)
    if m is None or m.group(2) not in ROLES:
        return None
    return int(m.group(1)), m.group(2)


def parse_first(line: str) -> tuple[str, str, int, str] | None:
    m = _FIRST.match(line)
    return (m.group(1), m.group(2), int(m.group(3)), m.group(4)) if m else None
