"""An eviction by hand from Neovim (:NodecodeEvict, :NodecodeCompact, ``/evict``
typed in the chat) on a worker thread of the host (doc/design.md "Budget and
eviction"): with ``evict_summary`` on it asks the provider for a summary of
each evicted span, up to ``evict_summary_timeout``, and Neovim must not wait
for that.

Events emitted (``job`` None, ``kind`` evict, the ``token`` Neovim gave):
{token, summary: [first, last]} as the summary of seq first–last is asked;
then {token, value: {receipt}} or {token, error}. A stop (``Evictions.stop``)
ends a summary request at once, and asks for no further one: each such span
keeps the plain stub, and the receipt says so.

One eviction at a time per session: a second one, a turn, or a move (undo,
redo, rewind, continue, fork, a session's deletion) while one runs is refused
by the host with ``BUSY`` (doc/design.md "Decisions")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from nodecode.errors import UserError, one_line

BUSY = "an eviction is running in this session — wait for its receipt, or :NodecodeStop to stop it"


class Evictions:
    """The evictions running in this host, one per session at most."""

    def __init__(self, emit: Callable[[dict[str, Any]], None]):
        self._emit = emit
        self._running: dict[str, threading.Event] = {}  # session → its stop
        self._lock = threading.Lock()

    def refuse(self, sid: str) -> None:
        """One line when an eviction runs in ``sid``."""
        with self._lock:
            if sid in self._running:
                raise UserError(BUSY)

    def start(self, app: Any, sid: str, words: str | None, token: int) -> None:
        """Evict in ``sid`` as ``words`` say, on a worker thread; its receipt (or
        error) is an ``evict`` event. Bad words, or an eviction running in the
        session already, raise at once."""
        from nodecode.budget import evict as evictions

        percent, through = evictions.parse_words(words)
        stop = threading.Event()
        with self._lock:
            if sid in self._running:
                raise UserError(BUSY)
            self._running[sid] = stop

        def run() -> None:
            event: dict[str, Any]
            try:
                summarize = self._summarizer(app, stop, token)
                receipt = evictions.by_hand(app, sid, (percent, through), summarize)
                event = {"value": {"receipt": receipt}}
            except Exception as e:  # noqa: BLE001 -- a worker must always report back
                event = {"error": one_line(e)}
            finally:
                with self._lock:
                    self._running.pop(sid, None)
            self._emit({"job": None, "kind": "evict", "token": token, **event})

        threading.Thread(target=run, name="nodecode-evict", daemon=True).start()

    def stop(self, sid: str | None = None) -> bool:
        """Stop the eviction running in ``sid`` (None: every one); was one running?"""
        with self._lock:
            stops = [s for k, s in self._running.items() if sid is None or k == sid]
        for s in stops:
            s.set()
        return bool(stops)

    def _summarizer(self, app: Any, stop: threading.Event, token: int) -> Any:
        """``evict_summary``'s summarizer, ended by ``stop``, that tells Neovim
        as each summary is asked; None with the setting off."""
        from nodecode.budget import summary as summaries

        summarize = summaries.summarizer(app, app.config, stop)
        if summarize is None:
            return None

        def asked(prefix: Any, span: tuple[int, int]) -> summaries.Summary:
            if stop.is_set():  # stopped during an earlier span's: no request
                return summaries.Summary(None, failed=summaries.STOPPED)
            self._emit({"job": None, "kind": "evict", "token": token, "summary": list(span)})
            return summarize(prefix, span)

        return asked
