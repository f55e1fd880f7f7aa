"""Sessions: ids, titles, the store's current session and each session's head."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

from nodecode.errors import SessionError
from nodecode.log.store import Store

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


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


@dataclass(frozen=True)
class Titled:
    """The newest title row of one source: its title (None: an automatic title
    that failed, ``failed`` saying why)."""

    title: str | None
    source: str
    failed: str | None = None


def add_title(
    store: Store,
    sid: str,
    title: str | None,
    source: str,
    *,
    model: str | None = None,
    tokens: int | None = None,
    cost: float | None = None,
    failed: str | None = None,
) -> None:
    """Log a title of ``sid`` (a rename: source 'user'; 'auto': the automatic one)."""
    get(store, sid)
    with store.atomic() as db:
        db.execute(
            "INSERT INTO titles (session, title, source, model, tokens, cost, failed, time)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, title, source, model, tokens, cost, failed, time.time()),
        )


def titles(store: Store, sid: str) -> dict[str, Titled]:
    """The newest title row of each source ('user', 'auto') the session has."""
    rows = store.read(
        "SELECT title, source, failed FROM titles WHERE session = ? ORDER BY id", (sid,)
    )
    return {source: Titled(title, source, failed) for title, source, failed in rows}
