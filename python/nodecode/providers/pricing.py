"""What a request costs in money (``:help nodecode-cost``).

Prices are models.dev's (``providers.catalog``: input, output, cache read and
cache write, US dollars per million tokens), with the provider's documented
rules where models.dev is silent (``WireFormat.cache_rates``: for Anthropic a
read is 0.1×, a 5-minute write 1.25× and a 1-hour write 2× the base input
price). A model without a price, or a request using a part no rule prices,
has no cost: it shows tokens only, never a guessed figure.

A request's cost is reckoned when its usage arrives and logged with it
(``cost`` in the request event), at the prices of that moment;
``recall.spent`` sums a session's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodecode.providers import catalog
from nodecode.providers.types import Usage
from nodecode.providers.wire import WireFormat
from nodecode.words import plural

MILLION = 1_000_000


@dataclass(frozen=True)
class Rates:
    """US dollars per million tokens of each part of a request (None: no price)."""

    input: float
    output: float
    cache_read: float | None
    cache_write: float | None  # a 5-minute entry (every write where there is one kind)
    cache_write_1h: float | None


def rates_of(prices: catalog.Prices | None, wire: WireFormat) -> Rates | None:
    """The rates of a model whose models.dev prices are ``prices``, the wire
    format's documented multiples filling what models.dev leaves out; None
    without an input and an output price."""
    if prices is None or prices.input is None or prices.output is None:
        return None
    rule, base = wire.cache_rates, prices.input

    def by_rule(name: str) -> float | None:
        return base * rule[name] if name in rule else None

    read = prices.cache_read if prices.cache_read is not None else by_rule("cache_read")
    write = prices.cache_write if prices.cache_write is not None else by_rule("cache_write")
    write_1h = by_rule("cache_write_1h")
    return Rates(prices.input, prices.output, read, write, write_1h if rule else write)


def model_rates(
    home: Path | None, dev_key: str | None, model: str | None, wire: WireFormat
) -> Rates | None:
    """The rates of ``model`` of models.dev's provider ``dev_key`` (the refreshed
    copy first, then the snapshot)."""
    return rates_of(catalog.prices(catalog.model(home, dev_key, model)), wire)


@dataclass(frozen=True)
class Parts:
    """A request's input tokens by how they are billed, and its output."""

    uncached: int
    cache_read: int
    cache_write: int  # 5-minute entries
    cache_write_1h: int
    output: int

    @classmethod
    def of(cls, usage: Usage, wire: WireFormat) -> Parts:
        """The parts of a reported usage (``wire`` says what its input figure holds)."""
        written = usage.cache_write
        long = min(usage.cache_write_1h, written)
        uncached = wire.prompt_tokens(usage) - usage.cache_read - written
        return cls(max(uncached, 0), usage.cache_read, written - long, long, usage.output)


def dollars(parts: Parts, rates: Rates | None) -> float | None:
    """What ``parts`` cost at ``rates``; None when a part that is there has no price."""
    if rates is None:
        return None
    priced = (
        (parts.uncached, rates.input),
        (parts.cache_read, rates.cache_read),
        (parts.cache_write, rates.cache_write),
        (parts.cache_write_1h, rates.cache_write_1h),
        (parts.output, rates.output),
    )
    if any(n and rate is None for n, rate in priced):
        return None
    return sum(n * (rate or 0.0) for n, rate in priced) / MILLION


def request_cost(usage: Usage, wire: WireFormat, rates: Rates | None) -> float | None:
    return dollars(Parts.of(usage, wire), rates)


@dataclass(frozen=True)
class Total:
    """The cost of a set of requests: the priced ones' sum and how many had no price."""

    dollars: float
    priced: int
    unpriced: int

    def as_dict(self) -> dict[str, Any]:
        return {"dollars": self.dollars, "priced": self.priced, "unpriced": self.unpriced}

    def plus(self, cost: Any) -> Total:
        """This total and one more request, which logged ``cost``."""
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            return Total(self.dollars + cost, self.priced + 1, self.unpriced)
        return Total(self.dollars, self.priced, self.unpriced + 1)


NONE = Total(0.0, 0, 0)


def money(amount: float) -> str:
    """``$0.0123`` under a dollar (a request costs cents), ``$4.56`` from one on."""
    size = abs(amount)
    sign = "-" if amount < 0 else ""
    return f"{sign}${size:.2f}" if size >= 1 else f"{sign}${size:.4f}"


def total_words(t: Total) -> str:
    """``$0.0456 over 3 requests`` (+ ``, 1 without a price``), or tokens only."""
    if t.priced == 0:
        return "no price known: tokens only" if t.unpriced else "nothing spent yet"
    rest = f", {t.unpriced} without a price" if t.unpriced else ""
    return f"{money(t.dollars)} over {plural(t.priced, 'request')}{rest}"
