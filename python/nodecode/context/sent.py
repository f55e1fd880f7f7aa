"""What a request event records about the messages it sent: a delta from the one before.

SPEC §8: a request event records the ids and hashes of the messages sent. Each
request shares most of them with the previous request, so an event stores only
``{"after": SEQ, "keep": K, "add": [[id, digest], …], "n": N, "hash": H}``: the
first K of the request at seq SEQ, then the added pairs; N and H are the whole
list's length and hash. Storage stays proportional to what changed, and
``sent_of`` rebuilds any request's whole list. The next request, in an App that
did not send this one, checks its own first N pairs against H instead of
rebuilding this list from the chain of every request before it (a rebuild only
when they differ: an edit or an eviction changed the prefix). Events written
before this format keep their whole ``sent`` list and are read as they are.
"""

from __future__ import annotations

import hashlib
from typing import Any

from nodecode.context.arrange import common_prefix
from nodecode.store import Event, Store

Pairs = list[tuple[int, str]]


def delta(store: Store, sid: str, sent: Pairs) -> dict[str, Any]:
    """The payload field for a request about to be logged (after the session's last one)."""
    last = store.last_event(sid, "request")
    if last is None:
        return {"after": None, "keep": 0, "add": [list(p) for p in sent], **_whole(sent)}
    before = last.payload.get("sent")
    hit = store.cache.get("sent", {}).get(sid)
    n = before.get("n") if isinstance(before, dict) else None
    if (hit is None or hit[0] != last.seq) and isinstance(n, int) and n <= len(sent):
        head, whole = _hashes(sent, n)
        if head == before.get("hash"):  # this list starts with all of the last one
            add = [list(p) for p in sent[n:]]
            return {"after": last.seq, "keep": n, "add": add, "n": len(sent), "hash": whole}
    keep = common_prefix(sent, sent_of(store, sid, last))
    add = [list(p) for p in sent[keep:]]
    return {"after": last.seq, "keep": keep, "add": add, **_whole(sent)}


def _whole(sent: Pairs) -> dict[str, Any]:
    return {"n": len(sent), "hash": _hashes(sent, len(sent))[1]}


def _hashes(sent: Pairs, n: int) -> tuple[str, str]:
    """The hashes of ``sent[:n]`` and of all of ``sent``, in one pass."""
    h = hashlib.sha256(",".join(f"{i}:{d}" for i, d in sent[:n]).encode())
    head = h.hexdigest()[:16]
    if n < len(sent):
        h.update(("," if n else "").encode() + ",".join(f"{i}:{d}" for i, d in sent[n:]).encode())
    return head, h.hexdigest()[:16]


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
