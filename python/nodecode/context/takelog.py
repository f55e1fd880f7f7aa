"""What the log says of a session's exports, edits and takes, read once.

Every request asks: is there a pending edit, which export is the latest, is
this file's digest one already recorded, how many takes were there. Each of
those was a query over every edit, export or receipt of the session. Here
they are one index, filled by scanning only the events logged after the last
scan (events are append-only and a session's seqs only grow, so what another
process appended is found the same way), and not even that while the store
has not changed (``Store.version``). A rolled-back transaction clears the
store's derived views, this one with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nodecode.context.model import TAKE_KINDS
from nodecode.log.store import Event, Store

KINDS = ("export", "edit", "receipt", *TAKE_KINDS)
TAKEN = "\ntaken at seq "  # what a receipt of a take (not a refusal) holds


@dataclass
class TakeLog:
    """One session's exports, pending edits, recorded file digests and take count."""

    seen: int = 0  # the highest seq scanned
    version: tuple[int, int] | None = None
    exports: dict[int, Event] = field(default_factory=dict)  # by number
    latest_export: Event | None = None
    pending: list[Event] = field(default_factory=list)  # edits after the last receipt
    recorded: set[str] = field(default_factory=set)  # file edits' and exports' digests
    takes: int = 0  # edits taken, evictions, tree moves, forks

    def add(self, e: Event) -> None:
        if e.kind == "export":
            self.exports[e.payload.get("number")] = e
            self.latest_export = e
            self.recorded.add(e.payload.get("blob"))
        elif e.kind == "edit":
            self.pending.append(e)
            if e.payload.get("source") == "file":
                self.recorded.add(e.payload.get("blob"))
        elif e.kind == "receipt":
            self.pending.clear()  # a take processes every pending edit at once
            self.takes += TAKEN in e.text
        else:
            self.takes += 1
        self.seen = max(self.seen, e.seq)


def of(store: Store, sid: str) -> TakeLog:
    """The session's take log as the store holds it now (the caller must not change it)."""
    with store.cache_lock:
        logs: dict[str, TakeLog] = store.cache.setdefault("takelog", {})
        log = logs.get(sid)
        if log is None:
            log = logs[sid] = TakeLog()
        version = store.version()
        if log.version != version:
            # The session's last seq first: every row up to it is committed, so the
            # scan after it sees them all, and the next scan need start no lower.
            top = store.last_seq(sid)
            for e in store.events(sid, after=log.seen, kinds=KINDS, payload_of=("export", "edit")):
                log.add(e)
            log.seen = max(log.seen, top)
            log.version = version
        return log
