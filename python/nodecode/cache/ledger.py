"""The provider's prompt cache as nodecode believes it stands, kept in the store.

One ``cache_entries`` row per (scope, prefix hash, reading): the scope is the
provider and model (caches are per model), the hash names a prefix of a
request (the tools and system prompt, then each message's id and digest), and
each reading of ``cache_plan.Ledger`` keeps its own lifetime. The rows are
derived state, rewritten after each request; the log keeps what was sent.

Anthropic requests are placed by ``cache_plan``; OpenAI-compatible servers
cache by prefix on their own, so their ledger only records each request's end
(a 5-minute guess) for ``cached_through``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nodecode.bounded import Bounded
from nodecode.cache import plan as cache_plan
from nodecode.context.arrange import Arranged
from nodecode.context.message import Message
from nodecode.log.store import Store


@dataclass(frozen=True)
class Scope:
    """Whose cache: the provider (its type and id) and the model, with what every
    request starts with (the system prompt and the tools)."""

    ptype: str
    provider: str
    model: str
    system: str
    tools: str  # the tools' JSON, as sent
    minimum: int | None = None  # the model's minimum cacheable prefix, when config names one

    @property
    def key(self) -> str:
        return f"{self.ptype}:{self.provider}:{self.model}"

    @property
    def seed(self) -> str:
        head = hashlib.sha256(f"{self.key}\0{self.tools}\0{self.system}".encode()).hexdigest()
        return head[:24]


def scope_of(
    ptype: str,
    provider: str | None,
    model: str | None,
    system: str,
    tools: list[dict[str, Any]],
    minimum: int | None = None,
) -> Scope:
    tools_json = json.dumps(tools, sort_keys=True, ensure_ascii=False)
    return Scope(ptype, provider or ptype, model or "", system, tools_json, minimum)


def prefix_keys(scope: Scope, arranged: Sequence[Message] | Arranged) -> list[str]:
    """The hash of each prefix: block 0 is the system prompt (after the tools), block
    i + 1 is ``arranged[i]``. Cached on each message object with its predecessor's,
    and, given an ``Arranged``, kept from the previous request for what both share."""
    first = cache_plan.chain(scope.seed, ["system"])[0]
    if isinstance(arranged, Arranged):
        return arranged.series(("prefix", first), first, _next_key)
    out = [first]
    for m in arranged:
        out.append(_next_key(out[-1], m))
    return out


# Prefix hashes for the process by (the hash before, the message's digest): an App
# opening a store this process already sent from hashes none of it again.
_KEYS = Bounded(200_000)


def _next_key(previous: str, m: Message) -> str:
    memo = m.memo.get("cache:prefix")
    if memo is None or memo[0] != previous:
        digest = _KEYS.get((previous, m.digest))
        if digest is None:
            digest = hashlib.sha256(f"{previous}{m.id}:{m.digest}".encode()).hexdigest()[:24]
            _KEYS.keep((previous, m.digest), digest)
        memo = (previous, digest)
        m.memo["cache:prefix"] = memo
    return memo[1]


Rows = dict[tuple[str, int], tuple[float, float]]  # (hash, reading) → (ttl, expires)


def load(store: Store, scope: Scope, now: float) -> cache_plan.Ledger:
    """The ledger of ``scope``, from memory while no other connection has written
    the store since this one last read or wrote it."""
    key = ("ledger", scope.key)
    version = store.data_version()
    hit = store.derived.get(key)
    if hit is not None and hit[0] == version:
        return hit[1]
    ledger = cache_plan.Ledger()
    rows = store.read(
        "SELECT hash, reading, ttl, expires FROM cache_entries WHERE scope = ?", (scope.key,)
    )
    for key, reading, ttl, expires in rows:
        if expires > now:
            ledger.models[reading].entries[key] = cache_plan.Entry(ttl, expires)
    store.derived[key] = (version, ledger, {(k, r): (t, e) for k, r, t, e in rows})
    return ledger


def save(store: Store, scope: Scope, ledger: cache_plan.Ledger, now: float) -> None:
    """Make the scope's rows the ledger's (the caller holds a write transaction):
    only the rows that changed, when the store holds what this connection last saw."""
    key = ("ledger", scope.key)
    version = store.data_version()
    hit = store.derived.get(key)
    rows: Rows = {(k, r): (ttl, exp) for k, r, ttl, exp, _ in ledger.rows()}
    if hit is not None and hit[0] == version:
        before: Rows = hit[2]
        gone = [(scope.key, k, r) for (k, r) in before if (k, r) not in rows]
        changed = [(k, r, *v) for (k, r), v in rows.items() if before.get((k, r)) != v]
    else:  # another connection wrote since: its rows give way to this ledger
        store.db.execute("DELETE FROM cache_entries WHERE scope = ?", (scope.key,))
        gone, changed = [], [(k, r, *v) for (k, r), v in rows.items()]
    store.db.executemany(
        "DELETE FROM cache_entries WHERE scope = ? AND hash = ? AND reading = ?", gone
    )
    store.db.executemany(
        "INSERT OR REPLACE INTO cache_entries (scope, hash, reading, ttl, expires, written) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(scope.key, k, r, ttl, exp, now) for k, r, ttl, exp in changed],
    )
    store.derived[key] = (version, ledger, rows)


@dataclass
class Placed:
    """One request's cache plan: marks by arranged index (-1 = the system prompt)."""

    scope: Scope
    prefix: list[str]
    tokens: list[int]
    plan: cache_plan.Plan
    minimum: int

    def marks(self) -> list[tuple[int, float]]:
        return [(m.index - 1, m.ttl) for m in self.plan.marks]


