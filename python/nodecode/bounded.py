"""Process-wide caches, each with a size bound.

Several values are worth keeping for the whole process, across Apps (a host
opens one per directory): a message read from the same row, its digest, its
token count, its encoded wire block. Every such table is a ``Bounded``: past
its limit it starts over, since every value in it is remade on demand and
forgetting costs only the time to make it again. ``tests/test_architecture``
checks that no module keeps a process-wide dict that is not one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

V = TypeVar("V")


class Bounded(dict[Any, Any]):
    """A dict of at most ``limit`` entries (or, given ``weigh``, of values weighing
    at most ``limit`` together): the one that would pass it clears it first."""

    def __init__(self, limit: int, weigh: Callable[[Any], int] | None = None) -> None:
        super().__init__()
        self.limit = limit
        self.weigh = weigh
        self.weight = 0

    def keep(self, key: Any, value: V) -> V:
        """``self[key] = value`` within the bound; returns ``value``."""
        if self.weigh is None:
            if len(self) >= self.limit:
                self.clear()
        else:
            add = self.weigh(value)
            if self.weight + add > self.limit:
                self.clear()
                self.weight = 0
            if add > self.limit:
                return value  # larger than the whole bound: not kept at all
            self.weight += add
        self[key] = value
        return value
