"""A session's title, and a turn's, as the person reads them: the ask's first
line of words, without the fenced blocks a range, ``#buffer`` or ``#file``
put into it (``what does this do?``, not ```` ```python calc.py:9-11 ````).
One function, so ``nodecode sessions``, the sessions picker and the tree
show the same words."""

from __future__ import annotations

import re

from nodecode.log import sessions
from nodecode.log.store import Store

WIDTH = 60
_FENCE = re.compile(r"^\s*(`{3,})")
_MARKUP = re.compile(r"(?<![\w#])#(?:file:(\S+)|buffer\b)")


def ask_title(text: str, width: int = WIDTH) -> str:
    """The first line of words of ``text`` outside fenced blocks, ``#file:PATH``
    read as PATH; only blocks: the first block's path (``calc.py:9-11``)."""
    fence: str | None = None
    first_path = ""
    for line in text.split("\n"):
        run = _FENCE.match(line)
        if fence is not None:
            if run and len(run.group(1)) >= len(fence) and not line.strip().strip("`"):
                fence = None
            continue
        if run:
            fence = run.group(1)
            info = line.strip()[len(fence) :].split()  # ```python calc.py:9-11
            first_path = first_path or (info[-1] if info else "")
            continue
        words = " ".join(_MARKUP.sub(lambda m: m.group(1) or "", line).split())
        if words:
            return _cut(words, width)
    return _cut(first_path, width)


def _cut(line: str, width: int) -> str:
    return line[:width] + "…" if len(line) > width else line


def session_title(store: Store, info: sessions.SessionInfo) -> str:
    """The title the session was given, else its first ask's ("" with none)."""
    if info.title:
        return info.title
    rows = store.read(
        "SELECT text FROM events WHERE session = ? AND role = 'user' ORDER BY seq LIMIT 1",
        (info.id,),
    )
    return ask_title(rows[0][0]) if rows else ""
