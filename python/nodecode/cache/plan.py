"""Where an Anthropic request puts its cache breakpoints, and with which lifetime.

Anthropic writes cache entries only at ``cache_control`` breakpoints (at most
4 per request), an entry lives 5 minutes (or 1 hour with ``"ttl": "1h"``)
from its last use, a lookup walks back 20 blocks from each breakpoint and
stops at the first live entry, and 1-hour breakpoints must come before
5-minute ones (``research/anthropic-cache-rules.md`` in the project's shared
notes; ``:help nodecode-cache``). The goal (doc/design.md "The cache") is that after
an edit at any depth, made minutes after the last reply, the tokens before
the first change are still read from cache, at a cost close to the best
possible. The plan, per request:

* **end** — the last block, a 5-minute entry: the next round, seconds later,
  reads all of this request. It is a 1-hour entry instead when that costs
  little: the new part is small (at most ``CHEAP_DELTA`` of the request), or
  the newest block is big (over ``BIG_BLOCK`` of the request, in a context
  of ``BIG_CONTEXT`` tokens or more), so that an edit just after it, half an
  hour later, does not lose it.
* **tail** — a 1-hour entry at the newest small block before the end (the
  call of the newest round, say): billed at the 1-hour price only for the
  few tokens between what was read and it, and it outlives a pause.
* **read** — the highest entry the ledger believes live on this request's
  prefix, when no other breakpoint's lookback would reach it (after an edit).
* **keepers** — the spare breakpoints go to the *anchors* inside the prefix
  that was read: positions spaced so that every position has one within
  ``SPACING`` of its tokens below it. A breakpoint on a position without a
  live entry of its own leaves a new 1-hour entry there at no charge (billing
  only counts what lies after the read); one on a live 1-hour entry finds
  and refreshes it. The anchors with no entry, or the longest unrefreshed,
  go first. No anchor lies under the model's minimum cacheable prefix: no
  entry can live there, and a breakpoint spent on one would leave the old
  anchors above it unrefreshed until they expire (measured: an edit made 30
  minutes after a 70-minute session then read a third of its prefix).
* **new part** — any slot still free after the keepers: a 1-hour entry on
  the new part's blocks at or below the tail (all of them when the end is
  a 1-hour entry), newest first. Billing charges the 1-hour price up to the
  highest 1-hour breakpoint whatever lies below it, so these cost nothing;
  they keep the round just after a big 5-minute end (which can never become
  a 1-hour entry) readable when it is deleted or rewritten half an hour on.

The constants are measured by ``bench/cache_retention.py`` (real sessions
on the loopback's simulation, both readings): ``CHEAP_DELTA`` 0.06 kept the
cache but cost 1.11× the clairvoyant bound; 0.04 costs 1.09× and, with the
new-part entries and ``SPACING`` 0.04, keeps ≥ 95% at every depth.

What the provider holds is not reported, so a **ledger** models it from the
requests sent, under both readings the documentation leaves open: a hit
refreshes only the entry each lookup found, or every live entry on the
prefix it read. An anchor counts as kept only when both readings agree, so
the plan holds under either. Entries keep the lifetime they were written
with (a 1-hour breakpoint that finds a 5-minute entry refreshes it for 5
minutes), which is why an anchor is only converted once its 5-minute entry
has expired.

``mode``: ``"auto"`` (the above), ``"1h"`` (every end a 1-hour entry too:
appends survive any pause under an hour, at a higher write cost), or
``"5m"`` (5-minute entries only: cheapest for sessions that never pause).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

SHORT, LONG = 300.0, 3600.0  # the two lifetimes, seconds
LOOKBACK = 20  # blocks a lookup walks back, the breakpoint itself first
MAX_MARKS = 4
MARGIN = 15.0  # an entry expiring this soon is treated as gone (the request's own latency)
SPACING = 0.04  # anchors: every position has one this close below it, in tokens
REFRESH_AGE = 1200.0  # a 1-hour anchor older than this is refreshed
CHEAP_DELTA = 0.04
BIG_BLOCK = 0.045
BIG_CONTEXT = 40_000
TAIL_TOKENS = 300  # the tail's 1-hour write stays under this, or CHEAP_DELTA of the new part
MODES = ("auto", "1h", "5m")

# Minimum cacheable prefix by model (Anthropic's "Cache limitations"); longest prefix wins.
MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-fable-5", 512),
    ("claude-mythos-5", 512),
    ("claude-mythos", 2048),
    ("claude-opus-4-8", 1024),
    ("claude-opus-4-7", 2048),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-1", 1024),
    ("claude-opus-4", 1024),
    ("claude-sonnet-5", 1024),
    ("claude-sonnet-4", 1024),
    ("claude-haiku-4-5", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-haiku-3-5", 2048),
)
DEFAULT_MIN_TOKENS = 1024


def min_tokens(model: str | None) -> int:
    """The model's minimum cacheable prefix (the documented table; 1,024 otherwise)."""
    name = (model or "").lower()
    best = max((p for p, _ in MIN_TOKENS if name.startswith(p)), key=len, default=None)
    return dict(MIN_TOKENS)[best] if best is not None else DEFAULT_MIN_TOKENS


