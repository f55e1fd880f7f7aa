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
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from nodecode.bounded import Bounded
from nodecode.context.message import Message, message_of, of_row, rewritten
from nodecode.errors import StoreError
from nodecode.log import turns as turn_tree
from nodecode.log.store import Event, Store

SNAPSHOT_KINDS = ("receipt", "evict", "fork")
SNAPSHOT_CHAIN = 16  # a snapshot is whole when its delta would be this many deep
TAKE_KINDS = ("evict", "move", "fork")  # every one is a take; a receipt only when taken


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


@dataclass
class Computed:
    """A computed state and what growing it needs: the path's turn positions and
    the running turn's own messages."""

    head: int | None
    state: State
    index: dict[int, int]  # turn number → position on the path
    own: list[int]  # ids of the running turn's messages, ascending


def copy(st: State) -> State:
    return replace(
        st,
        messages=list(st.messages),
        path_messages=dict(st.path_messages),
        key=dict(st.key),
        newest=set(st.newest),
    )


def grow(
    store: Store,
    sid: str,
    hit: Computed,
    head: int | None,
    new: list[Event],
    requests: Callable[[turn_tree.Turn], list[int]],
) -> Computed | None:
    """``hit`` plus the events ``new`` logged after it, or None if that needs a
    recompute. The path is the cached one, or it with a new head turn on the old
    (a new turn). ``requests`` gives a turn's request seqs."""
    if any(e.kind in SNAPSHOT_KINDS or e.kind == "move" for e in new):
        return None
    turn = turn_tree.get(store, sid, head) if head is not None else None
    if (head is None) != (turn is None):
        return None
    index, own = hit.index, hit.own
    if head != hit.head:
        if turn is None or turn.parent != hit.head or turn.number in index:
            return None
        index = {**index, turn.number: len(index)}
        own = []
    st = copy(hit.state)
    own = list(own)
    for e in new:
        if e.role is None or (e.turn is not None and e.turn not in index):
            continue
        m = message_of(e)
        st.messages.append(m)
        st.path_messages[m.id] = m
        st.key[m.id] = (_position(index, e.turn), e.seq)
        if head is not None and e.turn == head:
            own.append(m.id)
    st.running = head
    st.newest = newest_round(turn, st.path_messages, own, requests)
    return Computed(head, st, index, own)


def _position(index: dict[int, int], turn: int | None) -> int:
    """Where ``turn`` sits on the path (``index``); -1, before every turn, for a
    message logged outside any turn or on a turn off the path."""
    return index.get(turn, -1) if turn is not None else -1


def compute(
    store: Store,
    sid: str,
    head: int | None,
    requests: Callable[[turn_tree.Turn], list[int]],
    known: dict[int, Message] | None = None,
) -> Computed:
    """The state from the log. ``known`` is the previous computation's path
    messages: one of the same event is reused, with its digest and token counts
    (a take recomputes the state, and hashing 2,000 messages again was most of
    counting the context after it)."""
    path = turn_tree.path(store, sid)
    index = {t.number: i for i, t in enumerate(path)}
    listed = _path_messages(store, sid, path)
    if known:
        listed = [_reused(known.get(m.id), m) for m in listed]
    keys = [(_position(index, m.turn), m.id) for m in listed]
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
    st.newest = newest_round(path[-1] if path else None, messages, own, requests)
    return Computed(head, st, index, own)


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
        messages += [of_row(r) for r in rows]
    return messages


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


# Rewritten texts by blob digest, for the process (blobs never change): a state read
# again after a take finds the texts of the snapshot it starts from.
_TEXT_CACHE = Bounded(16_000_000, weigh=len)  # characters


def blob_text(store: Store, digest: str) -> str:
    """A rewritten text, from its blob (kept once read: blobs never change)."""
    text = _TEXT_CACHE.get(digest)
    if text is None:
        raw = store.blob(digest)
        text = raw.decode("utf-8") if raw is not None else ""
        _TEXT_CACHE.keep(digest, text)
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
    cache = store.fact("snapshots", 4 * SNAPSHOT_CHAIN)
    hit = cache.get((session, seq))
    if hit is not None:
        return hit
    event = store.event(session, seq)
    if event is None or "context" not in event.payload:
        raise StoreError(f"store {store.path}: no snapshot at seq {seq} of session {session}")
    return cache.keep((session, seq), decode(store, event.payload["context"]))


def whole(snap: Snap) -> dict[str, Any]:
    """A decoded snapshot as a whole one is recorded (what recall shows)."""
    return {
        "order": list(snap.order),
        "texts": [[i, snap.texts[i]] for i in snap.order if i in snap.texts],
        "restored": [i for i in snap.order if i in snap.restored],
    }


def newest_round(
    turn: turn_tree.Turn | None,
    messages: dict[int, Message],
    own: list[int] | None,
    requests: Callable[[turn_tree.Turn], list[int]],
) -> set[int]:
    """The ask of ``turn`` and the messages after its last request (its newest round);
    ``own``, when known, is the ids of ``turn``'s messages, ascending; ``requests``
    gives the seqs of a turn's request events, ascending."""
    if turn is None:
        return set()
    if own is None:
        own = sorted(i for i, m in messages.items() if m.turn == turn.number)
    ask = next((i for i in own if messages[i].role == "user"), None)
    seqs = requests(turn)
    keep = {ask} if ask is not None else set()
    if not seqs:
        return keep
    last_request = seqs[-1]
    if turn.status != "running":  # a finished turn: its last round is the newest
        last_request = seqs[-2] if len(seqs) > 1 else ask or last_request
    return keep | {i for i in own if i > last_request}


def snapshot(store: Store, order: list[Message], base: State | None = None) -> dict[str, Any]:
    """The payload that records ``order`` as the context (put it under "context"
    in a snapshot event: receipt, evict or fork); rewritten texts go to blobs.
    With ``base`` (the state ``order`` was made from), a delta against the
    snapshot that state starts from, unless that chain is long enough."""
    texts = {m.id: _digest(m.text) for m in order if m.rewritten}
    restored = {m.id for m in order if m.restored}
    after = base.snapshot if base is not None else None  # what a delta is made against
    prev = decoded(store, *after) if after is not None else None
    if after is None or prev is None or prev.depth + 1 >= SNAPSHOT_CHAIN:
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
    out: dict[str, Any] = {"after": list(after), "runs": _runs(order, prev.order)}
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
