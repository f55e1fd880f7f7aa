"""The loopback server's simulation of Anthropic's prompt cache, on the rules
documented in research/anthropic-cache-rules.md (doc/design.md "The cache").

The prompt is the block sequence tools → system → message content parts
(``tokens.anthropic_blocks``). A breakpoint is a block carrying
``cache_control`` (``{"type": "ephemeral"}``: 5 minutes; with ``"ttl": "1h"``:
1 hour), or the last block under a top-level ``cache_control`` (automatic
caching), which takes one of the slots. Documented rules simulated:

* An entry is written only at a breakpoint: key = the cumulative hash of the
  prefix ending there, with the prefix's tokens, its TTL class and an expiry.
  A prefix shorter than the model's minimum (``MIN_TOKENS``) writes nothing,
  silently.
* At most 4 breakpoints (a 400 with Anthropic's text); a 1-hour breakpoint
  after a 5-minute one is a 400. Automatic caching on a last block already
  marked with the same TTL is a no-op, with a different TTL a 400.
* Lookup, per breakpoint: positions p, p−1, …, p−19 (20, the breakpoint
  itself first); the walk stops at the first live entry. A = the tokens at
  the highest hit.
* An entry lives its TTL (300 or 3600 s, on ``Clock``) from its write or its
  last refresh; reading it refreshes it at no cost.
* Billing: A = tokens at the highest hit (0 if none), B = at the highest
  1-hour breakpoint after A (else A), C = at the last breakpoint (else A),
  both among breakpoints that reach the minimum; read A, 1-hour write B − A,
  5-minute write C − B, uncached input = total − C. ``cost`` prices them.

Readings where the docs are silent (the strategy must hold under both refresh
readings, so both are selectable):

* Refresh (``CacheRules.refresh``): "found" (default, conservative) refreshes
  only the entry each breakpoint's lookup found, at most one per breakpoint;
  "prefix" (optimistic) refreshes every live entry on the prefix read (≤ A).
* An entry keeps the TTL class it was written with: a 1-hour breakpoint that
  finds a live 5-minute entry refreshes it for 5 minutes.
* A breakpoint at or before A's position with no live entry of its own leaves
  one of its own TTL at no charge (billing only knows A, B and C).
* Entries are per model (the hash starts from the model id): a prefix cached
  for one model is not read by another.
* Automatic caching with 4 explicit breakpoints is a 400 even when the last
  of them already has its TTL (the doc's sentence is unconditional).
* The 400 texts for the TTL order, a conflicting automatic TTL and an unknown
  ttl are ours; the 4-breakpoint text is Anthropic's.
* An entry is usable as soon as its request is answered; requests are applied
  one at a time in arrival order (the real cache misses parallel requests).
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodecode.loopback.tokens import Block, marker_ttl

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20  # counting the breakpoint's own position
TTL_SECONDS = {"5m": 300, "1h": 3600}
ONE_HOUR = TTL_SECONDS["1h"]
REFRESH_READINGS = ("found", "prefix")

# Minimum cacheable prefix by model id prefix (the research doc's "Cache
# limitations" table, Claude API). Matched at a "-" boundary, longest first;
# a further version number ("claude-opus-4-9") does not match "claude-opus-4".
MIN_TOKENS: dict[str, int] = {
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-opus-4-8": 1024,
    "claude-sonnet-5": 1024,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4": 1024,
    "claude-opus-4-7": 2048,
    "claude-mythos-preview": 2048,
    "claude-3-5-haiku": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
}
DEFAULT_MIN_TOKENS = 1024  # models the table does not know (test and demo ids)

# Prices in base-input units ("Pricing"); output tokens are not input and not priced here.
PRICE_INPUT, PRICE_READ, PRICE_WRITE_5M, PRICE_WRITE_1H = 1.0, 0.1, 1.25, 2.0


def model_min_tokens(model: str) -> int:
    """The minimum cacheable prefix of ``model``: its id (a Bedrock
    ``anthropic.`` prefix or a Vertex ``@date`` suffix allowed) against ``MIN_TOKENS``."""
    name = model[model.find("claude-") :] if "claude-" in model else model
    name = name.split("@", 1)[0]
    for key in sorted(MIN_TOKENS, key=len, reverse=True):
        rest = name[len(key) + 1 :] if name.startswith(key + "-") else None
        if name == key or (rest is not None and not re.match(r"\d{1,2}(-|$)", rest)):
            return MIN_TOKENS[key]
    return DEFAULT_MIN_TOKENS


# ---------------------------------------------------------------- clock and rules


class Clock:
    """The cache's seconds: a real monotonic clock that tests and benches can
    move forward with ``advance``; with ``start``, a manual clock that moves
    only by ``advance`` (deterministic tests)."""

    def __init__(self, start: float | None = None) -> None:
        self._real = start is None
        self._offset = 0.0 if start is None else float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return (time.monotonic() if self._real else 0.0) + self._offset

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"Clock.advance: seconds must be ≥ 0 (got {seconds})")
        with self._lock:
            self._offset += seconds


@dataclass(frozen=True)
class CacheRules:
    """The readings the simulation takes where the docs are silent, and the
    minimum override (``min_tokens``: every model; None: ``MIN_TOKENS``)."""

    refresh: str = "found"
    min_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.refresh not in REFRESH_READINGS:
            raise ValueError(
                f"CacheRules: refresh must be 'found' or 'prefix' (got {self.refresh!r})"
            )

    def minimum(self, model: str) -> int:
        return self.min_tokens if self.min_tokens is not None else model_min_tokens(model)


# ---------------------------------------------------------------- breakpoints


class CacheControlError(ValueError):
    """A request the API refuses for its ``cache_control`` markers (HTTP 400);
    ``str(e)`` is the error message."""


class TooManyBreakpointsError(CacheControlError):
    """More than four breakpoints; ``str(e)`` is Anthropic's text."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
        self.found = found


