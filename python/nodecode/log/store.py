"""The session log: one SQLite database per store (WAL, busy timeout).

Events are appended, never updated or deleted (triggers refuse both). Every
write goes through ``atomic()``; values are always bound parameters.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from nodecode.bounded import Bounded
from nodecode.errors import StoreError
from nodecode.log import delta, migrations
from nodecode.paths import ensure_dir

MESSAGE_ROLES = ("user", "assistant", "call", "tool", "note", "stub", "notice", "thinking")


@dataclass(frozen=True)
class Event:
    session: str
    seq: int
    kind: str
    role: str | None
    turn: int | None
    text: str
    payload: dict[str, Any] = field(default_factory=dict)
    time: float = 0.0


_COLUMNS = "session, seq, kind, role, turn, text, payload, time"


_FIELDS = ("session", "seq", "kind", "role", "turn", "text", "payload", "time")


def unpack_payload(packed: bytes) -> dict[str, Any]:
    """A payload as the events table stores it (msgpack), decoded."""
    return msgpack.unpackb(packed, raw=False)


def _event(row: tuple) -> Event:
    """An Event of a row, its fields set directly: a frozen dataclass's __init__
    costs twice as much, and a new App's first request decodes thousands."""
    payload = msgpack.unpackb(row[6], raw=False) if row[6] is not None else {}
    event = object.__new__(Event)
    event.__dict__.update(zip(_FIELDS, (*row[:6], payload, row[7]), strict=True))
    return event


def _context_query(
    columns: str,
    session: str,
    turns: list[int] | None,
    upto: int | None,
    kinds: tuple[str, ...],
    turnless: bool,
) -> tuple[str, tuple]:
    """The SELECT of ``Store.context_events`` with its parameters."""
    kind_marks = ",".join("?" * len(kinds)) or "NULL"
    if turns is None:
        where = "" if turnless else "AND turn IS NOT NULL "
    else:
        marks = ",".join("?" * len(turns)) or "NULL"
        where = f"AND (turn IN ({marks})" + (" OR turn IS NULL" if turnless else "") + ") "
    sql = (
        f"SELECT {columns} FROM events WHERE session = ? AND seq <= ? {where}"
        f"AND (role IS NOT NULL OR kind IN ({kind_marks})) ORDER BY seq"
    )
    return sql, (session, upto if upto is not None else 2**62, *(turns or ()), *kinds)


# What SQLite says of a file whose pages it cannot read as a database.
_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def damaged(path: Path, e: sqlite3.DatabaseError) -> StoreError | None:
    """The one line for a store SQLite found damaged (a page it cannot read, or no
    database at all), naming the file and what to do; None for any other error."""
    if (getattr(e, "sqlite_errorcode", 0) & 0xFF) not in _DAMAGED:
        return None
    quoted = shlex.quote(str(path))
    return StoreError(
        f"store {path} is damaged ({e}): check it with "
        f"`sqlite3 {quoted} 'PRAGMA integrity_check'`, then restore it from your backup, "
        "or move it aside and nodecode starts a new one"
    )


