"""What an edit of the context does to the next request's cache, in tokens and
money, said before the request (``:help nodecode-cost``): the line the context
buffer's ``:w`` and ``(context :drop …)`` show.

The next request is reckoned twice, with the edit and without it, from the
cache ledger (``cache.ledger``: which prefixes the provider holds, and where
the next request's plan puts its breakpoints) and the counted, calibrated
tokens ``/context`` shows: read A = the prefix the ledger holds, 1-hour write
B − A and 5-minute write C − B (the breakpoints the plan writes past A),
uncached = the rest (Anthropic's billing of mixed lifetimes; a format that
caches by prefix on its own writes nothing). Both are priced at the model's
rates (``providers.pricing``); the line says the difference.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nodecode.budget.meter import Basis
from nodecode.cache import ledger
from nodecode.cache import plan as cache_plan
from nodecode.config import Config
from nodecode.context.derived import Read
from nodecode.context.message import Message
from nodecode.providers import pricing


def config_rates(home: Path, config: Config | None) -> pricing.Rates | None:
    """The rates of the configured model (its provider's ``models_dev`` id, else
    its own, names it in models.dev's table)."""
    if config is None or config.provider is None:
        return None
    p = config.provider
    return pricing.model_rates(home, p.models_dev or p.id, config.model, config.wire())


@dataclass(frozen=True)
class Next:
    """One reckoning of the next request: the message the cache is kept through
    (None: none; 0: the system prompt and tools), and its tokens by billing."""

    through: int | None
    parts: pricing.Parts
    dollars: float | None

    @property
    def kept(self) -> int:
        return self.parts.cache_read

    @property
    def written(self) -> int:
        return self.parts.cache_write + self.parts.cache_write_1h

    def as_dict(self) -> dict[str, Any]:
        return {"through": self.through, **asdict(self.parts), "dollars": self.dollars}


def reckon(
    r: Read, basis: Basis, order: list[Message], rates: pricing.Rates | None, now: float
) -> Next | None:
    """The next request of ``order``, as the ledger and the plan see it (None
    without a provider, whose cache there is no knowing)."""
    scope, config = basis.scope, basis.config
    if scope is None or config is None:
        return None
    meter = basis.meter(r.views)
    ratio = meter.ratio()
    count = meter.count(order)
    arranged = [m for m, _ in count.messages]
    tokens = [count.system + count.tools]
    for _, n in count.messages:
        tokens.append(tokens[-1] + n)
    live = ledger.live_positions(r.store, scope, arranged, now)
    read = max(live, default=-1)
    present = {m.id for m in order}
    through = None if read < 0 else 0
    for i in range(read, 0, -1):  # `(context begins)` and stand-ins are no message of it
        if arranged[i - 1].id in present:
            through = arranged[i - 1].id
            break
    a = tokens[read] if read >= 0 else 0
    b = c = a
    if meter.wire.cache_marks:
        plan = ledger.place(
            r.store, scope, arranged, meter.message, tokens[0], now, mode=config.cache,
            tokens=tokens,
        )  # fmt: skip
        written = [m for m in plan.plan.marks if m.index > read and tokens[m.index] >= plan.minimum]
        long = [m for m in written if m.ttl >= cache_plan.LONG]
        b = tokens[long[-1].index] if long else a
        c = tokens[written[-1].index] if written else a
    scaled = [round(n * ratio) for n in (a, b, c, tokens[-1])]
    a, b, c, total = scaled
    parts = pricing.Parts(max(total - c, 0), a, c - b, b - a, 0)
    return Next(through, parts, pricing.dollars(parts, rates))


def edit_cost(
    r: Read,
    basis: Basis,
    before: list[Message],
    after: list[Message],
    rates: pricing.Rates | None,
    now: float | None = None,
) -> dict[str, Any] | None:
    """What taking an edit that makes ``before`` into ``after`` does to the next
    request: {before, after, rewrite (tokens written again), dollars (the
    difference, None without a price), line}; None without a provider."""
    at = time.time() if now is None else now
    without = reckon(r, basis, before, rates, at)
    with_edit = reckon(r, basis, after, rates, at)
    if without is None or with_edit is None:
        return None
    rewrite = max(with_edit.written - without.written, 0)
    more = None
    if with_edit.dollars is not None and without.dollars is not None:
        more = with_edit.dollars - without.dollars
    return {
        "before": without.as_dict(),
        "after": with_edit.as_dict(),
        "rewrite": rewrite,
        "dollars": more,
        "line": words(with_edit, rewrite, more),
    }


def words(after: Next, rewrite: int, more: float | None) -> str:
    """``cache kept through message 41 (38,200 tokens); the next request re-writes
    6,100 tokens: about $0.0213 more than without the edit``."""
    if after.through is None:
        kept = "nothing cached"
    elif after.through == 0:
        kept = f"cache kept through the system prompt and tools ({after.kept:,} tokens)"
    else:
        kept = f"cache kept through message {after.through} ({after.kept:,} tokens)"
    if rewrite == 0:
        again = "the next request re-writes nothing it would not have written"
    else:
        again = f"the next request re-writes {rewrite:,} tokens"
    if more is None:
        return f"{kept}; {again} (no price known: tokens only)"
    if round(more, 4) == 0:
        return f"{kept}; {again}: about the same cost as without the edit"
    side = "more" if more > 0 else "less"
    return f"{kept}; {again}: about {pricing.money(abs(more))} {side} than without the edit"
