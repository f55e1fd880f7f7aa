"""Anthropic Messages API: ``POST {host}/v1/messages`` streamed as SSE.

Event flow and usage rules are in research/providers.md §1.5-1.6. Thinking
blocks (``thinking_delta`` / ``signature_delta``) and ``redacted_thinking``
blocks are kept exactly as streamed, to be sent back (doc/nodecode.txt,
``nodecode-thinking``). Block and delta types this module does not use
(server tools and their results, citations, compaction) are skipped, as the
API's versioning policy asks of clients.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, ClassVar

from nodecode.cache.plan import LONG
from nodecode.context.arrange import ASSISTANT_SIDE, Arranged
from nodecode.context.message import Message
from nodecode.errors import ConfigError, ProviderError
from nodecode.providers.overflow import parse_overflow
from nodecode.providers.sse import ServerSentEvent
from nodecode.providers.types import (
    REDACTED_THINKING,
    EncodedList,
    Thinking,
    ThinkingSetting,
    ToolCall,
    Usage,
    dumpb,
)
from nodecode.providers.wire import (
    Built,
    Request,
    StreamParser,
    TextSink,
    WireFormat,
    call_input,
    default_marks,
    encoded,
    encoded_tools,
    keep_part,
    known_part,
    load_data,
    parse_input,
    tool_of,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
# Cache diagnostics (platform.claude.com/docs/en/build-with-claude/cache-diagnostics):
# this beta header on every request, and ``diagnostics.previous_message_id`` naming the
# previous response (null on the first); the response's ``diagnostics.cache_miss_reason``
# says where the two requests diverged (doc/design.md "The cache").
DIAGNOSTICS_BETA = "cache-diagnosis-2026-04-07"
MISS_REASONS = (
    "model_changed",
    "system_changed",
    "tools_changed",
    "messages_changed",
    "previous_message_not_found",
    "unavailable",
)
_RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
_USAGE_FIELDS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}
THINKING_BLOCKS = ("thinking", "redacted_thinking")
CACHE = {"type": "ephemeral"}  # a 5-minute entry
CACHE_1H = {"type": "ephemeral", "ttl": "1h"}
THINKING_KINDS = ("adaptive", "enabled")  # thinking.type values that turn it on
EFFORTS = ("low", "medium", "high", "max")  # effort levels (output_config.effort)
MIN_BUDGET = 1024  # the smallest budget_tokens


class AnthropicWire(WireFormat):
    """The Messages API; ``base_url`` is the host, e.g. https://api.anthropic.com."""

    # "Pricing" of https://platform.claude.com/docs/en/build-with-claude/prompt-caching:
    # a read 0.1×, a 5-minute write 1.25×, a 1-hour write 2× the base input price.
    cache_rates: ClassVar[Mapping[str, float]] = {
        "cache_read": 0.1,
        "cache_write": 1.25,
        "cache_write_1h": 2.0,
    }

    type = "anthropic"
    label = "Anthropic"
    default_base_url = DEFAULT_BASE_URL
    cache_marks = True  # cache breakpoints are the request's to place (cache.plan)
    thinking_tag = "anthropic"

    def url(self, base_url: str, model: str) -> str:
        return f"{base_url}/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "accept": "text/event-stream"}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def parser(self, on_text: TextSink | None, on_thinking: TextSink | None) -> StreamParser:
        return AnthropicParser(on_text, on_thinking)

    def build(self, request: Request) -> Built:
        return _body(self, request)

    def tool_id(self, call_seq: int) -> str:
        return f"toolu_nc{call_seq}"

    def thinking(self, raw: Any, where: str) -> ThinkingSetting:
        return _thinking_setting(raw, where)

    def sends_thinking(self, setting: ThinkingSetting | None) -> bool:
        return True  # every thinking block goes back, finished turns' too (the prefix keeps)

    def prompt_tokens(self, usage: Usage) -> int:
        return usage.input + usage.cache_read + usage.cache_write  # input is the uncached part


