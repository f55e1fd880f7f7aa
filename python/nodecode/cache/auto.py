"""A provider's automatic prefix cache, as it documents it: the rules ``cache.miss``
judges a request of a format without breakpoints by (each wire format names
its own: ``WireFormat.auto_cache``)."""

from __future__ import annotations

from dataclasses import dataclass

from nodecode.cache.plan import SHORT


@dataclass(frozen=True)
class AutoCache:
    """A provider's automatic prefix cache, as it documents it (a format that marks no
    breakpoints): a prompt reaching ``minimum`` tokens (per model id prefix, longest
    first; else ``default_minimum``) is cached in steps of ``step`` tokens past it, and
    an entry unused for ``lifetime`` seconds may be gone. ``cache.miss`` expects a
    request to read what the one before it sent, on these rules."""

    name: str  # how the reason names it: "OpenAI's automatic cache"
    default_minimum: int
    step: int = 1
    lifetime: float = SHORT
    minimums: tuple[tuple[str, int], ...] = ()
    source: str = ""  # the page the rules come from

    def minimum(self, model: str | None) -> int:
        for prefix, tokens in sorted(self.minimums, key=lambda p: -len(p[0])):
            if (model or "").startswith(prefix):
                return tokens
        return self.default_minimum

    def cached(self, prompt: int, model: str | None, minimum: int | None = None) -> int:
        """What of a ``prompt``-token request the cache can hold (0: below the minimum;
        ``minimum``: the model's ``cache_min_tokens`` when config names one)."""
        least = minimum if minimum is not None else self.minimum(model)
        if prompt < least:
            return 0
        return least + (prompt - least) // self.step * self.step