def place(
    store: Store,
    scope: Scope,
    arranged: Sequence[Message] | Arranged,
    count: Callable[[Message], int],
    fixed: int,
    now: float,
    *,
    mode: str = "auto",
    tokens: list[int] | None = None,
) -> Placed:
    """Plan where this request's breakpoints go (``count`` gives a message's tokens,
    ``fixed`` the tools' and system prompt's; ``tokens``, when given, are the
    cumulative figures already made from them)."""
    prefix = prefix_keys(scope, arranged)
    if tokens is None:
        tokens, total = [fixed], fixed
        for m in arranged.out if isinstance(arranged, Arranged) else arranged:
            total += count(m)
            tokens.append(total)
    minimum = scope.minimum if scope.minimum is not None else cache_plan.min_tokens(scope.model)
    ledger = load(store, scope, now)
    # A thinking block cannot carry cache_control: never a breakpoint there.
    if isinstance(arranged, Arranged):  # kept from the previous request for what both share
        anchors = arranged.series("anchors", True, lambda _, m: m.role != "thinking")
    else:
        anchors = [True] + [m.role != "thinking" for m in arranged]
    planned = cache_plan.plan(prefix, tokens, anchors, ledger, now, mode=mode, minimum=minimum)
    return Placed(scope, prefix, tokens, planned, minimum)


def record(store: Store, placed: Placed, now: float, cache_read: int, scale: float = 1.0) -> None:
    """After the reply: the ledger learns what this request wrote and refreshed. A
    reply that read nothing where something was expected means the provider holds
    less than believed (another key, an eviction): the ledger starts over.
    ``scale``: the provider's tokens per one of ours. The model's minimum is in
    the provider's tokens: a prefix of 980 of ours that it counts as 1,052 is
    cached under a minimum of 1,024."""
    ledger = load(store, placed.scope, now)
    minimum = math.floor(placed.minimum / scale) if scale > 0 else placed.minimum
    expected = placed.plan.read >= 0 and placed.tokens[placed.plan.read] >= minimum
    if expected and cache_read == 0:
        ledger = cache_plan.Ledger()
    ledger.record(placed.prefix, placed.tokens, placed.plan.marks, now, minimum)
    save(store, placed.scope, ledger, now)


def record_end(
    store: Store, scope: Scope, arranged: Sequence[Message] | Arranged, now: float
) -> None:
    """An OpenAI-compatible request: its whole prefix is believed cached for 5 minutes."""
    prefix = prefix_keys(scope, arranged)
    ledger = load(store, scope, now)
    for model in ledger.models:
        model.entries[prefix[-1]] = cache_plan.Entry(cache_plan.SHORT, now + cache_plan.SHORT)
        model.prune(now)
    save(store, scope, ledger, now)


def live_positions(
    store: Store, scope: Scope, arranged: Sequence[Message], now: float
) -> list[int]:
    """The prefix positions (0: the system prompt, i: ``arranged[i - 1]``) that the
    ledger holds a live entry for: where the next request can read from cache.
    An edit changes every prefix hash after it, so no position past it is live."""
    prefix = prefix_keys(scope, arranged)
    ledger = load(store, scope, now)
    at = now + cache_plan.MARGIN
    return [i for i, key in enumerate(prefix) if all(m.live(key, at) for m in ledger.models)]


def cached_through(
    store: Store, scope: Scope, arranged: Sequence[Message], now: float
) -> int | None:
    """The id of the last message the next request can read from cache (None: none)."""
    prefix = prefix_keys(scope, arranged)
    i = load(store, scope, now).highest_live(prefix, now + cache_plan.MARGIN)
    if i <= 0:
        return None
    return arranged[i - 1].id
