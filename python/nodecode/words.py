"""Small words of the texts people read: a count with its noun agreeing."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 turn``, ``2 turns``, ``0 turns`` (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"
