"""Turns and the turn tree: numbering, the head, and the path from the root."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodecode.log import leases, sessions
from nodecode.log.store import Store


@dataclass(frozen=True)
class Turn:
    session: str
    number: int
    parent: int | None
    first_seq: int
    last_seq: int | None
    status: str


def _turn(row: tuple) -> Turn:
    return Turn(*row)


_COLS = "session, number, parent, first_seq, last_seq, status"


def turns(store: Store, sid: str) -> list[Turn]:
    """This session's own turns, by number."""
    return [
        _turn(r)
        for r in store.read(f"SELECT {_COLS} FROM turns WHERE session = ? ORDER BY number", (sid,))
    ]


def get(store: Store, sid: str, number: int) -> Turn | None:
    """A turn by number, resolved in the nearest ancestor that has it (forks)."""
    for owner in lineage(store, sid):
        rows = store.read(
            f"SELECT {_COLS} FROM turns WHERE session = ? AND number = ?", (owner, number)
        )
        if rows:
            return _turn(rows[0])
    return None


def ancestry(store: Store, sid: str) -> list[sessions.SessionInfo]:
    """The session and its ancestors, nearest first."""
    out = [sessions.get(store, sid)]
    while out[-1].parent is not None:
        out.append(sessions.get(store, out[-1].parent))
    return out


def lineage(store: Store, sid: str) -> list[str]:
    """The ids of the session and its ancestors, nearest first."""
    return [owner for owner, _ in scopes(store, sid)]


def scopes(store: Store, sid: str) -> list[tuple[str, int | None]]:
    """The session and its ancestors, nearest first, each with the last seq it lends
    (None: all): the one place that decides which ancestor events a fork sees.
    A session's parent and fork point never change once it exists, so they are read
    once per store connection (a state read asks three times)."""
    known = store.fact("scopes", 256)
    hit = known.get(sid)
    if hit is None:
        out: list[tuple[str, int | None]] = []
        upto: int | None = None
        for info in ancestry(store, sid):
            out.append((info.id, upto))
            upto = lower_limit(upto, info.fork_seq)
        hit = known.keep(sid, tuple(out))
    return list(hit)


def next_number(store: Store, sid: str, info: sessions.SessionInfo | None = None) -> int:
    """The number a new turn of ``sid`` gets (``info``: its session row, when read)."""
    info = info or sessions.get(store, sid)
    row = store.read("SELECT MAX(number) FROM turns WHERE session = ?", (sid,))[0]
    return max(row[0] or 0, info.fork_turn or 0) + 1


def begin(store: Store, sid: str, first_seq: int) -> Turn:
    """Open a new turn as a child of the head and make it the head."""
    with store.atomic() as db:
        info = sessions.get(store, sid)
        parent = info.head
        number = next_number(store, sid, info)
        db.execute(
            f"INSERT INTO turns ({_COLS}) VALUES (?, ?, ?, ?, NULL, 'running')",
            (sid, number, parent, first_seq),
        )
        sessions.set_head(store, sid, number)
    return Turn(sid, number, parent, first_seq, None, "running")


def finish(store: Store, sid: str, number: int, last_seq: int, status: str) -> None:
    with store.atomic() as db:
        db.execute(
            "UPDATE turns SET last_seq = ?, status = ? WHERE session = ? AND number = ?",
            (last_seq, status, sid, number),
        )


def path(store: Store, sid: str) -> list[Turn]:
    """The turns from the root to the session's head, oldest first."""
    head = sessions.get(store, sid).head
    known = _lineage_turns(store, sid)
    out: list[Turn] = []
    while head is not None and head in known:
        turn = known[head]
        out.append(turn)
        head = turn.parent
    return list(reversed(out))


def _lineage_turns(store: Store, sid: str) -> dict[int, Turn]:
    """Every turn visible from ``sid``: its own, then each ancestor's up to the fork."""
    known: dict[int, Turn] = {}
    for owner, limit in scopes(store, sid):
        for row in store.read(f"SELECT {_COLS} FROM turns WHERE session = ?", (owner,)):
            turn = _turn(row)
            if turn.number not in known and (limit is None or turn.first_seq <= limit):
                known[turn.number] = turn
    return known


def visible(store: Store, sid: str) -> dict[int, Turn]:
    """Every turn ``sid`` can see, by number: its own, then each ancestor's up to the fork."""
    return _lineage_turns(store, sid)


def lower_limit(limit: int | None, fork_seq: int | None) -> int | None:
    """The last seq an ancestor lends: a grandparent lends no more than the parent saw."""
    if fork_seq is None:
        return limit
    return fork_seq if limit is None else min(limit, fork_seq)


def recover(
    store: Store, settle: Callable[[str, int], dict[str, Any]] | None = None
) -> list[tuple[str, int]]:
    """Mark stopped every turn left running by a process that died (killed, or
    its machine went down): a ``stopped`` event is appended, nothing rewritten.
    ``settle(sid, number)`` gives that event's payload: what the turn changed
    that no event recorded (a shell command killed with it)."""
    done = []
    rows = store.read("SELECT session, number FROM turns WHERE status = 'running'")
    for sid, number in rows:
        if leases.lease_live(store, sid):
            continue
        extra = settle(sid, number) if settle is not None else {}
        with store.atomic() as db:
            still = db.execute(
                "SELECT 1 FROM turns WHERE session = ? AND number = ? AND status = 'running'",
                (sid, number),
            ).fetchone()
            if still is None or leases.lease_live(store, sid):
                continue  # another process recovered it, or took the session, meanwhile
            event = store.append(
                sid,
                "stopped",
                turn=number,
                text="interrupted: the process running this turn ended",
                payload=extra or None,
            )
            finish(store, sid, number, event.seq, "stopped")
            done.append((sid, number))
    return done