def chain(seed: str, keys: Iterable[str]) -> list[str]:
    """Cumulative hashes: entry i names the prefix through key i (after ``seed``)."""
    out, digest = [], hashlib.sha256(seed.encode()).digest()
    for key in keys:
        digest = hashlib.sha256(digest + key.encode()).digest()
        out.append(digest.hex()[:24])
    return out


@dataclass
class Entry:
    ttl: float
    expires: float


@dataclass
class Model:
    """One reading of the provider's cache: prefix hash → entry."""

    refresh_prefix: bool
    entries: dict[str, Entry] = field(default_factory=dict)

    def live(self, key: str, at: float) -> Entry | None:
        e = self.entries.get(key)
        return e if e is not None and e.expires > at else None

    def highest(self, prefix: Sequence[str], at: float) -> int:
        """The highest position of ``prefix`` with a live entry (-1: none)."""
        for i in range(len(prefix) - 1, -1, -1):
            if self.live(prefix[i], at):
                return i
        return -1

    def apply(
        self,
        prefix: Sequence[str],
        tokens: Sequence[int],
        marks: Sequence[Mark],
        now: float,
        minimum: int,
    ) -> int:
        """One request under this reading; returns the index of the highest hit (-1)."""
        found: list[int] = []
        for m in marks:
            for j in range(m.index, max(m.index - LOOKBACK, -1), -1):
                if self.live(prefix[j], now):
                    found.append(j)
                    break
        best = max(found, default=-1)
        if self.refresh_prefix:  # every live entry on the prefix read: few, the prefix long
            read = set(prefix[: best + 1])
            refreshed = [e for key, e in self.entries.items() if key in read]
        else:
            refreshed = [self.entries[prefix[j]] for j in found]
        for e in refreshed:
            if e.expires > now:
                e.expires = now + e.ttl
        for m in marks:
            if tokens[m.index] >= minimum and not self.live(prefix[m.index], now):
                self.entries[prefix[m.index]] = Entry(m.ttl, now + m.ttl)
        return best

    def prune(self, now: float) -> None:
        for key in [k for k, e in self.entries.items() if e.expires <= now]:
            del self.entries[key]


@dataclass(frozen=True)
class Mark:
    index: int  # position in the plan's block list
    ttl: float


@dataclass
class Ledger:
    """What the provider is believed to hold for one model, under both readings."""

    found: Model = field(default_factory=lambda: Model(False))
    prefix: Model = field(default_factory=lambda: Model(True))

    @property
    def models(self) -> tuple[Model, Model]:
        return self.found, self.prefix

    def record(
        self,
        prefix: Sequence[str],
        tokens: Sequence[int],
        marks: Sequence[Mark],
        now: float,
        minimum: int,
    ) -> None:
        for model in self.models:
            model.apply(prefix, tokens, marks, now, minimum)
            model.prune(now)

    def highest_live(self, prefix: Sequence[str], at: float) -> int:
        """The highest position live under both readings (-1: none)."""
        for i in range(len(prefix) - 1, -1, -1):
            if all(m.live(prefix[i], at) for m in self.models):
                return i
        return -1

    def rows(self) -> list[tuple[str, int, float, float, float]]:
        """(hash, reading, ttl, expires) rows for storing; reading 0 = found, 1 = prefix."""
        return [
            (k, r, e.ttl, e.expires, 0.0)
            for r, model in enumerate(self.models)
            for k, e in model.entries.items()
        ]


@dataclass(frozen=True)
class Plan:
    marks: list[Mark]
    read: int  # the position the plan expects to read through (-1: nothing)


