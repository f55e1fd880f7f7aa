"""What a wire format is: the one place that knows a provider API's bytes.

A ``WireFormat`` (one module of ``providers/`` each, listed in ``registry``)
turns the core's provider-free description of a request (``Request``: the
arranged messages, the tools, the system prompt, the cache plan as positions,
the thinking setting) into the body it POSTs, streams the answer into a
``Reply`` (its ``StreamParser``), reads usage and recognises overflow, and
knows its URL given the model. The core never names a provider type: it asks
the format.

The same messages always give the same bytes: nothing here depends on time or
on what the provider streamed. Bodies are built from each message's kept block
and JSON, so a request encodes only what the one before it did not send.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nodecode.bounded import Bounded
from nodecode.cache.auto import AutoCache
from nodecode.cache.plan import SHORT
from nodecode.context.arrange import Arranged, sendable
from nodecode.context.message import Message
from nodecode.errors import ConfigError, ProviderError
from nodecode.providers.sse import ServerSentEvent
from nodecode.providers.types import (
    EncodedList,
    Reply,
    Thinking,
    ThinkingSetting,
    ToolCall,
    Usage,
    dumpb,
    parse_json,
)

# Where a request's cache breakpoints go: arranged messages → (index, ttl seconds),
# index -1 being the system prompt (see cache.plan).
Marks = Callable[[list[Message]], list[tuple[int, float]]]
TextSink = Callable[[str], None]


@dataclass
class Request:
    """A request as the core describes it, naming no provider: the messages (an
    ``Arranged``, or a list the format arranges), the model, the system prompt,
    the tools (``name``, ``description``, ``input_schema``), the reply's token
    limit, the cache plan (``marks``, for a format that places cache marks), the
    model's thinking setting and its entry in config.jsonc (``entry``: keys a
    format reads for itself, such as chat completions' ``max_tokens_field``)."""

    messages: list[Message] | Arranged
    model: str
    system: str
    tools: list[dict[str, Any]]
    max_tokens: int
    marks: Marks | None = None
    thinking: ThinkingSetting | None = None
    entry: dict[str, Any] = field(default_factory=dict)
    where: str = "the model"  # what errors about ``entry`` call it
    # Ask the provider why its cache missed (a format that can: Anthropic's cache
    # diagnostics), comparing with the response ``previous`` (None: the first asked).
    diagnose: bool = False
    previous: str | None = None


@dataclass
class Built:
    """A request body plus what the log records about it."""

    body: dict[str, Any]
    sent: list[tuple[int, str]]  # (message id, digest) in order
    breakpoints: list[int] = field(default_factory=list)  # message ids marked (0: the system)
    ttls: list[float] = field(default_factory=list)  # each breakpoint's lifetime, seconds
    arranged: list[Message] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # this request's own headers


class StreamParser:
    """Accumulates one attempt's events into a Reply (one subclass per wire format)."""

    terminal = "its last event"  # named in the "stream ended before ..." failure

    def __init__(self, on_text: TextSink | None, on_thinking: TextSink | None = None) -> None:
        self._on_text = on_text
        self._on_thinking = on_thinking
        self._text: list[str] = []
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.response_id: str | None = None
        self.diagnostics: dict[str, Any] | None = None
        self.finished = False  # the terminal event arrived: stop reading

    def feed(self, event: ServerSentEvent) -> None:
        raise NotImplementedError

    @property
    def complete(self) -> bool:
        """Whether the body may end here without being a dropped stream."""
        return self.finished

    def reply(self) -> Reply:
        return self._reply(partial=False)

    def partial(self) -> Reply:
        """What arrived so far, keeping only tool calls whose input completed."""
        reply = self._reply(partial=True)
        reply.stopped = True
        return reply

    def _reply(self, *, partial: bool) -> Reply:
        return Reply(
            text=self.text,
            calls=self._tool_calls(partial=partial),
            thinking=self._thinking(partial=partial),
            usage=self.usage,
            stop_reason=self.stop_reason,
            id=self.response_id,
            diagnostics=self.diagnostics,
        )

    def _tool_calls(self, *, partial: bool) -> list[ToolCall]:
        """The tool calls so far; when ``partial``, only those whose input completed."""
        raise NotImplementedError

    def _thinking(self, *, partial: bool) -> list[Thinking]:
        """The reasoning so far, in order; when ``partial``, only what completed."""
        return []

    def emit_thinking(self, text: str) -> None:
        """Reasoning text for the person (never reply text)."""
        if text and self._on_thinking is not None:
            self._on_thinking(text)

    def emit_text(self, text: str) -> None:
        if text:
            self._text.append(text)
            if self._on_text is not None:
                self._on_text(text)

    @property
    def text(self) -> str:
        return "".join(self._text)


