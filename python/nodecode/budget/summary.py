"""A summary of an evicted span, kept as a note in its stub (doc/design.md
"Budget and eviction"; the setting ``evict_summary``).

The request is the context before the eviction (the last request's messages
and its reply: a prefix the provider's cache already holds), then one
instruction naming the span and asking for its summary; it has a time limit
and a token limit.
Any failure (an error, the time limit, an empty reply) gives no summary and
one line saying why: the stub is then the plain one. The originals stay on
the path either way, one recall away.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nodecode.budget.stubs import Unit, stub_payload
from nodecode.context.message import Message
from nodecode.providers import pricing
from nodecode.providers.wire import Request

if TYPE_CHECKING:
    from nodecode.config import Config, ProviderConfig
    from nodecode.providers.http import Provider
    from nodecode.secrets.redact import Redactor
    from nodecode.verbs.prompt import Prompt


class AppNeeds(Protocol):
    """What a summary needs of the App (budget/ sits below app.py): its prompt,
    its provider's client, its redactor and its home."""

    @property
    def redactor(self) -> Redactor: ...

    @property
    def home(self) -> Path: ...

    def prompt(self) -> Prompt: ...

    def provider(self) -> Provider: ...


OFF, AUTO = "off", "auto"
MAX_TOKENS = 512  # the summary's token limit
STOPPED = "stopped before the summary came"  # why a stopped summary left the plain stub
INSTRUCTION = (
    "[nodecode: the messages above from seq {a} to seq {b} are leaving the context. "
    "Write a summary of them for the rest of this session, at most about 300 words: "
    "what was asked, what was found and decided, which files and facts matter. "
    "Plain text, no preamble, no tool calls.]"
)


@dataclass
class Summary:
    """What one summary request gave: the text (None when it failed), its cost, or why not."""

    text: str | None
    tokens: int = 0  # the summary's output tokens
    cost: float | None = None  # the whole request's, when the model is priced
    model: str = ""
    failed: str | None = None

    def note(self, span: tuple[int, int]) -> str:
        """The note the stub keeps: the summary, headed by what it cost."""
        return (
            f"summary of seq {span[0]}\u2013{span[1]} ({self.model}, {self.spent()}):\n{self.text}"
        )

    def spent(self) -> str:
        """``12 tokens`` and, when priced, `` · $0.0012``."""
        return f"{self.tokens} tokens" + (
            f" \u00b7 {pricing.money(self.cost)}" if self.cost is not None else ""
        )


Summarize = Callable[[list[Message], tuple[int, int]], Summary]


def summarizer(
    app: AppNeeds, config: Config, stop: threading.Event | None = None
) -> Summarize | None:
    """What eviction calls to summarize a span, or None with ``evict_summary`` off.
    ``stop``: the turn's cancel (a stop ends the summary request at once)."""
    chosen = str(config.setting("evict_summary") or OFF).strip()
    if chosen == OFF or config.provider is None:
        return None
    model = config.model if chosen == AUTO else chosen
    limit = float(config.setting("evict_summary_timeout"))
    provider = config.provider

    def summarize(prefix: list[Message], span: tuple[int, int]) -> Summary:
        ask = INSTRUCTION.format(a=span[0], b=span[1])
        return aside(app, config, provider, model or "", limit, prefix, ask, MAX_TOKENS, stop)

    return summarize


def aside(
    app: AppNeeds,
    config: Config,
    p: ProviderConfig,
    model: str,
    limit: float,
    prefix: list[Message],
    instruction: str,
    max_tokens: int,
    stop: threading.Event | None = None,
) -> Summary:
    """One request beside the session's turns (a stub's summary, a session's
    title): ``prefix`` (the context a request just sent, which the provider's
    cache holds) and ``instruction`` as the last user message, at most
    ``max_tokens`` and ``limit`` seconds (``stop``: ends it at once). Never
    raises: any failure is a Summary without text saying why, in one redacted line."""
    try:
        ends = (limit, stop)
        return _request(app, config, p, model, ends, prefix, instruction, max_tokens)
    except Exception as e:  # noqa: BLE001 - any failure is said, and the caller falls back
        line = " ".join(str(e).split()) or type(e).__name__
        return Summary(None, model=model, failed=app.redactor.apply(line))


def _request(
    app: AppNeeds,
    config: Config,
    p: ProviderConfig,
    model: str,
    ends: tuple[float, threading.Event | None],
    prefix: list[Message],
    instruction: str,
    max_tokens: int,
) -> Summary:
    wire = config.wire()
    prompt = app.prompt()
    ask = Message(0, "user", instruction)
    entry: dict[str, Any] = p.model_entry(model)
    built = wire.build(
        Request(
            [*prefix, ask],
            model=model,
            system=prompt.system,
            tools=prompt.tools,
            max_tokens=max_tokens,
            entry=entry,
            where=f"providers.{p.id}.models[{model}]",
        )
    )
    limit, stop = ends
    cancel, done = threading.Event(), threading.Event()
    threading.Thread(
        target=_watch, args=(limit, stop, cancel, done), name="nodecode-summary", daemon=True
    ).start()
    try:
        reply = app.provider().stream(built.body, cancel=cancel)
    finally:
        done.set()
    if stop is not None and stop.is_set():
        return Summary(None, model=model, failed=STOPPED)
    if cancel.is_set():
        return Summary(None, model=model, failed=f"no reply within {limit:g} s")
    text = app.redactor.apply(reply.text.strip())
    if not text:
        return Summary(None, model=model, failed="the reply was empty")
    rates = pricing.model_rates(app.home, p.models_dev or p.id, model, wire)
    cost = pricing.request_cost(reply.usage, wire, rates)
    return Summary(text, reply.usage.output, cost, model)


def _watch(
    limit: float, stop: threading.Event | None, cancel: threading.Event, done: threading.Event
) -> None:
    """Cancel the summary request after ``limit`` seconds or at a ``stop``, whichever
    comes first; return as soon as the request is ``done``."""
    end = time.monotonic() + limit
    while not done.wait(0.05):
        if (stop is not None and stop.is_set()) or time.monotonic() >= end:
            cancel.set()
            return


def of_stubs(
    summarize: Summarize | None,
    messages: list[Message],
    items: list[Any],
    unit_of: dict[int, Unit],
    asked: bool = True,
) -> tuple[dict[int, Summary], list[str]]:
    """Each evicted run's summary by its place in ``items`` (none when the setting
    is off: ``summarize`` None), and the receipt's line for each: what it cost,
    or why it failed (its stub is then the plain one). Not ``asked`` (the
    provider just rejected the context as too large, and the summary would send
    it again): none. ``messages``: the context as the eviction found it."""
    if summarize is None:
        return {}, []
    done: dict[int, Summary] = {}
    lines: list[str] = []
    for k, item in enumerate(items):
        if isinstance(item, Message):
            continue
        span = tuple(stub_payload(item, unit_of)["span"])
        fresh = [m for m in item.evicted if m.role != "stub"]
        if not fresh:
            continue
        said = f"summary of seq {span[0]}\u2013{span[1]}"
        if not asked:
            lines.append(f"{said} not asked for: the provider rejected the context as too large")
            continue
        got = summarize(messages, (span[0], span[1]))
        if got.text is None:
            lines.append(f"{said} failed ({got.failed}): the plain stub stands")
        else:
            lines.append(f"{said} in the stub ({got.model}, {got.spent()})")
            done[k] = got
    return done, lines
