"""The context: the ordered messages the next request reads.

This is the one place that computes it. The log on the head's path gives the
messages; a *snapshot* event (a take of edits, an eviction, a fork) records
the order at that moment, with rewritten texts as blobs: whole, or as a delta
against an earlier snapshot (at most SNAPSHOT_CHAIN deep, so a take stores
what it changed and reading one never walks every take). The context is
the latest snapshot on the path, in path order, followed by every message
logged after it. Path order is (position of the event's turn on the path,
seq): changes made while a turn was the head belong to that turn, so undoing
the turn undoes them too.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from nodecode.errors import StoreError
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.log.store import Event, Store, unpack_payload

SNAPSHOT_KINDS = ("receipt", "evict", "fork")
SNAPSHOT_CHAIN = 16  # a snapshot is whole when its delta would be this many deep
TAKE_KINDS = ("evict", "move", "fork")  # every one is a take; a receipt only when taken


class _once:
    """``functools.cached_property`` without the lock Python 3.11 takes at every first
    read (a new App reads 2,000 digests): a message is immutable, so two threads
    reading at once compute the same value."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.name = fn, fn.__name__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


@dataclass(frozen=True)
class Message:
    """One block of the context. ``id`` is the seq of the event that made it."""

    id: int
    role: str
    text: str
    turn: int | None = None
    payload: dict[str, Any] = field(default_factory=dict, compare=False)
    rewritten: bool = False
    restored: bool = False

    @property
    def call_id(self) -> int | None:
        """For a ``tool`` result, the seq of its call."""
        return self.payload.get("call") if self.role == "tool" else None

    @_once
    def digest(self) -> str:
        """A short hash of what the model reads of this message (computed once; a
        message made of the same id, role and text as one this process hashed
        before, in any App, is looked up instead)."""
        role = self.role
        key: tuple | None = (self.id, role, self.text)
        if role == "call" or role == "thinking":  # hashed with their payload: known by
            packed = self.__dict__.get("_nc_packed")  # its stored bytes, when read
            key = (*key, packed) if packed is not None else None  # from a row
        if key is not None:
            hit = _DIGESTS.get(key)
            if hit is not None:
                return hit
        value = self._hash()
        if key is not None:
            if len(_DIGESTS) >= MAX_DIGESTS:
                _DIGESTS.clear()
            _DIGESTS[key] = value
        return value

    def _hash(self) -> str:
        h = hashlib.sha256()
        h.update(f"{self.id}\0{self.role}\0".encode())
        h.update(self.text.encode("utf-8", "surrogatepass"))
        if self.role == "call":
            h.update(repr((self.payload.get("name"), self.payload.get("input"))).encode())
        elif self.role == "thinking":  # sent as the block it arrived as, fields and signature
            h.update(json.dumps(self.payload.get("block"), sort_keys=True).encode())
        return h.hexdigest()[:16]


# Digests for the process by (id, role, text): a new App on a store this process
# has read reads thousands of messages, and a dict lookup of text already in
# memory costs a fifth of hashing it (the texts are those the request blocks
# kept in context.request hold). Calls and thinking are hashed with their payload,
# and looked up with the payload's stored bytes when the message was read from a row
# (the same bytes decode to the same payload; a message made otherwise is hashed).
_DIGESTS: dict[tuple, str] = {}
MAX_DIGESTS = 100_000


def message_of(event: Event) -> Message:
    """The message an event logged, its fields set directly (see ``store._event``)."""
    m = object.__new__(Message)
    m.__dict__.update(
        id=event.seq,
        role=event.role or event.kind,
        text=event.text,
        turn=event.turn,
        payload=event.payload,
        rewritten=False,
        restored=False,
    )
    return m


_ODD_CALL = re.compile(r"\(([^\s()]+) (.*)\)", re.DOTALL)


def rewritten(m: Message, text: str, **flags: bool) -> Message:
    """``m`` with ``text`` as its rewritten body. A call's name and input follow
    the text, because the file shows a call as its text and whatever the file
    shows is what the model reads."""
    payload = m.payload
    if m.role == "call":
        payload = {**payload, **_call_of(text, payload.get("name", "eval"))}
    return Message(m.id, m.role, text, m.turn, payload, rewritten=True, **flags)