class WireFormat:
    """One provider API's wire format. A subclass sets the class attributes and
    implements the methods below; ``registry`` maps its ``type`` to it."""

    type: ClassVar[str] = ""  # the config's "type"
    label: ClassVar[str] = ""  # what errors and help call it
    default_base_url: ClassVar[str] = ""
    cache_marks: ClassVar[bool] = False  # requests carry explicit cache breakpoints
    thinking_tag: ClassVar[str] = ""  # the "format" logged with its thinking messages
    # Cache prices as multiples of the base input price, as the provider documents
    # them, for where models.dev is silent (``providers.pricing``): keys ``cache_read``,
    # ``cache_write`` (a 5-minute entry) and ``cache_write_1h``.
    cache_rates: ClassVar[Mapping[str, float]] = {}
    # The provider's automatic prefix cache (a format without cache marks), or None.
    auto_cache: ClassVar[AutoCache | None] = None

    # -- HTTP -------------------------------------------------------------------

    def url(self, base_url: str, model: str) -> str:
        raise NotImplementedError

    def headers(self, api_key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` plus this API's streaming flags."""
        return body

    def parser(self, on_text: TextSink | None, on_thinking: TextSink | None) -> StreamParser:
        raise NotImplementedError

    # -- the request ---------------------------------------------------------------

    def build(self, request: Request) -> Built:
        raise NotImplementedError

    def tool_json(self, tools: list[dict[str, Any]]) -> list[str]:
        """The tool definitions as this wire carries them (what a request's tools cost)."""
        return [json.dumps(t, ensure_ascii=False) for t in self.tools(tools)]

    def tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The core's tool definitions in this wire's shape."""
        return tools

    def tool_id(self, call_seq: int) -> str:
        """The id a call logged at ``call_seq`` has on this wire (ours, made of the seq)."""
        return f"call_nc{call_seq}"

    # -- thinking --------------------------------------------------------------------

    def thinking(self, raw: Any, where: str) -> ThinkingSetting:
        """A model entry's ``thinking`` setting, checked (``where`` names it in errors)."""
        if raw is None:
            return ThinkingSetting()
        raise ConfigError(
            f"config.jsonc: {where}.thinking: the {self.label} wire format has no thinking "
            f"setting (found {raw!r})"
        )

    def carries(self, setting: ThinkingSetting | None) -> Callable[[Message], bool]:
        """Which messages a request of this wire carries: every one but the thinking
        it does not send back. Made once per setting (the arrangement keys on it)."""
        tag = self.thinking_tag
        send = self.sends_thinking(setting)
        if not send:
            return _no_thinking
        return lambda m: m.role != "thinking" or m.payload.get("format") == tag

    def sends_thinking(self, setting: ThinkingSetting | None) -> bool:
        """Whether this wire's own logged thinking goes back in later requests."""
        return False

    def arrangement_key(self, setting: ThinkingSetting | None) -> Hashable:
        """What ``carries`` depends on: two requests with the same key carry the same."""
        return (self.type, self.sends_thinking(setting))

    # -- the answer ----------------------------------------------------------------

    def prompt_tokens(self, usage: Usage) -> int:
        """The request's whole prompt in the provider's own count."""
        return usage.input

    def overflow(self, status: int | None, body: str) -> ProviderError | None:
        """A ContextOverflow when ``body`` says the request exceeds the window."""
        from nodecode.providers.overflow import parse_overflow

        return parse_overflow(status, body)

    # -- shared helpers ------------------------------------------------------------

    def arranged(self, request: Request) -> Arranged:
        """The request's messages arranged (given a list, as this wire carries them)."""
        messages = request.messages
        if isinstance(messages, Arranged):
            return messages
        return Arranged(sendable(messages, self.carries(request.thinking)))


def load_data(data: str, unit: str) -> dict[str, Any]:
    """One event's JSON data (not an object: ``{}``); malformed data is a dropped stream."""
    try:
        value = parse_json(data)
    except ValueError:
        raise ProviderError(f"malformed stream {unit}: {data[:120]}", retryable=True) from None
    return value if isinstance(value, dict) else {}


def parse_input(raw: str) -> Any:
    """A tool's streamed input: ``""`` is ``{}`` (no-argument tools), unparsable stays raw."""
    if not raw.strip():
        return {}
    try:
        return parse_json(raw)
    except ValueError:
        return raw


def _no_thinking(m: Message) -> bool:
    return m.role != "thinking"


def call_input(call: Message) -> Any:
    """A call's input as an object (a non-object input is wrapped)."""
    value = call.payload.get("input")
    return value if isinstance(value, dict) else {"input": value}


def tool_of(m: Message) -> tuple[Any, ...]:
    """What of a result its digest does not name: its call and whether it failed."""
    return (m.call_id, bool(m.payload.get("error"))) if m.role == "tool" else ()


# Blocks and wire messages with their JSON, for the process, by what they are made
# of (digests name the id, role, text and a call's input; a result's call and error
# flag are added; the wire format's type leads the key): an App opening a store
# this process has sent from before (a host's second App on it, a command after an
# ask) encodes none of it again.
_PARTS = Bounded(100_000)


def known_part(key: tuple[Any, ...]) -> Any:
    return _PARTS.get(key)


def keep_part(key: tuple[Any, ...], value: Any) -> Any:
    return _PARTS.keep(key, value)


_ENCODED = Bounded(32)  # what every request starts with, encoded once per process


def encoded(key: Hashable, make: Callable[[], Any]) -> Any:
    """``make()``, kept by ``key`` for the process (system prompts and tool lists:
    a few constants, so the table stays small)."""
    hit = _ENCODED.get(key)
    if hit is None:
        hit = _ENCODED.keep(key, make())
    return hit


def encoded_tools(wire: WireFormat, tools: list[dict[str, Any]]) -> EncodedList:
    """The tool definitions in ``wire``'s shape with their JSON, kept per tools list
    (the prompt's is a constant; another list object is encoded anew)."""
    key = (id(tools), wire.type)
    hit = _ENCODED.get(key)
    if hit is None or hit[0] is not tools:
        items = wire.tools(tools)
        hit = _ENCODED.keep(key, (tools, EncodedList(list(items), [dumpb(t) for t in items])))
    return hit[1]


def default_marks(arranged: list[Message]) -> list[tuple[int, float]]:
    """Without a plan: the system prompt and the end, 5-minute entries."""
    return [(-1, SHORT), (len(arranged) - 1, SHORT)]