def plan(
    prefix: Sequence[str],
    tokens: Sequence[int],
    anchors: Sequence[bool],
    ledger: Ledger,
    now: float,
    *,
    mode: str = "auto",
    minimum: int = DEFAULT_MIN_TOKENS,
) -> Plan:
    """The breakpoints of one request.

    ``prefix[i]``/``tokens[i]`` are the hash and cumulative tokens of the
    prefix through block i (block 0 the system prompt, after the tools);
    ``anchors[i]`` says whether block i may carry a breakpoint other than the
    end (not a thinking block, which cannot carry cache_control). Blocks are the
    request's own order.
    """
    n = len(prefix)
    later = now + MARGIN
    marks: dict[int, float] = {n - 1: SHORT}
    reads = [model.highest(prefix, later) for model in ledger.models]
    read = min(reads)
    for r in set(reads):
        if r >= 0 and n - 1 - r >= LOOKBACK:
            marks[r] = LONG if mode != "5m" else SHORT
    if mode == "5m":
        return _done(marks, read, tokens, minimum)
    base = tokens[read] if read >= 0 else 0
    new = tokens[n - 1] - base
    last = tokens[n - 1] - (tokens[n - 2] if n > 1 else 0)
    if (
        mode == "1h"
        or new <= CHEAP_DELTA * tokens[n - 1]
        or (last >= BIG_BLOCK * tokens[n - 1] and tokens[n - 1] >= BIG_CONTEXT)
    ):
        marks[n - 1] = LONG
        free = [p for p in range(max(read, 0) + 1, n - 1) if anchors[p]]
    else:
        budget = max(TAIL_TOKENS, CHEAP_DELTA * new)
        free = [
            p for p in range(max(read, 0) + 1, n - 1) if anchors[p] and tokens[p] - base <= budget
        ]
        if free:
            marks[max(free)] = LONG
    for i in _keepers(prefix, tokens, anchors, ledger, now, min(read, n - 2), marks, minimum):
        marks[i] = LONG
    for p in sorted(free, reverse=True):  # what is left: 1-hour entries in the new part
        if len(marks) >= MAX_MARKS:
            break
        marks.setdefault(p, LONG)
    return _done(marks, read, tokens, minimum)


def _done(marks: dict[int, float], read: int, tokens: Sequence[int], minimum: int) -> Plan:
    """The marks in order; a prefix under the model's minimum writes nothing, so its mark
    is dropped (the end stays, whatever its size). Only the end may be a 5-minute
    entry, so every 1-hour breakpoint comes before every 5-minute one."""
    end = max(marks)
    kept = [i for i in sorted(marks) if i == end or tokens[i] >= minimum]
    short = marks[end] == SHORT and all(marks[i] == SHORT for i in kept)
    out = [Mark(i, SHORT if short or (i == end and marks[i] == SHORT) else LONG) for i in kept]
    return Plan(out, read)


def keep_set(
    tokens: Sequence[int], anchors: Sequence[bool], top: int, minimum: int = 0
) -> list[int]:
    """Anchor positions up to ``top``: each position has one at most SPACING below it.
    None under ``minimum``: no entry can live there, so a breakpoint there is wasted.
    ``tokens`` are cumulative (they never decrease). The last chain made is kept: a
    request's tokens share their leading entries with the previous one's, so only
    the anchors after the change are looked for."""
    global _LAST_CHAIN
    n = len(tokens)
    first = _next_anchor(anchors, bisect.bisect_left(tokens, minimum), n)
    if top < 0 or first > top:
        return []
    chain = [first]
    last = _LAST_CHAIN
    if last is not None and last[2] == minimum:
        same = min(_same_prefix(last[0], tokens), _same_prefix(last[1], anchors))
        chain = [p for p in last[3] if p < same] or [first]
    at = chain[-1]
    while True:  # tokens only grow: the next far enough is found by bisection
        floor = tokens[at]
        p = bisect.bisect_left(tokens, True, at + 1, n, key=lambda t: floor < (1 - SPACING) * t)
        p = _next_anchor(anchors, p, n)
        if p >= n:
            break
        chain.append(p)
        at = p
    _LAST_CHAIN = (list(tokens), list(anchors), minimum, chain)
    return [p for p in chain if p <= top]


_LAST_CHAIN: tuple[list[int], list[bool], int, list[int]] | None = None


def _next_anchor(anchors: Sequence[bool], p: int, n: int) -> int:
    while p < n and not anchors[p]:
        p += 1
    return p


def _same_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items of ``a`` and ``b`` are equal, by halving slices (C loops)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo if a[lo] != b[lo] else hi


def _keepers(
    prefix: Sequence[str],
    tokens: Sequence[int],
    anchors: Sequence[bool],
    ledger: Ledger,
    now: float,
    top: int,
    marks: dict[int, float],
    minimum: int,
) -> list[int]:
    """The spare breakpoints: anchors without a kept 1-hour entry, oldest first."""
    slots = MAX_MARKS - len(marks)
    if slots <= 0:
        return []
    later = now + MARGIN
    wanted = []
    for i in keep_set(tokens, anchors, top, minimum):
        if i in marks:
            continue
        need, expires = False, float("inf")
        for model in ledger.models:
            e = model.live(prefix[i], later)
            if e is None:
                need, expires = True, -1.0
            elif e.ttl == LONG and now - (e.expires - e.ttl) >= REFRESH_AGE:
                need, expires = True, min(expires, e.expires)
        if need:
            wanted.append((expires, -tokens[i], i))
    return [i for _, _, i in sorted(wanted)[:slots]]
