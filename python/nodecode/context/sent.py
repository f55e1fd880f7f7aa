"""What a request event records about the messages it sent: a delta from the one before.

SPEC §8: a request event records the ids and hashes of the messages sent. Each
request shares most of them with the previous request, so an event stores only
``{"after": SEQ, "keep": K, "add": [[id, digest], …]}``: the first K of the
request at seq SEQ, then the added pairs. Storage stays proportional to what
changed, and ``sent_of`` rebuilds any request's whole list. Events written
before this format keep their whole ``sent`` list and are read as they are.
"""

from __future__ import annotations

from typing import Any

from nodecode.context.arrange import common_prefix
from nodecode.store import Event, Store

Pairs = list[tuple[int, str]]


def delta(store: Store, sid: str, sent: Pairs) -> dict[str, Any]:
    """The payload field for a request about to be logged (after the session's last one)."""
    last = store.last_event(sid, "request")
    if last is None:
        return {"after": None, "keep": 0, "add": [list(p) for p in sent]}
    keep = common_prefix(sent, sent_of(store, sid, last))
    return {"after": last.seq, "keep": keep, "add": [list(p) for p in sent[keep:]]}


def remember(store: Store, sid: str, seq: int, sent: Pairs) -> None:
    """Keep a just-logged request's list in memory: the next delta starts from it."""
    store.cache.setdefault("sent", {})[sid] = (seq, list(map(tuple, sent)))


def sent_of(store: Store, sid: str, event: Event) -> Pairs:
    """The whole (id, digest) list of a request event, in order. Its chain of
    deltas is read in one query, newest first, back to a whole list."""
    hit = store.cache.setdefault("sent", {}).get(sid)
    if hit is not None and hit[0] == event.seq:
        return hit[1]
    chain: list[Any] = []
    want = event.seq
    for seq, payload in store.payloads(sid, "request", event.seq):
        if seq != want:
            continue  # a request the chain skips (logged in the older format)
        value = payload.get("sent")
        chain.append(value)
        if not isinstance(value, dict) or value.get("after") is None:
            break
        want = value["after"]
    pairs: Pairs = []
    for value in reversed(chain):  # in place: a chain of appends costs what it added
        if isinstance(value, list):  # the older format: the whole list
            pairs = [tuple(p) for p in value]
        elif isinstance(value, dict):
            del pairs[value.get("keep", 0) :]
            pairs += map(tuple, value.get("add", []))
    if event.seq == (store.last_event(sid, "request") or event).seq:
        remember(store, sid, event.seq, pairs)
    return pairs
