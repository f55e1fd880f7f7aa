"""The loopback server's simulated Anthropic prompt cache (SPEC §11), over the
counted blocks of ``tokens``.

The prompt is the block sequence tools → system → message content parts. An
entry is (hash of the prefix up to and including a block, that prefix's
tokens), written at breakpoints (blocks carrying ``cache_control``, or the
last block under a top-level ``cache_control``) whose prefix reaches the
minimum. A lookup checks, for each breakpoint, the prefix ending there and at
each of the 20 blocks before it; the longest hit is the cache read. This is
the model the cache-retention bar is measured on.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from nodecode.loopback.tokens import Block

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20


class TooManyBreakpointsError(ValueError):
    """More than four ``cache_control`` markers; ``str(e)`` is Anthropic's text."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
        self.found = found


def breakpoints(blocks: list[Block], automatic: bool) -> list[int]:
    """Indices of the breakpoint blocks; ``automatic`` (a top-level
    ``cache_control``) marks the last block and takes one of the four slots."""
    points = [i for i, block in enumerate(blocks) if block.marked]
    found = len(points) + (1 if automatic else 0)
    if found > MAX_BREAKPOINTS:
        raise TooManyBreakpointsError(found)
    if automatic and blocks and len(blocks) - 1 not in points:
        points.append(len(blocks) - 1)
    return points


@dataclass(frozen=True)
class CacheUsage:
    """Unscaled cache figures of one request."""

    read: int = 0
    write: int = 0


def _prefixes(blocks: list[Block]) -> tuple[list[bytes], list[int]]:
    """Chained hash and cumulative tokens of every prefix (prefix i ends at block i)."""
    hashes, totals = [], []
    digest, total = b"", 0
    for block in blocks:
        digest = hashlib.sha256(digest + block.key.encode()).digest()
        total += block.tokens
        hashes.append(digest)
        totals.append(total)
    return hashes, totals


class PromptCache:
    """The server-lifetime cache of prefix entries (no TTL: tests and demos are short)."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._entries: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def apply(self, blocks: list[Block], points: list[int]) -> CacheUsage:
        """Look the request up, then write its breakpoints; returns read and write."""
        hashes, totals = _prefixes(blocks)
        with self._lock:
            read = self._lookup(hashes, points)
            written = [totals[p] for p in points if totals[p] >= self.min_tokens]
            for p in points:
                if totals[p] >= self.min_tokens:
                    self._entries[hashes[p]] = totals[p]
        write = max(written, default=0) - read
        return CacheUsage(read=read, write=max(write, 0))

    def _lookup(self, hashes: list[bytes], points: list[int]) -> int:
        best = 0
        for point in points:
            for i in range(point, max(point - LOOKBACK_BLOCKS, 0) - 1, -1):
                best = max(best, self._entries.get(hashes[i], 0))
        return best


def scale_parts(total: int, read: int, write: int, scale: float) -> tuple[int, int, int]:
    """(input, read, write) scaled by ``scale`` as integers summing to
    ``round(total * scale)``, where ``input`` is the uncached rest."""
    scaled_total = round(total * scale)
    scaled_read, scaled_write = round(read * scale), round(write * scale)
    return max(scaled_total - scaled_read - scaled_write, 0), scaled_read, scaled_write
