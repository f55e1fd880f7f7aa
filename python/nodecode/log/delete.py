"""Deleting a session: the one way rows leave the log (doc/design.md "The log").

Its events (and with them its messages in the full-text index), turns, titles,
lease and shell snapshots go in one transaction, and the blobs only it
referred to. Refused while a live process holds its lease (a turn runs), and
for a session others were forked from (their history reads its events).
Until then nothing of it is ever removed: it stays recallable.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from nodecode.errors import SessionBusy, SessionError, UserError
from nodecode.log import sessions
from nodecode.log.leases import lease_live
from nodecode.log.store import Store, unpack_payload

_HASH = re.compile(r"[0-9a-f]{64}")
_TABLES = ("turns", "titles", "leases", "shell_runs")  # rows keyed by ``session``


@dataclass(frozen=True)
class Deleted:
    """What a delete removed: the session, its events and the blobs only it held."""

    session: str
    events: int
    blobs: int


def refusal(store: Store, sid: str) -> UserError | None:
    """Why ``sid`` cannot be deleted now, as the error to raise (None: it can)."""
    sessions.get(store, sid)
    if lease_live(store, sid):
        return SessionBusy(f"session {sid} is running a turn: stop it first (nothing was deleted)")
    children = [r[0] for r in store.read("SELECT id FROM sessions WHERE parent = ?", (sid,))]
    if children:
        return SessionError(
            f"session {sid} has forks that read its history ({', '.join(children)}): "
            "delete them first (nothing was deleted)"
        )
    return None


def delete(store: Store, sid: str) -> Deleted:
    """Remove session ``sid`` from the store (see the module's docstring)."""
    with store.atomic() as db:
        refused = refusal(store, sid)
        if refused is not None:
            raise refused
        held = _stored(db, _hashes(db, "session = ?", (sid,)))
        db.execute("INSERT INTO deleting (session) VALUES (?)", (sid,))
        events = db.execute("DELETE FROM events WHERE session = ?", (sid,)).rowcount
        for table in _TABLES:
            db.execute(f"DELETE FROM {table} WHERE session = ?", (sid,))  # noqa: S608 - a constant
        db.execute("DELETE FROM sessions WHERE id = ?", (sid,))
        db.execute("DELETE FROM deleting WHERE session = ?", (sid,))
        if sessions.current(store) == sid:
            store.set_meta("current_session", None)
        blobs = _drop_blobs(db, held)
    store.forget()
    return Deleted(sid, events, blobs)


def _drop_blobs(db: sqlite3.Connection, held: set[str]) -> int:
    """Delete the blobs of ``held`` (and their delta bases) that no other
    session's event names, nor any kept blob needs as a base."""
    if not held:
        return 0
    held |= _bases(db, held)
    kept = _hashes(db, "1", ()) & held
    kept |= _bases(db, kept)
    gone = sorted(held - kept)
    for h in gone:
        db.execute("DELETE FROM blobs WHERE hash = ?", (h,))
    return len(gone)


def _stored(db: sqlite3.Connection, hashes: set[str]) -> set[str]:
    """Those of ``hashes`` that are blobs of the store."""
    return {h for h in hashes if db.execute("SELECT 1 FROM blobs WHERE hash = ?", (h,)).fetchone()}


def _bases(db: sqlite3.Connection, hashes: set[str]) -> set[str]:
    """Every delta base the blobs ``hashes`` are read through, transitively."""
    out: set[str] = set()
    todo = list(hashes)
    while todo:
        row = db.execute("SELECT base FROM blobs WHERE hash = ?", (todo.pop(),)).fetchone()
        base = row[0] if row else None
        if base and base not in out:
            out.add(base)
            todo.append(base)
    return out


def _hashes(db: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> set[str]:
    """The blob hashes the payloads of the events matching ``where`` name (read
    row by row: every event of the store, for the blobs another session keeps)."""
    found: set[str] = set()
    rows = db.execute(
        f"SELECT payload FROM events WHERE {where} AND payload IS NOT NULL",  # noqa: S608
        params,
    )
    for (packed,) in rows:
        found.update(s for s in _strings(unpack_payload(packed)) if _HASH.fullmatch(s))
    return found


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a decoded payload."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        yield from _walk(value.values())
    elif isinstance(value, list | tuple):
        yield from _walk(value)


def _walk(values: Iterable[Any]) -> Iterator[str]:
    for v in values:
        yield from _strings(v)
