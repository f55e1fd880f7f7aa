"""A session's title, and a turn's, as the person reads them: the ask's first
line of words, without the fenced blocks a range, ``#buffer`` or ``#file``
put into it (``what does this do?``, not ```` ```python calc.py:9-11 ````).
One function, so ``nodecode sessions``, the sessions picker and the tree
show the same words; a rename or an automatic title (``nodecode.agent.title``)
comes before the first line."""

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
    """Its newest rename, else the title it was given at creation, else its
    automatic title (``session_title``), else its first ask's ("" with none)."""
    given = sessions.titles(store, info.id)
    for title in (getattr(given.get("user"), "title", None), info.title):
        if title:
            return title
    auto = given.get("auto")
    if auto is not None and auto.title:
        return auto.title
    rows = store.read(
        "SELECT text FROM events WHERE session = ? AND role = 'user' ORDER BY seq LIMIT 1",
        (info.id,),
    )
    return ask_title(rows[0][0]) if rows else ""


def title_of(store: Store, sid: str) -> str:
    """``session_title`` of session ``sid``."""
    return session_title(store, sessions.get(store, sid))


def one_line(text: str, width: int = WIDTH) -> str:
    """A title as given (a rename, a model's reply): its first line of words, without
    markdown heading marks and the quotes a model may put around it, cut at ``width``."""
    line = ask_title(text, 10 * width).lstrip("#").strip()
    if len(line) > 1 and line[0] == line[-1] and line[0] in "\"'`*":
        line = line[1:-1].strip()
    return _cut(line.rstrip("."), width) if line else ""
