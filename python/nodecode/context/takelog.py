"""What the log says of a session's exports, edits and takes, as one index.

Every request asks: is there a pending edit, which export is the latest, is
this file's digest one already recorded, how many takes were there. Each of
those was a query over every edit, export or receipt of the session. Here
they are one index (``TakeLog``), kept by ``context.derived`` with the
session's other views and fed the events logged since it last looked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nodecode.context.model import TAKE_KINDS
from nodecode.log.store import Event

KINDS = ("export", "edit", "receipt", *TAKE_KINDS)
TAKEN = "\ntaken at seq "  # what a receipt of a take (not a refusal) holds


@dataclass
class TakeLog:
    """One session's exports, pending edits, recorded file digests and take count."""

    seen: int = 0  # the highest seq scanned
    exports: dict[int, Event] = field(default_factory=dict)  # by number
    latest_export: Event | None = None
    pending: list[Event] = field(default_factory=list)  # edits after the last receipt
    recorded: set[str] = field(default_factory=set)  # file edits' and exports' digests
    takes: int = 0  # edits taken, evictions, tree moves, forks
    history: list[tuple[str, int]] = field(default_factory=list)  # each take: (kind, seq)

    def add(self, e: Event) -> None:
        if e.kind == "export":
            self.exports[e.payload["number"]] = e  # take.py's _log_export writes both
            self.latest_export = e
            self.recorded.add(e.payload["blob"])
        elif e.kind == "edit":
            self.pending.append(e)
            if e.payload.get("source") == "file":
                self.recorded.add(e.payload["blob"])  # as record_file_edit writes it
        elif e.kind == "receipt":
            self.pending.clear()  # a take processes every pending edit at once
            if TAKEN in e.text:
                self.takes += 1
                self.history.append((e.kind, e.seq))
        else:
            self.takes += 1
            self.history.append((e.kind, e.seq))
        self.seen = max(self.seen, e.seq)