WIRE = AnthropicWire()


@dataclass
class _Block:
    """One content block as it streams: text, tool_use and the thinking kinds matter here."""

    type: str
    id: str = ""
    name: str = ""
    json: list[str] = field(default_factory=list)
    done: bool = False
    start: dict[str, Any] = field(default_factory=dict)  # content_block_start's block, as sent
    thinking: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)

    def exact(self) -> dict[str, Any]:
        """A thinking block as the final message would hold it: the start's fields,
        with the streamed thinking and signature appended to what the start held."""
        block = dict(self.start)
        if self.type == "thinking":
            block["thinking"] = str(self.start.get("thinking") or "") + "".join(self.thinking)
            block["signature"] = str(self.start.get("signature") or "") + "".join(self.signature)
        return block


class AnthropicParser(StreamParser):
    """Anthropic stream events → Reply."""

    terminal = "message_stop"

    def __init__(self, on_text: TextSink | None, on_thinking: TextSink | None = None) -> None:
        super().__init__(on_text, on_thinking)
        self._blocks: dict[int, _Block] = {}

    def feed(self, event: ServerSentEvent) -> None:
        data = load_data(event.data, "event")
        kind = data.get("type") or event.event
        if kind == "error" or event.event == "error":
            raise _stream_error(event.data, data)
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(self, data)

    def _on_message_start(self, data: dict[str, Any]) -> None:
        message = data.get("message") or {}
        self._merge_usage(message.get("usage"))
        if isinstance(message.get("id"), str):
            self.response_id = message["id"]
        self._diagnostics(message.get("diagnostics"))

    def _diagnostics(self, raw: Any) -> None:
        """A response's ``diagnostics``: its ``cache_miss_reason`` (null: no divergence
        found, or the comparison still running) as {"type", "missed"}."""
        reason = raw.get("cache_miss_reason") if isinstance(raw, dict) else None
        if isinstance(reason, dict) and isinstance(reason.get("type"), str):
            missed = reason.get("cache_missed_input_tokens")
            self.diagnostics = {
                "type": reason["type"],
                "missed": missed if isinstance(missed, int) and missed >= 0 else None,
            }

    def _on_content_block_start(self, data: dict[str, Any]) -> None:
        block = data.get("content_block") or {}
        self._blocks[data.get("index", len(self._blocks))] = _Block(
            type=str(block.get("type", "")),
            id=str(block.get("id") or ""),
            name=str(block.get("name") or ""),
            start=dict(block) if block.get("type") in THINKING_BLOCKS else {},
        )
        if block.get("type") == "text":
            self.emit_text(block.get("text") or "")
        elif block.get("type") == "thinking":
            self.emit_thinking(str(block.get("thinking") or ""))
        elif block.get("type") == "redacted_thinking":
            self.emit_thinking(REDACTED_THINKING + "\n")

    def _on_content_block_delta(self, data: dict[str, Any]) -> None:
        block = self._blocks.get(data.get("index", -1))
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta" and (block is None or block.type == "text"):
            self.emit_text(delta.get("text") or "")
        elif delta.get("type") == "input_json_delta" and block is not None:
            block.json.append(delta.get("partial_json") or "")
        elif delta.get("type") == "thinking_delta" and block is not None:
            block.thinking.append(str(delta.get("thinking") or ""))
            self.emit_thinking(str(delta.get("thinking") or ""))
        elif delta.get("type") == "signature_delta" and block is not None:
            block.signature.append(str(delta.get("signature") or ""))

    def _on_content_block_stop(self, data: dict[str, Any]) -> None:
        block = self._blocks.get(data.get("index", -1))
        if block is not None:
            block.done = True

    def _on_message_delta(self, data: dict[str, Any]) -> None:
        stop = (data.get("delta") or {}).get("stop_reason")
        self.stop_reason = stop or self.stop_reason
        self._merge_usage(data.get("usage"))
        if "diagnostics" in data:  # where a later figure would ride, as usage does
            self._diagnostics(data.get("diagnostics"))

    def _on_message_stop(self, data: dict[str, Any]) -> None:
        self.finished = True

    def _merge_usage(self, usage: dict[str, Any] | None) -> None:
        """Later figures overwrite earlier ones, but only when present and not null."""
        for wire_name, ours in _USAGE_FIELDS.items():
            value = (usage or {}).get(wire_name)
            if isinstance(value, int):
                setattr(self.usage, ours, value)
        details = (usage or {}).get("output_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("thinking_tokens"), int):
            self.usage.thinking = details["thinking_tokens"]
        creation = (usage or {}).get("cache_creation")  # the writes by lifetime (pricing)
        if isinstance(creation, dict) and isinstance(
            creation.get("ephemeral_1h_input_tokens"), int
        ):
            self.usage.cache_write_1h = creation["ephemeral_1h_input_tokens"]

    _handlers: ClassVar[dict[str, Any]] = {
        "message_start": _on_message_start,
        "content_block_start": _on_content_block_start,
        "content_block_delta": _on_content_block_delta,
        "content_block_stop": _on_content_block_stop,
        "message_delta": _on_message_delta,
        "message_stop": _on_message_stop,
    }  # ping and unknown events are skipped

    def _tool_calls(self, *, partial: bool) -> list[ToolCall]:
        return [
            ToolCall(block.id, block.name, parse_input("".join(block.json)))
            for _, block in sorted(self._blocks.items())
            if block.type == "tool_use" and (block.done or not partial)
        ]

    def _thinking(self, *, partial: bool) -> list[Thinking]:
        """Thinking and redacted_thinking blocks in index order; a partial reply keeps
        only those that stopped (an unfinished one has no signature to send back)."""
        out = []
        for _, block in sorted(self._blocks.items()):
            if block.type in THINKING_BLOCKS and (block.done or not partial):
                exact = block.exact()
                text = exact.get("thinking", "") if block.type == "thinking" else REDACTED_THINKING
                out.append(Thinking(str(text), exact))
        return out


def _stream_error(raw: str, data: dict[str, Any]) -> ProviderError:
    """An ``event: error`` after a 200: overloaded is retried like an HTTP 529."""
    overflow = parse_overflow(None, raw)
    if overflow is not None:
        return overflow
    nested = data.get("error")
    error = nested if isinstance(nested, dict) else {}
    kind, message = str(error.get("type") or "error"), str(error.get("message") or "")
    return ProviderError(
        f"stream error {kind}: {message}", retryable=kind in _RETRYABLE_STREAM_ERRORS
    )


# -- the request body ----------------------------------------------------------


def _cache(ttl: float) -> dict[str, str]:
    return dict(CACHE_1H) if ttl >= LONG else dict(CACHE)


def _body(wire: AnthropicWire, request: Request) -> Built:
    arr = wire.arranged(request)
    arranged = arr.out
    marks = request.marks or default_marks
    placed = sorted(p for p in marks(arranged) if _markable(arranged, p[0]))
    system_ttl: float | None = None
    ttl_at: dict[int, float] = {}
    for at, ttl in placed:
        if at < 0:
            system_ttl = ttl
        else:
            ttl_at[at] = ttl
    messages, parts = _anthropic_wire(arr, ttl_at)
    body = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": _system_blocks(request.system, system_ttl),
        "tools": encoded_tools(wire, request.tools),
        "messages": EncodedList(messages, parts),
    }
    thinking = request.thinking
    if thinking is not None and thinking.wire is not None:
        body["thinking"] = dict(thinking.wire)
    if thinking is not None and thinking.effort is not None:
        body["output_config"] = {"effort": thinking.effort}
    headers: dict[str, str] = {}
    if request.diagnose:  # null on the first request asked: it opts in
        body["diagnostics"] = {"previous_message_id": request.previous}
        headers["anthropic-beta"] = DIAGNOSTICS_BETA
    ids = [arranged[i].id if i >= 0 else 0 for i, _ in placed]
    return Built(body, arr.sent, ids, [ttl for _, ttl in placed], arranged, headers)