def _call_of(text: str, name: str) -> dict[str, Any]:
    """The name and input a call's text stands for: an ``eval`` cell, or the
    ``(NAME {JSON})`` form a call of another tool is shown as (see
    ``agent.call_text``); any other text is read as a cell."""
    odd = _ODD_CALL.fullmatch(text) if name != "eval" else None
    try:
        value = json.loads(odd.group(2)) if odd else None
    except ValueError:
        value = None
    if isinstance(value, dict):
        return {"name": odd.group(1), "input": value}
    return {"name": "eval", "input": {"code": text}}


@dataclass
class State:
    """The context and what it was computed from."""

    messages: list[Message]
    path_messages: dict[int, Message]  # every message on the head's path, by id
    key: dict[int, tuple[int, int]]  # path order of each message id
    running: int | None  # the turn whose ask and newest round are never dropped
    newest: set[int] = field(default_factory=set)  # that ask + newest round
    snapshot: tuple[str, int] | None = None  # (session, seq) of the snapshot it starts from

    def removed(self) -> list[Message]:
        """Path messages not in the context (deleted or evicted): restorable."""
        present = {m.id for m in self.messages}
        return [m for i, m in sorted(self.path_messages.items()) if i not in present]


def build(store: Store, sid: str) -> list[Message]:
    """The messages the next request reads, in order."""
    return state(store, sid).messages


def state(store: Store, sid: str) -> State:
    """The context, reusing the last computation when the log only grew since
    (new messages on the same path); any take, eviction or move recomputes.
    Threads share the cache (the host's loop and job threads): it is read and
    filled under the store's cache lock."""
    with store.cache_lock:
        return _state(store, sid)


@dataclass
class _Cached:
    """A computed state and what growing it needs: the path's turn positions and
    the running turn's own messages, as of seq ``seen`` and store ``version``."""

    seen: int
    head: int | None
    state: State
    index: dict[int, int]  # turn number → position on the path
    own: list[int]  # ids of the running turn's messages, ascending
    version: tuple[int, int]


def _state(store: Store, sid: str) -> State:
    cache: dict = store.cache.setdefault("context", {})
    hit = cache.get(sid)
    version = store.version()  # first: what is read after it is at least this new
    if hit is not None and hit.version == version:
        return _copy(hit.state)  # nothing was written anywhere since
    with store.reading():  # what is read below is the log as of ``top``, and no later
        top = store.last_seq(sid)
        info = sessions.get(store, sid)
        made = _grow(store, sid, hit, info.head) if hit is not None and top >= hit.seen else None
        if made is None:
            made = _compute(store, sid, info.head, hit.state.path_messages if hit else {})
    made.seen, made.version = top, version
    cache[sid] = made
    return _copy(made.state)


def _copy(st: State) -> State:
    return replace(
        st,
        messages=list(st.messages),
        path_messages=dict(st.path_messages),
        key=dict(st.key),
        newest=set(st.newest),
    )


def _grow(store: Store, sid: str, hit: _Cached, head: int | None) -> _Cached | None:
    """``hit`` plus what was logged after it, or None if that needs a recompute. The
    path is the cached one, or it with a new head turn on the old (a new turn)."""
    new = store.events(sid, after=hit.seen)
    if any(e.kind in SNAPSHOT_KINDS or e.kind == "move" for e in new):
        return None
    turn = turn_tree.get(store, sid, head) if head is not None else None
    if (head is None) != (turn is None):
        return None
    index, own = hit.index, hit.own
    if head != hit.head:
        if turn is None or turn.parent != hit.head or head in index:
            return None
        index = {**index, head: len(index)}
        own = []
    st = _copy(hit.state)
    own = list(own)
    for e in new:
        if e.role is None or (e.turn is not None and e.turn not in index):
            continue
        m = message_of(e)
        st.messages.append(m)
        st.path_messages[m.id] = m
        st.key[m.id] = (index.get(e.turn, -1), e.seq)
        if head is not None and e.turn == head:
            own.append(m.id)
    st.running = head
    st.newest = newest_round(store, sid, turn, st.path_messages, own)
    return _Cached(hit.seen, head, st, index, own, hit.version)


