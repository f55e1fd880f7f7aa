"""What this process derives from a session's log, kept by one owner, read once.

``read(store, sid)`` is how an operation (a take, a request, an eviction, a
``/context`` report) reads a session: one ``Read`` holding, as of one moment
of the log, the context (``State``), the exports, edits and takes
(``TakeLog``) and the request events (``RequestLog``). The operation passes
those values down; nothing below it asks the store again for what it read.

Each session's views live in one ``Derived`` (in ``Store.derived``), with
one invalidation rule: they are current while the session's *probe* (its last
seq, its head turn and that turn's status) is what it was. The probe is read
again only when the store may have changed (``Store.version``: this
connection's row changes, any other's commits); then the events logged after
the last one seen are read once, in one query, and each view takes what is
new to it. A take, an eviction or a move recomputes the state from the
session's rows; the first read of a session reads each view with its own
query. A rolled-back transaction drops every view (``Store.forget``).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from nodecode.context import model
from nodecode.context.arrange import Arranged
from nodecode.context.message import Message
from nodecode.context.model import State
from nodecode.context.takelog import TakeLog
from nodecode.log import turns as turn_tree
from nodecode.log.store import Event, Store, unpack_payload

# A budget warning notice begins so (budget.evict writes it; the request log
# finds the newest one, which decides whether a warning stands).
WARNING_MARK = "[context at "

Probe = tuple[int, int | None, str | None]  # (last seq, head, head turn's status)
HELD = 64  # requests a session's log holds before it forgets those a first read would not


def is_rejection(payload: dict[str, Any]) -> bool:
    """Whether an ``error`` event records a request rejected as too large with the
    size the provider named and ours (``budget.evict`` logs it so; calibration reads it)."""
    return isinstance(payload.get("prompt"), int) and isinstance(payload.get("counted"), int)


@dataclass
class RequestLog:
    """One session's request events: the newest, each turn's (by seq), and the
    budget warning in force. A first read loads only what a request needs (the
    requests from the newest budget warning or the newest request on, and the
    head turn's): ``since`` is the seq from which every request is here, and
    older ones are read from the store when asked for (rarely: an undo to an
    old turn, a calibration behind requests that reported no usage). The
    requests rejected as too large (few) are all here, in ``rejections``."""

    store: Store
    sid: str
    since: int = 0  # every request with seq >= since is held (0: all of them)
    seqs: list[int] = field(default_factory=list)  # the requests held, ascending
    payloads: list[Any] = field(default_factory=list)  # each one's payload: dict, or packed
    by_turn: dict[int, list[int]] = field(default_factory=dict)  # held, by turn
    whole: set[int] = field(default_factory=set)  # turns all of whose requests are held
    warning: int | None = None  # seq of the newest budget warning notice
    rejections: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (seq, payload)
    memo: dict[Any, Any] = field(default_factory=dict)  # what readers computed of it

    def add(self, e: Event) -> None:
        if e.kind == "request":
            self._add(e.seq, e.turn, e.payload)
        elif e.kind == "notice" and e.text.startswith(WARNING_MARK):
            self.warning = e.seq
        elif e.kind == "error" and is_rejection(e.payload):
            self.rejections.append((e.seq, e.payload))

    def _add(self, seq: int, turn: int | None, payload: Any) -> None:
        self.seqs.append(seq)
        self.payloads.append(payload)
        if turn is not None:
            self.by_turn.setdefault(turn, []).append(seq)

    def trim(self, head: int | None) -> None:
        """Forget the requests a first read would not hold: those older than the
        newest request, the newest budget warning and the head turn's requests.
        A host asks for hundreds of turns, and each request held its payload for
        the process's life. Done only past ``HELD`` requests, so rarely."""
        if len(self.seqs) <= HELD:
            return
        cut = min([self.seqs[-1], *(self.by_turn.get(head, ()) if head is not None else ())])
        if self.warning is not None:
            cut = min(cut, self.warning)
        first = bisect.bisect_left(self.seqs, cut)
        if first == 0:
            return
        self.whole = {t for t in self.whole if min(self.by_turn.get(t, (cut,))) >= cut}
        self.seqs, self.payloads = self.seqs[first:], self.payloads[first:]
        self.by_turn = {
            t: kept for t, seqs in self.by_turn.items() if (kept := [s for s in seqs if s >= cut])
        }
        self.since = max(self.since, cut)

    def payload(self, k: int) -> dict[str, Any]:
        """The ``k``-th held request's payload (decoded at its first read)."""
        value = self.payloads[k]
        if isinstance(value, bytes):
            value = self.payloads[k] = unpack_payload(value)
        return value if isinstance(value, dict) else {}

    @property
    def last(self) -> tuple[int, dict[str, Any]] | None:
        """(seq, payload) of the newest request."""
        return (self.seqs[-1], self.payload(len(self.seqs) - 1)) if self.seqs else None

    def newest_first(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(seq, payload) of each request, newest first, decoded as they are reached
        (those before ``since`` read from the store, a few at a time)."""
        for k in range(len(self.seqs) - 1, -1, -1):
            yield self.seqs[k], self.payload(k)
        below = self.since
        while below > 0:
            rows = self.store.read(
                "SELECT seq, payload FROM events WHERE session = ? AND kind = 'request' "
                "AND seq < ? ORDER BY seq DESC LIMIT 8",
                (self.sid, below),
            )
            for seq, packed in rows:
                yield seq, unpack_payload(packed) if packed is not None else {}
            if len(rows) < 8:
                return
            below = rows[-1][0]

    def of_turn(self, turn: turn_tree.Turn) -> list[int]:
        """The seqs of ``turn``'s request events, ascending."""
        own = turn.session == self.sid
        if own and (turn.number in self.whole or turn.first_seq >= self.since):
            return list(self.by_turn.get(turn.number, ()))
        return [
            r[0]
            for r in self.store.read(
                "SELECT seq FROM events WHERE session = ? AND turn = ? AND kind = 'request' "
                "ORDER BY seq",
                (turn.session, turn.number),
            )
        ]

    def after_warning(self) -> list[dict[str, Any]]:
        """The payloads of the requests sent after the newest budget warning (held:
        a first read loads from the warning on)."""
        if self.warning is None:
            return []
        out = []
        for k in range(len(self.seqs) - 1, -1, -1):
            if self.seqs[k] < self.warning:
                break
            out.append(self.payload(k))
        return out[::-1]


@dataclass
class Derived:
    """Everything derived from one session's log in this process (see the module)."""

    sid: str
    version: tuple[int, int] | None = None  # the store's, when the probe was read
    probe: Probe | None = None
    computed: model.Computed | None = None
    takes: TakeLog = field(default_factory=TakeLog)
    requests: RequestLog | None = None
    # What requests keep between them: the previous request's arrangement, and the
    # sent list of its request event with its hash open to extend (``context.sent``).
    arranged: Arranged | None = None
    sent: tuple[int, list[tuple[int, str]], Any] | None = None
    sent_hash: tuple[Any, Any] | None = None


@dataclass
class Read:
    """One session's log as of one moment, read once for one operation. ``state``
    is the caller's to change; ``takes`` and ``requests`` are shared: read them."""

    store: Store
    sid: str
    seq: int  # the session's last seq
    head: int | None
    head_status: str | None  # the head turn's status, when the turn is this session's
    state: State
    takes: TakeLog
    requests: RequestLog
    views: Derived  # what the operation keeps for the next one

    def running_requests(self) -> list[int]:
        """The seqs of the running (head) turn's request events, ascending."""
        turn = self.state.running
        if turn is None:
            return []
        if self.head_status is not None and turn in self.requests.whole:
            return list(self.requests.by_turn.get(turn, ()))
        info = turn_tree.get(self.store, self.sid, turn)
        return self.requests.of_turn(info) if info is not None else []


_LOCK = threading.Lock()


def views(store: Store, sid: str) -> Derived:
    """The session's owner of derived state (made empty at first use)."""
    found = store.derived.get(("session", sid))
    if found is None:
        with _LOCK:
            found = store.derived.setdefault(("session", sid), Derived(sid))
    return found


def read(store: Store, sid: str) -> Read:
    """The session as the log holds it now: read again only what changed."""
    with store.cache_lock:
        d = views(store, sid)
        version = store.version()  # first: what is read after it is at least this new
        if d.version != version or d.computed is None:
            with store.reading():
                probe = _probe(store, sid)
                if probe != d.probe or d.computed is None:
                    _advance(store, d, probe)
            d.version = version
        assert d.computed is not None and d.probe is not None and d.requests is not None
        last, head, status = d.probe
        state = model.copy(d.computed.state)
        return Read(store, sid, last, head, status, state, d.takes, d.requests, d)


def state(store: Store, sid: str) -> State:
    """The context as the log holds it now (a copy the caller may change), for a
    caller that needs nothing else of the session."""
    return read(store, sid).state


def build(store: Store, sid: str) -> list[Message]:
    """The messages the next request reads, in order."""
    return read(store, sid).state.messages


def _probe(store: Store, sid: str) -> Probe:
    """The session's last seq, head and the head turn's status, in one query."""
    rows = store.read(
        "SELECT COALESCE((SELECT MAX(seq) FROM events WHERE session = ?1), s.fork_seq, 0), "
        "s.head, (SELECT status FROM turns WHERE session = ?1 AND number = s.head) "
        "FROM sessions s WHERE s.id = ?1",
        (sid,),
    )
    if not rows:
        from nodecode.log import sessions

        sessions.get(store, sid)  # raises: the session does not exist
    last, head, status = rows[0]
    return int(last or 0), head, status


def _advance(store: Store, d: Derived, probe: Probe) -> None:
    """Bring ``d`` to ``probe``: the first time, each view from its own query;
    after that, from the events logged since, read once."""
    last, head, _ = probe
    sid = d.sid
    if d.computed is None or d.requests is None:
        d.takes = _takes(store, sid)
        d.requests = _requests(store, sid, head)
        d.computed = model.compute(store, sid, head, d.requests.of_turn)
    else:
        seen = d.probe[0] if d.probe is not None else 0
        new = store.events(sid, after=seen) if last > seen else []
        for e in new:
            store.known(e)
            if e.kind in _TAKE_KINDS:
                d.takes.add(e)
            if e.kind in _REQUEST_KINDS:
                d.requests.add(e)
        d.takes.seen = max(d.takes.seen, last)
        if head is not None and head not in d.requests.by_turn and _new_turn(new, head):
            d.requests.whole.add(head)  # a turn begun since: every request of it is here
        d.requests.trim(head)
        made = model.grow(store, sid, d.computed, head, new, d.requests.of_turn)
        if made is None:
            known = d.computed.state.path_messages
            made = model.compute(store, sid, head, d.requests.of_turn, known)
        d.computed = made
    d.probe = probe


def _new_turn(new: list[Event], head: int) -> bool:
    """Whether the turn ``head`` began among the events ``new`` (its ask is there)."""
    return any(e.turn == head and e.kind == "user" for e in new)


_TAKE_KINDS = frozenset(("export", "edit", "receipt", *model.TAKE_KINDS))
_REQUEST_KINDS = frozenset(("request", "notice", "error"))


def _takes(store: Store, sid: str) -> TakeLog:
    """The take log from the session's export, edit and take events."""
    log = TakeLog()
    kinds = tuple(sorted(_TAKE_KINDS))
    for e in store.events(sid, kinds=kinds, payload_of=("export", "edit")):
        log.add(e)
    return log


def _requests(store: Store, sid: str, head: int | None) -> RequestLog:
    """The request log of a first read, in one query: the requests from the newest
    budget warning or the newest request on (whichever is older), the warning,
    every request of the head turn, and the rejections as too large (of the
    session's few errors); requests' payloads kept packed until read."""
    rows = store.read(
        "WITH cut AS (SELECT MIN("
        "  COALESCE((SELECT MAX(seq) FROM events WHERE session = ?1 AND kind = 'request'), 0),"
        "  COALESCE((SELECT MAX(seq) FROM events WHERE session = ?1 AND kind = 'notice'"
        "            AND text LIKE ?2), 1 << 62)) AS seq) "
        "SELECT e.seq, e.turn, e.kind, e.payload, 1 FROM cut, events e "
        "INDEXED BY events_session_kind "
        "WHERE e.session = ?1 AND e.kind IN ('notice', 'request') AND e.seq >= cut.seq "
        "AND (e.kind = 'request' OR e.text LIKE ?2) "
        "UNION SELECT seq, turn, kind, payload, 0 FROM events INDEXED BY events_session_turn "
        "WHERE session = ?1 AND turn = ?3 AND kind = 'request' "
        "UNION SELECT seq, turn, kind, payload, 0 FROM events INDEXED BY events_session_kind "
        "WHERE session = ?1 AND kind = 'error' ORDER BY 1",
        (sid, WARNING_MARK + "%", head),
    )
    log = RequestLog(store, sid)
    ranged = [r[0] for r in rows if r[4]]
    log.since = min(ranged) if ranged else 0
    seen: set[int] = set()
    for seq, turn, kind, payload, _ in rows:
        if seq in seen:
            continue  # in both parts (the union keeps rows that differ in the flag)
        seen.add(seq)
        if kind == "request":
            log._add(seq, turn, payload)
        elif kind == "error":
            error = unpack_payload(payload) if payload is not None else {}
            if is_rejection(error):
                log.rejections.append((seq, error))
        else:
            log.warning = seq
    if head is not None:
        log.whole.add(head)
    return log