def _markable(arranged: list[Message], at: int) -> bool:
    return at < 0 or arranged[at].role != "thinking"


def _side(m: Message) -> str:
    return "assistant" if m.role in ASSISTANT_SIDE else "user"


_SIDES = {role: "assistant" for role in ASSISTANT_SIDE}
_HEADS = {side: b'{"role":"%s","content":[' % side.encode() for side in ("user", "assistant")}


def _anthropic_wire(
    arr: Arranged, ttl_at: dict[int, float]
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The wire messages (runs of one side) and their JSON. The previous request's
    are kept where they cover only positions it shares with this one and no
    breakpoint of either; the rest are made from the messages' kept blocks."""
    out = arr.out
    starts: list[int] = []
    ends: list[int] = []  # exclusive
    msgs: list[dict[str, Any]] = []
    texts: list[bytes] = []
    old = arr.previous.memo.get("anthropic-wire") if arr.previous is not None else None
    if old is not None:
        kept = bisect.bisect_left(old[1], arr.same)  # runs that end before a change
        starts, ends, msgs, texts = (list(x[:kept]) for x in old[:4])
        marked = old[4] | ttl_at.keys()  # breakpoints then and now
        for i in marked:
            w = bisect.bisect_right(starts, i) - 1
            if 0 <= w < kept and i < ends[w]:  # its run is made again, with today's
                msgs[w], texts[w] = _anthropic_message(out, starts[w], ends[w], ttl_at)
    i = ends[-1] if ends else 0
    n, first = len(out), i
    sides = [_SIDES.get(m.role, "user") for m in islice(out, i, None)]  # constant strings
    while i < n:
        side, j = sides[i - first], i + 1
        while j < n and sides[j - first] is side:
            j += 1
        msg, text = (
            _run_of(out, i, j, ttl_at) if i not in ttl_at else _anthropic_message(out, i, j, ttl_at)
        )
        starts.append(i)
        ends.append(j)
        msgs.append(msg)
        texts.append(text)
        i = j
    arr.memo["anthropic-wire"] = (starts, ends, msgs, texts, set(ttl_at))
    return msgs, texts


def _run_of(
    out: list[Message], i: int, j: int, ttl_at: dict[int, float]
) -> tuple[dict[str, Any], bytes]:
    """``_anthropic_message`` of ``out[i:j]``, kept on its first message with the
    run's messages: the same objects (a state read again in any App of the process
    holds them, see ``model._ROWS``) make the same wire message, so a new App's first
    request encodes only what no App sent before. A breakpoint inside makes it anew."""
    first = out[i]
    memo = first.memo.get("anthropic:run")
    if j == i + 1:
        if memo is not None and memo[0] is None:
            return memo[1], memo[2]
        block, text = _block_of(first)
        side = _SIDES.get(first.role, "user")
        msg, text = {"role": side, "content": [block]}, _HEADS[side] + text + b"]}"
        first.memo["anthropic:run"] = (None, msg, text)
        return msg, text
    if ttl_at and any(k in ttl_at for k in range(i + 1, j)):
        return _anthropic_message(out, i, j, ttl_at)
    rest = tuple(islice(out, i + 1, j))
    # The very objects, not equal ones: messages of two sessions may be equal (the
    # same seq, role, text and turn) and differ in their payload (a thinking block).
    if memo is not None:
        kept = memo[0]  # None: kept as a one-block run
        if kept is not None and len(kept) == len(rest) and all(map(operator.is_, kept, rest)):
            return memo[1], memo[2]
    msg, text = _anthropic_message(out, i, j, ttl_at)
    first.memo["anthropic:run"] = (rest, msg, text)
    return msg, text


def _anthropic_message(
    out: list[Message], i: int, j: int, ttl_at: dict[int, float]
) -> tuple[dict[str, Any], bytes]:
    """The wire message of ``out[i:j]`` (one side), results first (stable), and its JSON."""
    side = _side(out[i])
    blocks = [_block_of(out[k], ttl_at.get(k)) for k in range(i, j)]
    if len(blocks) > 1:  # results first in a user message, thinking in an assistant's
        if side == "user":
            blocks.sort(key=lambda b: b[0]["type"] != "tool_result")
        else:
            blocks.sort(key=lambda b: b[0]["type"] not in THINKING_BLOCKS)
    msg = {"role": side, "content": [b for b, _ in blocks]}
    return msg, _HEADS[side] + b",".join([t for _, t in blocks]) + b"]}"


def _block_of(m: Message, ttl: float | None = None) -> tuple[dict[str, Any], bytes]:
    """The message's block (with a breakpoint of ``ttl``) and its JSON, made once
    per message object (messages are immutable): a request encodes only the new."""
    if ttl is None:
        hit = m.memo.get("anthropic:block")
        if hit is None:
            key = ("anthropic", m.digest, *tool_of(m))
            hit = known_part(key)
            if hit is None:
                block = _anthropic_block(m)
                hit = keep_part(key, (block, dumpb(block)))
            m.memo["anthropic:block"] = hit
        return hit
    marked = m.memo.setdefault("anthropic:marked", {})
    hit = marked.get(ttl)
    if hit is None:
        key = ("anthropic", m.digest, *tool_of(m), ttl)
        hit = known_part(key)
        if hit is None:
            block = {**_block_of(m)[0], "cache_control": _cache(ttl)}
            hit = keep_part(key, (block, dumpb(block)))
        marked[ttl] = hit
    return hit


def _anthropic_block(m: Message) -> dict[str, Any]:
    if m.role == "thinking":
        return dict(m.payload["block"])  # as streamed, signature and data byte for byte
    if m.role == "call":
        return {
            "type": "tool_use",
            "id": WIRE.tool_id(m.id),
            "name": m.payload.get("name", "eval"),
            "input": call_input(m),
        }
    if m.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": WIRE.tool_id(m.call_id or 0),
            "content": m.text,
        }
        if m.payload.get("error"):
            block["is_error"] = True
        return block
    return {"type": "text", "text": m.text}