def _compute(
    store: Store, sid: str, head: int | None, known: dict[int, Message] | None = None
) -> _Cached:
    """The state from the log. ``known`` is the previous computation's path
    messages: one of the same event is reused, with its digest and token counts
    (a take recomputes the state, and hashing 2,000 messages again was most of
    counting the context after it)."""
    path = turn_tree.path(store, sid)
    index = {t.number: i for i, t in enumerate(path)}
    listed = _path_messages(store, sid, path)
    if known:
        listed = [_reused(known.get(m.id), m) for m in listed]
    keys = [(index.get(m.turn, -1), m.id) for m in listed]
    key = {k[1]: k for k in keys}
    messages = {m.id: m for m in listed}
    # Read in seq order, which is path order unless a turn logged after a later one:
    # then (and only then) sorted.
    if not all(map(operator.lt, keys, islice(keys, 1, None))):
        listed = sorted(messages.values(), key=lambda m: key[m.id])
    order: list[Message] = []
    snap = _latest_snapshot(store, sid, path, index)
    if snap is not None:
        after = snap[2]
        order = _from_snapshot(store, decoded(store, snap[0], snap[1]), messages)
        order += [m for m in listed if key[m.id] > after]
    else:  # every key is above (-2, 0): all of them follow
        order += listed
    running = path[-1].number if path else None
    own = sorted(i for i, m in messages.items() if m.turn == running) if path else []
    st = State(order, messages, key, running, snapshot=snap[:2] if snap else None)
    st.newest = newest_round(store, sid, path[-1] if path else None, messages, own)
    return _Cached(0, head, st, index, own, (0, 0))


def _reused(m: Message | None, read: Message) -> Message:
    """``m`` when it is the message just ``read`` from the log (ids are seqs and
    events never change, so the text and role only guard the case that could
    differ): it keeps its digest and token counts."""
    if m is None or m.rewritten or m.restored or m.turn != read.turn:
        return read
    return m if m.text == read.text and m.role == read.role else read


def _path_messages(store: Store, sid: str, path: list[turn_tree.Turn]) -> list[Message]:
    """Messages of the path's turns, this session's and its ancestors' (each
    ancestor's only up to the fork point below it), in seq order per session."""
    numbers: list[int] | None = [t.number for t in path]
    scopes = turn_tree.scopes(store, sid)
    if scopes == [(sid, None)] and len(path) == _turn_count(store, sid):
        numbers = None  # every turn is on the path (nothing undone): no filter to test
    messages: list[Message] = []
    for owner, upto in scopes:
        rows = store.message_rows(owner, numbers, upto=upto, turnless=owner == sid)
        messages += [_message_of_row(r) for r in rows]
    return messages


def _message_of_row(row: tuple) -> Message:
    """The message a (seq, role, turn, text, packed payload) row logged, made as
    ``message_of`` makes it, without the Event between; the very object made of
    the same row before, in any App of the process (see ``_ROWS``)."""
    hit = _ROWS.get(row)
    if hit is not None:
        return hit
    m = object.__new__(Message)
    m.__dict__.update(
        id=row[0],
        role=row[1],
        text=row[3],
        turn=row[2],
        rewritten=False,
        restored=False,
    )
    if row[4] is None:
        m.__dict__["payload"] = {}
    else:  # decoded when read (see _Payload); a call's digest's key (see Message.digest)
        m.__dict__["_nc_packed"] = row[4]
    if len(_ROWS) >= MAX_ROWS:
        _ROWS.clear()
    _ROWS[row] = m
    return m


# Messages for the process by the row they were read from: a message is immutable
# and all that is kept on it (digest, token counts, encoded blocks, prefix hashes)
# is made of its id, role, turn, text and payload, which the row is. An App opening
# a store this process has read (a host's App for a second directory, a state read
# again after a take) gets the objects with all of that already made.
_ROWS: dict[tuple, Message] = {}
MAX_ROWS = 20_000  # ten sessions of 2,000 messages; each holds its text and blocks


