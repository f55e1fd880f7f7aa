"""A lenient reader of provider stream bodies: SSE frames or JSON lines.

Why not ``httpx_sse.EventSource``: its decoder follows the SSE spec to the
letter, so it joins consecutive ``data:`` lines of stubs whose blank separator
lines were removed (codecompanion's recorded streams), keeps only the last
``event:`` name of such a run, and drops bare JSON lines (llama.cpp notes,
the AI-SDK recorder, Ollama's native NDJSON) as unknown fields. httpx's own
``iter_lines`` splits on U+2028, which JSON strings may carry raw. So the
lines and frames are cut here; the event type is httpx-sse's.

Rules (providers.md §4): ``\\n``, ``\\r\\n`` and ``\\r`` end lines; ``:``
lines are comments; a blank line ends an event; an ``event:`` line after
``data:`` starts a new event, and so does a ``data:`` line when the data
before it is already a whole JSON value; one space after the colon is
stripped; multi-line data joins with ``\\n``; ``[DONE]`` ends the stream; a
line starting with ``{`` is a whole event by itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from httpx_sse import ServerSentEvent

DONE = "[DONE]"
_NEWLINE = re.compile(r"\r\n|\r|\n")

__all__ = ["DONE", "EventReader", "LineSplitter", "ServerSentEvent", "iter_events"]


class LineSplitter:
    """Cuts decoded text, arriving in arbitrary pieces, into lines."""

    def __init__(self) -> None:
        self._rest = ""

    def feed(self, text: str) -> list[str]:
        """Whole lines completed by ``text``; a trailing ``\\r`` waits for a possible ``\\n``."""
        buf = self._rest + text
        cut = len(buf) - 1 if buf.endswith("\r") else len(buf)
        parts = _NEWLINE.split(buf[:cut])
        self._rest = parts.pop() + buf[cut:]
        return parts

    def flush(self) -> list[str]:
        """The unterminated last line, at end of body."""
        rest, self._rest = self._rest, ""
        rest = rest.rstrip("\r")
        return [rest] if rest else []


class EventReader:
    """Turns lines into events, one line at a time (see the module rules)."""

    def __init__(self) -> None:
        self._event: str | None = None
        self._data: list[str] = []
        self._first = True
        self.done = False  # saw [DONE]; later lines are ignored

    def feed_line(self, line: str) -> list[ServerSentEvent]:
        if self._first:
            line, self._first = line.lstrip("\ufeff"), False
        if self.done or line.startswith(":"):
            return []
        if not line:
            return self._dispatch()
        if line.startswith("{"):
            return self._dispatch() + self._emit(None, line)
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            out = self._dispatch() if self._data else []
            self._event = value
            return out
        if field == "data":
            out = self._dispatch() if self._pending_is_whole() else []
            self._data.append(value)
            return out
        return []  # id:, retry: and unknown fields mean nothing to a provider stream

    def finish(self) -> list[ServerSentEvent]:
        """Dispatch what is pending at end of body (streams may lack a last blank line)."""
        return [] if self.done else self._dispatch()

    def _pending_is_whole(self) -> bool:
        if not self._data:
            return False
        data = "\n".join(self._data)
        if data == DONE:
            return True
        try:
            json.loads(data)
        except ValueError:
            return False
        return True

    def _dispatch(self) -> list[ServerSentEvent]:
        event, data = self._event, self._data
        self._event, self._data = None, []
        return self._emit(event, "\n".join(data)) if data else []

    def _emit(self, event: str | None, data: str) -> list[ServerSentEvent]:
        if data == DONE:
            self.done = True
        return [ServerSentEvent(event=event, data=data)]


def iter_events(lines: Iterable[str]) -> Iterator[ServerSentEvent]:
    """Every event in ``lines``, stopping after ``[DONE]``."""
    reader = EventReader()
    for line in lines:
        yield from reader.feed_line(line)
        if reader.done:
            return
    yield from reader.finish()
