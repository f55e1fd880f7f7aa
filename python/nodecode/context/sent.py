"""What a request event records about the messages it sent: a delta from the one before.

doc/design.md "The log": a request event records the ids and hashes of the messages sent. Each
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
from typing import TYPE_CHECKING, Any

from nodecode.context.arrange import common_prefix
from nodecode.log.store import Store

if TYPE_CHECKING:
    from nodecode.context.derived import Derived

Pairs = list[tuple[int, str]]


def delta(store: Store, views: Derived, sent: Pairs) -> dict[str, Any]:
    """The payload field for a request about to be logged (after the session's last
    one, as its ``views`` were last read)."""
    last = _last(views)
    keep, head = 0, None  # head: a hash of sent[:keep], when one was made on the way
    if last is not None:
        hit = views.sent
        logged = last[1].get("sent")
        before: dict[str, Any] = logged if isinstance(logged, dict) else {}
        n = before.get("n")
        if hit is not None and hit[0] == last[0]:  # this App sent it: the list is here
            keep = common_prefix(sent, hit[1])
            head = hit[2] if keep == len(hit[1]) else None
        else:
            if isinstance(n, int) and n <= len(sent):
                head = _hasher(sent[:n])
                if _hash(head) == before.get("hash"):
                    keep = n  # starting with all of the last list: no chain to rebuild
                else:
                    head = None
            if head is None:
                keep = common_prefix(sent, sent_of(store, views.sid, last[0], views))
    whole = _extend(head.copy(), sent[keep:], keep) if head is not None else _hasher(sent)
    views.sent_hash = (sent, whole)  # for remember(sent)
    return {
        "after": last[0] if last is not None else None,
        "keep": keep,
        "add": [list(p) for p in sent[keep:]],
        "n": len(sent),
        "hash": _hash(whole),
    }


def _last(views: Derived) -> tuple[int, dict[str, Any]] | None:
    """(seq, payload) of the session's newest request, as its views were last
    read (None before any, or before a read loaded its request log)."""
    return views.requests.last if views.requests is not None else None


def _hasher(pairs: Pairs) -> Any:
    """A sha256 of ``pairs`` written ``id:digest,id:digest…``, open to extend."""
    return _extend(hashlib.sha256(), pairs, 0)


def _extend(h: Any, pairs: Pairs, before: int) -> Any:
    """``h`` (of ``before`` pairs) extended by ``pairs``."""
    if pairs:
        text = ",".join(f"{i}:{d}" for i, d in pairs)
        h.update((("," if before else "") + text).encode())
    return h


def _hash(h: Any) -> str:
    return h.hexdigest()[:16]


def remember(views: Derived, seq: int, sent: Pairs) -> None:
    """Keep a just-logged request's list in memory, with its hash open to extend:
    the next delta starts from them."""
    made, views.sent_hash = views.sent_hash, None
    hasher = made[1] if made is not None and made[0] is sent else _hasher(sent)
    views.sent = (seq, list(sent), hasher)  # its pairs are tuples: a copy in C, not a rebuild


def sent_of(store: Store, sid: str, seq: int, views: Derived | None = None) -> Pairs:
    """The whole (id, digest) list of the request event at ``seq``, in order. Its
    chain of deltas is read in one query, newest first, back to a whole list;
    given the session's ``views``, the newest request's list is kept there."""
    hit = views.sent if views is not None else None
    if hit is not None and hit[0] == seq:
        return hit[1]
    chain: list[Any] = []
    want = seq
    for at, payload in store.payloads(sid, "request", seq):
        if at != want:
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
    last = _last(views) if views is not None else None
    if views is not None and last is not None and last[0] == seq:
        remember(views, seq, pairs)
    return pairs