class _Payload:
    """``Message.payload`` of a message read from a row: its stored bytes, decoded at
    the first read and kept. Most are never read on the way to a request (a call's
    block and digest are found by those bytes); a message made by ``Message(...)``
    holds its payload in its ``__dict__``, which this never shadows."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        try:
            packed = obj.__dict__["_nc_packed"]
        except KeyError:
            raise AttributeError("payload") from None
        value = obj.__dict__["payload"] = unpack_payload(packed)
        return value


Message.payload = _Payload()  # type: ignore[assignment]  # after the dataclass is made


def _turn_count(store: Store, sid: str) -> int:
    return store.read("SELECT COUNT(*) FROM turns WHERE session = ?", (sid,))[0][0]


def _latest_snapshot(
    store: Store, sid: str, path: list[turn_tree.Turn], index: dict[int, int]
) -> tuple[str, int, tuple[int, int]] | None:
    """(session, seq, path order) of the path's latest snapshot. Only its row is
    decoded: a session's takes are many and the others are not read."""
    numbers = [t.number for t in path]
    marks = ",".join("?" * len(numbers)) or "NULL"
    found: list[tuple[tuple[int, int], str, int]] = []
    for owner, upto in turn_tree.scopes(store, sid):
        rows = store.read(
            f"SELECT seq, turn FROM events WHERE session = ? AND seq <= ? "
            f"AND kind IN ({','.join('?' * len(SNAPSHOT_KINDS))}) AND (turn IN ({marks})"
            + (" OR turn IS NULL" if owner == sid else "")
            + ")",
            (owner, upto if upto is not None else 2**62, *SNAPSHOT_KINDS, *numbers),
        )
        found += [((index.get(turn, -1), seq), owner, seq) for seq, turn in rows]
    for k, owner, seq in sorted(found, reverse=True):
        event = store.event(owner, seq)
        if event is not None and "context" in event.payload:  # a refusal records none
            return owner, seq, k
    return None


_TEXT_CACHE: dict[str, str] = {}


def blob_text(store: Store, digest: str) -> str:
    """A rewritten text, from its blob (kept once read: blobs never change)."""
    text = _TEXT_CACHE.get(digest)
    if text is None:
        raw = store.blob(digest)
        text = raw.decode("utf-8") if raw is not None else ""
        _TEXT_CACHE[digest] = text
    return text


def _from_snapshot(store: Store, snap: Snap, messages: dict[int, Message]) -> list[Message]:
    out = []
    for i in snap.order:
        m = messages.get(i)
        if m is None:
            continue
        if i in snap.texts:
            m = rewritten(m, blob_text(store, snap.texts[i]), restored=i in snap.restored)
        elif i in snap.restored:
            m = Message(m.id, m.role, m.text, m.turn, m.payload, restored=True)
        out.append(m)
    return out


# -- snapshots: whole or a delta --------------------------------------------------


@dataclass(frozen=True)
class Snap:
    """A snapshot decoded: the ids in order, rewritten texts' blobs, restored ids."""

    order: list[int]
    texts: dict[int, str]
    restored: frozenset[int]
    depth: int = 0  # deltas between it and a whole snapshot


def decode(store: Store, context: dict[str, Any]) -> Snap:
    """The snapshot a "context" payload records (whole, or a delta against the
    snapshot at ``after``: copied runs of its order and literal ids, then the
    texts and restored marks that changed)."""
    if context.get("after") is None:
        texts = {i: h for i, h in context.get("texts", [])}
        return Snap(list(context["order"]), texts, frozenset(context.get("restored", [])))
    base = decoded(store, *context["after"])
    order: list[int] = []
    for run in context["runs"]:
        if isinstance(run, list):
            order += base.order[run[0] : run[0] + run[1]]
        else:
            order.append(run)
    present = set(order)
    plain = set(context.get("plain", []))
    texts = {i: h for i, h in base.texts.items() if i in present and i not in plain}
    texts.update((i, h) for i, h in context.get("texts", []))
    gone = set(context.get("unrestored", []))
    restored = {i for i in base.restored if i in present and i not in gone}
    restored |= set(context.get("restored", []))
    return Snap(order, texts, frozenset(restored), base.depth + 1)


def decoded(store: Store, session: str, seq: int) -> Snap:
    """The snapshot recorded by event ``seq`` of ``session`` (kept once decoded:
    events never change)."""
    cache: dict = store.cache.setdefault("snapshots", {})
    hit = cache.get((session, seq))
    if hit is not None:
        return hit
    event = store.event(session, seq)
    if event is None or "context" not in event.payload:
        raise StoreError(f"store {store.path}: no snapshot at seq {seq} of session {session}")
    snap = decode(store, event.payload["context"])
    if len(cache) > 4 * SNAPSHOT_CHAIN:
        cache.clear()
    cache[(session, seq)] = snap
    return snap


