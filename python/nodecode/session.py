"""Sessions: ids, the store's current session, and the one-turn-at-a-time lease."""

from __future__ import annotations

import os
import secrets
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from nodecode.errors import SessionBusy, SessionError
from nodecode.store import Store

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
LEASE_SECONDS = 30.0
LEASE_ENV = "NODECODE_LEASE_SECONDS"  # tests shorten the lease with it


@dataclass(frozen=True)
class SessionInfo:
    id: str
    parent: str | None
    fork_seq: int | None
    fork_turn: int | None
    title: str | None
    created: float
    head: int | None


def _base36(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = _ALPHABET[r] + out
    return out.rjust(width, "0")


def new_id(now: float | None = None) -> str:
    """``s-`` + seconds in base 36 (sorts by time) + 3 random characters."""
    stamp = _base36(int(now if now is not None else time.time()), 6)
    tail = "".join(secrets.choice(_ALPHABET) for _ in range(3))
    return f"s-{stamp}{tail}"


def create(
    store: Store,
    *,
    title: str | None = None,
    parent: str | None = None,
    fork_seq: int | None = None,
    fork_turn: int | None = None,
    head: int | None = None,
) -> str:
    """Create a session, make it the store's current one, return its id."""
    with store.atomic() as db:
        while True:
            sid = new_id()
            if not db.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
                break
        db.execute(
            "INSERT INTO sessions (id, parent, fork_seq, fork_turn, title, created, head)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, parent, fork_seq, fork_turn, title, time.time(), head),
        )
        store.set_meta("current_session", sid)
    return sid


def get(store: Store, sid: str) -> SessionInfo:
    rows = store.read(
        "SELECT id, parent, fork_seq, fork_turn, title, created, head FROM sessions WHERE id = ?",
        (sid,),
    )
    if not rows:
        raise SessionError(f"session {sid!r} does not exist in store {store.path.stem!r}")
    return SessionInfo(*rows[0])


def all_sessions(store: Store) -> list[SessionInfo]:
    rows = store.read(
        "SELECT id, parent, fork_seq, fork_turn, title, created, head "
        "FROM sessions ORDER BY created, id"
    )
    return [SessionInfo(*r) for r in rows]


def current(store: Store) -> str | None:
    return store.get_meta("current_session")


def set_current(store: Store, sid: str) -> None:
    get(store, sid)
    store.set_meta("current_session", sid)


def resolve(
    store: Store,
    explicit: str | None,
    environ: Mapping[str, str] = os.environ,
    *,
    create_missing: bool = False,
) -> str:
    """--session, else $NODECODE_SESSION, else the current session."""
    sid = explicit or environ.get("NODECODE_SESSION") or current(store)
    if sid is None:
        if create_missing:
            return create(store)
        raise SessionError(
            "no session: expected --session ID, $NODECODE_SESSION or a current "
            "session (run `nodecode new`); found none"
        )
    get(store, sid)
    return sid


def set_head(store: Store, sid: str, turn: int | None) -> None:
    with store.atomic() as db:
        db.execute("UPDATE sessions SET head = ? WHERE id = ?", (turn, sid))


def lease_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """How long a turn's lease lasts unrenewed: LEASE_SECONDS, or $NODECODE_LEASE_SECONDS."""
    raw = environ.get(LEASE_ENV)
    if raw is None:
        return LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise SessionError(f"${LEASE_ENV} must be a number of seconds above 0 (got {raw!r})")
    return value


class Lease:
    """A turn's hold on a session: a row with an expiry, renewed while the turn
    runs. A killed process stops renewing; its lease lapses after LEASE_SECONDS,
    or at once when its pid is gone on this host."""

    def __init__(self, store: Store, sid: str, seconds: float = LEASE_SECONDS):
        self.store, self.sid, self.seconds = store, sid, seconds
        self.owner = uuid.uuid4().hex
        self.host = socket.gethostname()
        self._renewed = 0.0

    def acquire(self) -> Lease:
        now = time.time()
        with self.store.atomic() as db:
            row = db.execute(
                "SELECT owner, pid, host, expires FROM leases WHERE session = ?", (self.sid,)
            ).fetchone()
            if row and row[0] != self.owner and row[3] > now and _alive(row[1], row[2], self.host):
                raise SessionBusy(
                    f"session busy: {self.sid} is running a turn in process "
                    f"{row[1]} (lease expires in {row[3] - now:.0f} s)"
                )
            db.execute(
                "INSERT INTO leases (session, owner, pid, host, expires) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(session) DO UPDATE SET "
                "owner = excluded.owner, pid = excluded.pid, host = excluded.host, "
                "expires = excluded.expires",
                (self.sid, self.owner, os.getpid(), self.host, now + self.seconds),
            )
        self._renewed = now
        return self

    def renew(self) -> None:
        """Push the expiry out again (not more often than a tenth of the lease)."""
        now = time.time()
        if now - self._renewed < self.seconds / 10:
            return
        with self.store.atomic() as db:
            db.execute(
                "UPDATE leases SET expires = ? WHERE session = ? AND owner = ?",
                (now + self.seconds, self.sid, self.owner),
            )
        self._renewed = now

    def release(self) -> None:
        with self.store.atomic() as db:
            db.execute("DELETE FROM leases WHERE session = ? AND owner = ?", (self.sid, self.owner))

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lease_live(store: Store, sid: str) -> bool:
    """Whether some process holds an unexpired lease on ``sid``."""
    rows = store.read("SELECT pid, host, expires FROM leases WHERE session = ?", (sid,))
    if not rows:
        return False
    pid, host, expires = rows[0]
    return expires > time.time() and _alive(pid, host, socket.gethostname())


def _alive(pid: int, host: str, this_host: str) -> bool:
    if host != this_host:
        return True  # cannot check another machine's processes: trust the expiry
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