@dataclass(frozen=True)
class Breakpoint:
    """A block position that writes (and looks up) an entry of ``ttl`` seconds."""

    index: int
    ttl: int


def ttl_seconds(ttl: str) -> int:
    """300 or 3600 for a marker's ttl; anything else is the API's 400."""
    if ttl not in TTL_SECONDS:
        raise CacheControlError(f"cache_control.ttl: Input should be '5m' or '1h' (found {ttl!r}).")
    return TTL_SECONDS[ttl]


def _ttl_name(seconds: int) -> str:
    return next(name for name, s in TTL_SECONDS.items() if s == seconds)


def breakpoints(blocks: list[Block], automatic: Any = None) -> list[Breakpoint]:
    """The request's breakpoints in order; ``automatic`` is the body's top-level
    ``cache_control`` (None: absent), which marks the last block. Raises
    ``CacheControlError`` where the API answers 400."""
    points = [Breakpoint(i, ttl_seconds(b.ttl)) for i, b in enumerate(blocks) if b.ttl is not None]
    if automatic is not None:
        if len(points) + 1 > MAX_BREAKPOINTS:
            raise TooManyBreakpointsError(len(points) + 1)
        if blocks:
            points = _with_automatic(points, len(blocks) - 1, ttl_seconds(marker_ttl(automatic)))
    if len(points) > MAX_BREAKPOINTS:
        raise TooManyBreakpointsError(len(points))
    _check_order(points)
    return points


def _with_automatic(points: list[Breakpoint], last: int, ttl: int) -> list[Breakpoint]:
    if not points or points[-1].index != last:
        return [*points, Breakpoint(last, ttl)]
    if points[-1].ttl != ttl:
        raise CacheControlError(
            f"The top-level cache_control ttl '{_ttl_name(ttl)}' differs from the ttl "
            f"'{_ttl_name(points[-1].ttl)}' of the cache_control already on the last block."
        )
    return points  # the same marker already there: a no-op


def _check_order(points: list[Breakpoint]) -> None:
    """Entries with a longer TTL must come before shorter ones."""
    for before, after in zip(points, points[1:], strict=False):
        if after.ttl > before.ttl:
            raise CacheControlError(
                "Cache entries with a longer ttl must appear before shorter ones: found a "
                f"cache_control with ttl '{_ttl_name(after.ttl)}' after one with ttl "
                f"'{_ttl_name(before.ttl)}'."
            )


# ---------------------------------------------------------------- the cache


@dataclass(frozen=True)
class CacheUsage:
    """Unscaled cache figures of one request: read A, 1-hour write B − A,
    5-minute write C − B."""

    read: int = 0
    write_1h: int = 0
    write_5m: int = 0

    @property
    def write(self) -> int:
        return self.write_1h + self.write_5m


@dataclass
class _Entry:
    tokens: int
    ttl: int  # the class it was written with, kept on every refresh
    expires: float

    def live(self, now: float) -> bool:
        return now < self.expires


def _prefixes(model: str, blocks: list[Block]) -> tuple[list[bytes], list[int]]:
    """Chained hash and cumulative tokens of every prefix (prefix i ends at block i)."""
    hashes, totals = [], []
    digest, total = hashlib.sha256(model.encode()).digest(), 0
    for block in blocks:
        digest = hashlib.sha256(digest + block.key.encode()).digest()
        total += block.tokens
        hashes.append(digest)
        totals.append(total)
    return hashes, totals