def whole(snap: Snap) -> dict[str, Any]:
    """A decoded snapshot as a whole one is recorded (what recall shows)."""
    return {
        "order": list(snap.order),
        "texts": [[i, snap.texts[i]] for i in snap.order if i in snap.texts],
        "restored": [i for i in snap.order if i in snap.restored],
    }


def newest_round(
    store: Store,
    sid: str,
    turn: turn_tree.Turn | None,
    messages: dict[int, Message],
    own: list[int] | None = None,
) -> set[int]:
    """The ask of ``turn`` and the messages after its last request (its newest round);
    ``own``, when known, is the ids of ``turn``'s messages, ascending."""
    if turn is None:
        return set()
    if own is None:
        own = sorted(i for i, m in messages.items() if m.turn == turn.number)
    ask = next((i for i in own if messages[i].role == "user"), None)
    rows = store.read(
        "SELECT MAX(seq) FROM events WHERE session = ? AND turn = ? AND kind = 'request'",
        (turn.session, turn.number),
    )
    last_request = rows[0][0]
    keep = {ask} if ask is not None else set()
    if last_request is None:
        return keep
    if turn.status != "running":  # a finished turn: its last round is the newest
        prev = store.read(
            "SELECT seq FROM events WHERE session = ? AND turn = ? AND "
            "kind = 'request' ORDER BY seq DESC LIMIT 1 OFFSET 1",
            (turn.session, turn.number),
        )
        last_request = prev[0][0] if prev else ask or last_request
    return keep | {i for i in own if i > last_request}


def snapshot(store: Store, order: list[Message], base: State | None = None) -> dict[str, Any]:
    """The payload that records ``order`` as the context (put it under "context"
    in a snapshot event: receipt, evict or fork); rewritten texts go to blobs.
    With ``base`` (the state ``order`` was made from), a delta against the
    snapshot that state starts from, unless that chain is long enough."""
    texts = {m.id: _digest(m.text) for m in order if m.rewritten}
    restored = {m.id for m in order if m.restored}
    prev = decoded(store, *base.snapshot) if base is not None and base.snapshot else None
    if prev is None or prev.depth + 1 >= SNAPSHOT_CHAIN:
        for m in order:
            if m.rewritten:
                store.put_blob(m.text.encode("utf-8", "surrogatepass"))
        return {
            "order": [m.id for m in order],
            "texts": [[m.id, texts[m.id]] for m in order if m.rewritten],
            "restored": [m.id for m in order if m.restored],
        }
    present = {m.id for m in order}
    had = {i: h for i, h in prev.texts.items() if i in present}
    changed = [m for m in order if m.rewritten and had.get(m.id) != texts[m.id]]
    for m in changed:
        store.put_blob(m.text.encode("utf-8", "surrogatepass"))
    was = {i for i in prev.restored if i in present}
    out: dict[str, Any] = {"after": list(base.snapshot), "runs": _runs(order, prev.order)}
    for name, value in (
        ("texts", [[m.id, texts[m.id]] for m in changed]),
        ("plain", sorted(i for i in had if i not in texts)),
        ("restored", sorted(restored - was)),
        ("unrestored", sorted(was - restored)),
    ):
        if value:
            out[name] = value
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _runs(order: list[Message], base: list[int]) -> list[Any]:
    """``order``'s ids as copied runs ``[start, count]`` of ``base`` and literal ids."""
    at = {i: k for k, i in enumerate(base)}
    runs: list[Any] = []
    for m in order:
        k = at.get(m.id)
        if k is None:
            runs.append(m.id)
        elif runs and isinstance(runs[-1], list) and sum(runs[-1]) == k:
            runs[-1][1] += 1
        else:
            runs.append([k, 1])
    return runs


def take_count(store: Store, sid: str) -> int:
    """How many takes this session has had: edits taken, evictions, tree moves, forks."""
    rows = store.read(
        f"SELECT COUNT(*) FROM events WHERE session = ? AND (kind IN ({', '.join('?' * 3)}) "
        "OR (kind = 'receipt' AND text LIKE ?))",
        (sid, *TAKE_KINDS, "%\ntaken at seq %"),
    )
    return rows[0][0]