def _system_blocks(system: str, ttl: float | None) -> EncodedList:
    """The Anthropic system prompt's block list (a breakpoint on it when ``ttl``)."""

    def make() -> EncodedList:
        block: dict[str, Any] = {"type": "text", "text": system}
        if ttl is not None:
            block["cache_control"] = _cache(ttl)
        return EncodedList([block], [dumpb(block)])

    return encoded(("system-blocks", system, ttl), make)


# -- the thinking setting ---------------------------------------------------------


def _thinking_setting(raw: Any, where: str) -> ThinkingSetting:
    """A model entry's ``thinking``: ``type`` adaptive or enabled (with ``budget_tokens``),
    and an ``effort`` level (sent as ``output_config.effort``)."""
    if raw is None:
        return ThinkingSetting()
    if not isinstance(raw, dict):
        raise ConfigError(f"config.jsonc: {where}.thinking must be an object (found {raw!r})")
    kind = raw.get("type")
    if kind not in THINKING_KINDS:
        raise ConfigError(
            f'config.jsonc: {where}.thinking.type must be "adaptive" or "enabled" (found {kind!r})'
        )
    budget = raw.get("budget_tokens")
    if kind == "enabled" and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_BUDGET
    ):
        raise ConfigError(
            f"config.jsonc: {where}.thinking.budget_tokens must be a whole number of at least "
            f'{MIN_BUDGET} with "type": "enabled" (found {budget!r})'
        )
    effort = raw.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise ConfigError(
            f"config.jsonc: {where}.thinking.effort must be one of {', '.join(EFFORTS)} "
            f"(found {effort!r})"
        )
    return ThinkingSetting({k: v for k, v in raw.items() if k != "effort"}, effort)