class PromptCache:
    """The server-lifetime store of prefix entries, with expiry on ``clock``."""

    PRUNE_EVERY = 128  # requests between sweeps of expired entries

    def __init__(self, rules: CacheRules | None = None, clock: Clock | None = None) -> None:
        self.rules = rules or CacheRules()
        self.clock = clock or Clock()
        self._entries: dict[bytes, _Entry] = {}
        self._lock = threading.Lock()
        self._applied = 0

    def __len__(self) -> int:
        """Live entries now."""
        now = self.clock.now()
        with self._lock:
            return sum(e.live(now) for e in self._entries.values())

    def apply(
        self, model: str, blocks: list[Block], points: list[Breakpoint], scale: float = 1.0
    ) -> CacheUsage:
        """Look the request up, refresh what it read, write its breakpoints; returns the
        bill. ``scale``: the provider's tokens per counted one (the server's
        ``usage_scale``): the model's minimum is in the provider's tokens."""
        hashes, totals = _prefixes(model, blocks)
        minimum = math.ceil(self.rules.minimum(model) / scale)
        with self._lock:
            now = self.clock.now()
            found = [self._find(hashes, p.index, now) for p in points]
            hit = max((f for f in found if f is not None), default=-1)
            self._refresh(hashes, found, hit, now)
            self._write(hashes, totals, points, minimum, now)
            self._prune(now)
        return _bill(totals, points, hit, minimum)

    def _find(self, hashes: list[bytes], point: int, now: float) -> int | None:
        """The position of the first live entry walking back from ``point``."""
        for i in range(point, max(point - LOOKBACK_BLOCKS, -1), -1):
            entry = self._entries.get(hashes[i])
            if entry is not None and entry.live(now):
                return i
        return None

    def _refresh(self, hashes: list[bytes], found: list[int | None], hit: int, now: float) -> None:
        """Reset the lifetime of what was read, each entry in its own TTL class."""
        if self.rules.refresh == "prefix":
            positions: set[int] | range = range(hit + 1)
        else:
            positions = {f for f in found if f is not None}
        for i in positions:
            entry = self._entries.get(hashes[i])
            if entry is not None and entry.live(now):
                entry.expires = now + entry.ttl

    def _write(
        self,
        hashes: list[bytes],
        totals: list[int],
        points: list[Breakpoint],
        minimum: int,
        now: float,
    ) -> None:
        """An entry at every breakpoint that reaches the minimum and has none alive."""
        for p in points:
            entry = self._entries.get(hashes[p.index])
            if totals[p.index] >= minimum and (entry is None or not entry.live(now)):
                self._entries[hashes[p.index]] = _Entry(totals[p.index], p.ttl, now + p.ttl)

    def _prune(self, now: float) -> None:
        self._applied += 1
        if self._applied % self.PRUNE_EVERY == 0:
            self._entries = {k: e for k, e in self._entries.items() if e.live(now)}


def _bill(totals: list[int], points: list[Breakpoint], hit: int, minimum: int) -> CacheUsage:
    """A, B, C of the "Mixing different TTLs" section, as read and writes."""
    a = totals[hit] if hit >= 0 else 0
    written = [p for p in points if p.index > hit and totals[p.index] >= minimum]
    long = [p for p in written if p.ttl == ONE_HOUR]
    b = totals[long[-1].index] if long else a
    c = totals[written[-1].index] if written else a
    return CacheUsage(read=a, write_1h=b - a, write_5m=c - b)


# ---------------------------------------------------------------- reporting and cost


def scale_parts(total: int, cache: CacheUsage, scale: float) -> tuple[int, int, int, int]:
    """(input, read, 1-hour write, 5-minute write) scaled by ``scale`` as
    integers summing to ``round(total * scale)``, ``input`` being the uncached rest."""
    read, long, short = (round(n * scale) for n in (cache.read, cache.write_1h, cache.write_5m))
    return max(round(total * scale) - read - long - short, 0), read, long, short


def cost(usage: Mapping[str, Any]) -> float:
    """A request's input cost in base-input units (read 0.1, 5-minute write
    1.25, 1-hour write 2.0, uncached 1.0), from the usage the loopback recorded
    (``Recorded.usage``) or from Anthropic's wire ``usage`` object."""
    if "input_tokens" in usage:  # the wire's: without cache_creation, every write is 5-minute
        creation = usage.get("cache_creation") or {
            "ephemeral_5m_input_tokens": usage.get("cache_creation_input_tokens") or 0
        }
        parts = (
            usage.get("input_tokens"),
            usage.get("cache_read_input_tokens"),
            creation.get("ephemeral_5m_input_tokens"),
            creation.get("ephemeral_1h_input_tokens"),
        )
    else:
        if usage.get("cache_write") and "cache_write_1h" not in usage:
            raise ValueError(
                "cost: a usage with cache_write needs cache_write_1h and cache_write_5m "
                f"to be priced (got keys {sorted(usage)})"
            )
        parts = (
            usage.get("input"),
            usage.get("cache_read"),
            usage.get("cache_write_5m"),
            usage.get("cache_write_1h"),
        )
    uncached, read, short, long = (int(n or 0) for n in parts)
    return (
        PRICE_INPUT * uncached + PRICE_READ * read + PRICE_WRITE_5M * short + PRICE_WRITE_1H * long
    )