class Store:
    """One open store. Thread-safe: one connection guarded by a lock."""

    def __init__(self, path: Path):
        self.path = path
        ensure_dir(path.parent)
        if not path.exists():
            # Create it 0600 before SQLite opens it.
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        try:
            self.db = sqlite3.connect(
                path, timeout=30, isolation_level=None, check_same_thread=False
            )
            self.db.execute("PRAGMA busy_timeout=30000")
            # Before anything is written to it (WAL mode is a write to its header).
            found = migrations.foreign(self.db)
            if found is not None:
                self.db.close()
                raise StoreError(
                    f"store {path} is not a nodecode store: expected nodecode's tables or an "
                    f"empty file, found {found}; nothing was written to it (choose another "
                    "store with --store NAME, or move the file aside)"
                )
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.execute("PRAGMA synchronous=NORMAL")
            migrations.apply(self.db)
        except sqlite3.DatabaseError as e:
            raise damaged(path, e) or StoreError(f"store {path}: cannot open: {e}") from None
        for suffix in ("-wal", "-shm"):
            side = Path(str(path) + suffix)
            if side.exists():
                os.chmod(side, 0o600)
        self._lock = threading.RLock()
        self._depth = 0
        # Facts read from the store that never change once written (a decoded event,
        # a decoded snapshot, a session's ancestry), by kind, each table bounded.
        self.facts: dict[str, Bounded] = {}
        # What upper layers derive from the log, by (owner, key): ``context.derived``
        # keeps one per session, ``cache.ledger`` one per cache scope.
        self.derived: dict[tuple[str, str], Any] = {}
        # Held while a derived view is read or filled. It is the connection's own lock
        # on purpose: a fill reads the log, so with one lock it neither deadlocks
        # against a transaction nor sees rows appended half-way through.
        self.cache_lock = self._lock

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # -- the one write boundary -------------------------------------------

    @contextlib.contextmanager
    def checked(self) -> Iterator[None]:
        """SQL run inside that finds the store damaged raises ``damaged``'s one line
        instead of SQLite's error (every read and write of the store goes through here)."""
        try:
            yield
        except sqlite3.DatabaseError as e:
            error = damaged(self.path, e)
            if error is None:
                raise
            raise error from None

    @contextlib.contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE); nested uses join the outer one."""
        with self._lock, self.checked():
            if self._depth:
                self._depth += 1
                try:
                    yield self.db
                finally:
                    self._depth -= 1
                return
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise self._cannot_write(e) from None
            self._depth = 1
            try:
                yield self.db
                self._depth = 0
                self.db.execute("COMMIT")
            except BaseException as e:
                self._depth = 0
                # SQLite has rolled back already after some errors (a full disk, I/O).
                if self.db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):  # the error says what went wrong
                        self.db.execute("ROLLBACK")
                # Views filled inside the transaction may hold rows it no longer has.
                self.forget()
                if isinstance(e, sqlite3.OperationalError):
                    raise self._cannot_write(e) from None
                raise

    def _cannot_write(self, e: sqlite3.OperationalError) -> StoreError:
        """A failed write as one line: the store, and SQLite's reason (a full disk,
        an I/O error, a lock held past the busy timeout)."""
        return StoreError(f"store {self.path}: cannot write: {e}")

    def forget(self) -> None:
        """Drop every fact and view read so far (a rolled-back write may be in them)."""
        with self._lock:
            self.facts.clear()
            self.derived.clear()

    def fact(self, kind: str, limit: int = 512) -> Bounded:
        """The table of facts of ``kind`` (created empty, holding at most ``limit``)."""
        table = self.facts.get(kind)
        if table is None:
            table = self.facts[kind] = Bounded(limit)
        return table

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Reads that all see one moment of the log: a read transaction (WAL
        gives it a snapshot from its first read), or the write transaction
        already open. Without it a commit of another connection could land
        between two reads of one view, which then holds half of it."""
        with self._lock, self.checked():
            if self.db.in_transaction:  # a write block of ours, or another reading
                yield
                return
            self.db.execute("BEGIN DEFERRED")  # takes no lock until its first read
            try:
                yield
            finally:
                if self.db.in_transaction:  # SQLite may have ended it itself
                    self.db.execute("END")  # writes nothing, so syncs nothing

    def version(self) -> tuple[int, int]:
        """Changes whenever the database may have: a row this connection changed
        (committed, pending or rolled back: ``total_changes`` counts them all) or a
        commit of any other (SQLite's ``data_version``, any process's). A view
        derived from the log is current while the version it was made at is."""
        with self._lock, self.checked():
            return self.db.total_changes, self.db.execute("PRAGMA data_version").fetchone()[0]

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes when another connection (of any
        process) commits, never for this one's own commits."""
        with self._lock, self.checked():
            return self.db.execute("PRAGMA data_version").fetchone()[0]

    def read(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock, self.checked():
            return self.db.execute(sql, params).fetchall()

    # -- events ---------------------------------------------------------------

    def append(
        self,
        session: str,
        kind: str,
        *,
        role: str | None = None,
        turn: int | None = None,
        text: str | Callable[[int], str] = "",
        payload: dict[str, Any] | None = None,
    ) -> Event:
        """Append one event and return it. ``text`` may be a function of the new
        seq (a tool result ends with its own ``[seq N]``)."""
        if role is not None and role not in MESSAGE_ROLES:
            raise ValueError(f"role must be one of {MESSAGE_ROLES} (got {role!r})")
        with self.atomic() as db:
            seq = self._next_seq(db, session)
            body = text(seq) if callable(text) else text
            packed = msgpack.packb(payload, use_bin_type=True) if payload else None
            now = time.time()
            db.execute(
                f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session, seq, kind, role, turn, body, packed, now),
            )
        return self.known(Event(session, seq, kind, role, turn, body, payload or {}, now))

    def _next_seq(self, db: sqlite3.Connection, session: str) -> int:
        row = db.execute("SELECT MAX(seq) FROM events WHERE session = ?", (session,)).fetchone()
        if row[0] is not None:
            return row[0] + 1
        fork = db.execute("SELECT fork_seq FROM sessions WHERE id = ?", (session,)).fetchone()
        if fork is None:
            raise StoreError(f"session {session!r} does not exist in {self.path}")
        return (fork[0] or 0) + 1

    def events(
        self,
        session: str,
        *,
        after: int = 0,
        upto: int | None = None,
        kinds: tuple[str, ...] | None = None,
        payload_of: tuple[str, ...] | None = None,
    ) -> list[Event]:
        """This session's own events with after < seq <= upto, in seq order. With
        ``kinds``, through the (session, kind, seq) index: left to itself SQLite walks
        (session, seq) to save the sort, every event after ``after`` (2 ms at 2,000
        messages for the few edits and exports of a session). With ``payload_of``,
        only events of those kinds carry their payload (a snapshot's is large)."""
        table = "events INDEXED BY events_session_kind" if kinds else "events"
        columns = _COLUMNS
        params: list[Any] = []
        if payload_of is not None:
            marks = ",".join("?" * len(payload_of)) or "NULL"
            columns = _COLUMNS.replace("payload", f"CASE WHEN kind IN ({marks}) THEN payload END")
            params.extend(payload_of)
        sql = f"SELECT {columns} FROM {table} WHERE session = ? AND seq > ?"
        params += [session, after]
        if upto is not None:
            sql += " AND seq <= ?"
            params.append(upto)
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kinds)
        return [_event(r) for r in self.read(sql + " ORDER BY seq", tuple(params))]

    def context_events(
        self,
        session: str,
        turns: list[int] | None,
        *,
        upto: int | None,
        kinds: tuple[str, ...],
        turnless: bool,
    ) -> list[Event]:
        """Messages and events of ``kinds`` in the given turns (None: in any turn)
        (and, when ``turnless``, of no turn), with seq <= upto, in seq order."""
        sql, params = _context_query(_COLUMNS, session, turns, upto, kinds, turnless)
        return [_event(r) for r in self.read(sql, params)]

    def message_rows(
        self, session: str, turns: list[int] | None, *, upto: int | None, turnless: bool
    ) -> list[tuple]:
        """The rows ``context_events`` reads for messages alone, as (seq, role, turn,
        text, packed payload) tuples: the state of a session makes thousands of
        messages of them, and an Event of each on the way costs as much as the read."""
        sql, params = _context_query(
            "seq, role, turn, text, payload", session, turns, upto, (), turnless
        )
        return self.read(sql, params)

    def payloads(self, session: str, kind: str, upto: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(seq, payload) of the session's events of ``kind`` with seq <= upto, newest
        first, decoded as they are read (stop early and the rest is never decoded)."""
        rows = self.read(
            "SELECT seq, payload FROM events WHERE session = ? AND kind = ? AND seq <= ? "
            "ORDER BY seq DESC",
            (session, kind, upto),
        )
        for seq, raw in rows:
            yield seq, (msgpack.unpackb(raw, raw=False) if raw is not None else {})

    def event(self, session: str, seq: int) -> Event | None:
        """One event. Events never change, so decoded ones are kept (a request's
        payload is read again at the next request)."""
        cache = self.fact("events")
        hit = cache.get((session, seq))
        if hit is not None:
            return hit
        rows = self.read(
            f"SELECT {_COLUMNS} FROM events WHERE session = ? AND seq = ?", (session, seq)
        )
        if not rows:
            return None
        return cache.keep((session, seq), _event(rows[0]))

    def known(self, event: Event) -> Event:
        """Keep ``event`` (just read or written) for ``event()``; returns it."""
        return self.fact("events").keep((event.session, event.seq), event)

    def last_event(self, session: str, kind: str) -> Event | None:
        """The session's newest event of ``kind``."""
        rows = self.read(
            "SELECT MAX(seq) FROM events WHERE session = ? AND kind = ?", (session, kind)
        )
        return self.event(session, rows[0][0]) if rows[0][0] is not None else None

    def last_seq(self, session: str) -> int:
        row = self.read("SELECT MAX(seq) FROM events WHERE session = ?", (session,))[0]
        if row[0] is not None:
            return row[0]
        fork = self.read("SELECT fork_seq FROM sessions WHERE id = ?", (session,))
        return (fork[0][0] or 0) if fork else 0

    # -- blobs ----------------------------------------------------------------

    def put_blob(
        self,
        data: bytes,
        *,
        base: tuple[str, bytes] | None = None,
        unit: bytes | None = None,
        digest: str | None = None,
    ) -> str:
        """Store ``data`` content-addressed; return its sha256 (``digest``, when
        the caller has hashed it already). With ``base`` (a digest and its bytes,
        which need not be a stored blob), the row holds only a delta against it
        (``nodecode.log.delta``, runs of lines or of ``unit`` pieces) when that is smaller."""
        digest = digest or hashlib.sha256(data).hexdigest()
        as_delta: tuple[bytes, str] | None = None  # (delta, its base's digest) when smaller
        if base is not None and base[0] != digest:
            packed = delta.encode(base[1], data, unit=unit)
            if len(packed) < len(data) and delta.decode(base[1], packed) == data:
                as_delta = (packed, base[0])
        with self.atomic() as db:
            if as_delta is not None:
                db.execute(
                    "INSERT OR IGNORE INTO blobs (hash, size, data, base) VALUES (?, ?, ?, ?)",
                    (digest, len(data), *as_delta),
                )
            else:  # whole bytes replace a delta: they need no base to be read
                db.execute(
                    "INSERT INTO blobs (hash, size, data) VALUES (?, ?, ?) "
                    "ON CONFLICT(hash) DO UPDATE SET data = excluded.data, base = NULL "
                    "WHERE blobs.base IS NOT NULL",
                    (digest, len(data), data),
                )
        return digest

    def blob(
        self, digest: str, *, bases: Callable[[str], bytes | None] | None = None
    ) -> bytes | None:
        """A blob's bytes. A delta's base is read the same way; one that is not a
        stored blob (a re-rendered export) is asked of ``bases``."""
        rows = self.read("SELECT data, base FROM blobs WHERE hash = ?", (digest,))
        if not rows:
            return bases(digest) if bases is not None else None
        data, base = bytes(rows[0][0]), rows[0][1]
        if base is None:
            return data
        whole = self.blob(base, bases=bases)
        return delta.decode(whole, data) if whole is not None else None

    # -- meta -----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self.read("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str | None) -> None:
        with self.atomic() as db:
            if value is None:
                db.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )


def open_store(home: Path, name: str) -> Store:
    if not name or "/" in name or name.startswith("."):
        raise StoreError(f"store name must be a plain file name (got {name!r})")
    return Store(ensure_dir(home / "store") / f"{name}.db")
