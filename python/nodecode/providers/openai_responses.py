"""OpenAI's Responses API: ``POST {base_url}/responses`` streamed as SSE.

The request is ``instructions`` plus ``input``, a list of items: user and
assistant messages, ``function_call`` and ``function_call_output`` items (the
call ids nodecode makes from seqs), and the ``reasoning`` items earlier replies
streamed. Reasoning is asked for stateless (``store: false`` with
``include: ["reasoning.encrypted_content"]``), so each reasoning item comes
back encrypted and goes back in later requests exactly as it arrived, like
Anthropic's thinking blocks; its summary is what the person reads
(doc/nodecode.txt, ``nodecode-thinking``). Events are ``response.*``, named by
their ``type`` (recorded streams carry no ``event:`` line); those this module
does not use (refusals, annotations, hosted tools) are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nodecode.context.arrange import USER_SIDE
from nodecode.context.message import Message
from nodecode.errors import ConfigError, ProviderError
from nodecode.providers.openai import OPENAI_CACHE
from nodecode.providers.overflow import parse_overflow
from nodecode.providers.sse import DONE, ServerSentEvent
from nodecode.providers.types import EncodedList, Thinking, ThinkingSetting, ToolCall, count, dumpb
from nodecode.providers.wire import (
    Built,
    Request,
    StreamParser,
    TextSink,
    WireFormat,
    call_input,
    encoded_tools,
    keep_part,
    known_part,
    load_data,
    parse_input,
    tool_of,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
TAG = "openai-responses"  # the format logged with its reasoning items
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
SUMMARIES = ("auto", "concise", "detailed")
ENCRYPTED_REASONING = "[reasoning: encrypted by the provider, sent back as received]"
_RETRYABLE_CODES = {"server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down"}


class ResponsesWire(WireFormat):
    """The Responses API; ``base_url`` includes ``/v1`` (https://api.openai.com/v1)."""

    type = "openai-responses"
    label = "OpenAI Responses"
    default_base_url = DEFAULT_BASE_URL
    thinking_tag = TAG
    auto_cache = OPENAI_CACHE

    def url(self, base_url: str, model: str) -> str:
        return f"{base_url}/responses"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def parser(self, on_text: TextSink | None, on_thinking: TextSink | None) -> StreamParser:
        return ResponsesParser(on_text, on_thinking)

    def build(self, request: Request) -> Built:
        return _body(self, request)

    def tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_function_tool(t) for t in tools]

    def thinking(self, raw: Any, where: str) -> ThinkingSetting:
        return _thinking_setting(raw, where)

    def sends_thinking(self, setting: ThinkingSetting | None) -> bool:
        return True  # reasoning items go back, as the API asks of stateless callers


WIRE = ResponsesWire()


# -- the stream ------------------------------------------------------------------


@dataclass
class _Call:
    call_id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)
    done: bool = False


@dataclass
class _Reasoning:
    """One reasoning item: its summary as it streams, the item whole once done."""

    parts: list[str] = field(default_factory=list)
    item: dict[str, Any] | None = None


class ResponsesParser(StreamParser):
    """``response.*`` events → Reply."""

    terminal = "response.completed"

    def __init__(self, on_text: TextSink | None, on_thinking: TextSink | None = None) -> None:
        super().__init__(on_text, on_thinking)
        self._calls: dict[Any, _Call] = {}  # by output_index
        self._reasoning: dict[Any, _Reasoning] = {}

    def feed(self, event: ServerSentEvent) -> None:
        if event.data == DONE:
            return
        data = load_data(event.data, "event")
        kind = str(data.get("type") or event.event or "")
        if kind == "error" or event.event == "error":
            raise _stream_error(data)
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(self, data)

    def _on_text_delta(self, data: dict[str, Any]) -> None:
        self.emit_text(str(data.get("delta") or ""))

    def _on_summary_part(self, data: dict[str, Any]) -> None:
        reasoning = self._reasoning.setdefault(data.get("output_index"), _Reasoning())
        if reasoning.parts:  # summaries are paragraphs of one thought
            reasoning.parts.append("\n\n")
            self.emit_thinking("\n\n")

    def _on_reasoning_delta(self, data: dict[str, Any]) -> None:
        text = str(data.get("delta") or "")
        self._reasoning.setdefault(data.get("output_index"), _Reasoning()).parts.append(text)
        self.emit_thinking(text)

    def _on_item_added(self, data: dict[str, Any]) -> None:
        item = data.get("item") or {}
        if item.get("type") == "function_call":
            self._calls[data.get("output_index")] = _Call(
                str(item.get("call_id") or ""), str(item.get("name") or "")
            )

    def _on_arguments_delta(self, data: dict[str, Any]) -> None:
        call = self._calls.get(data.get("output_index"))
        if call is not None:
            call.args.append(str(data.get("delta") or ""))

    def _on_item_done(self, data: dict[str, Any]) -> None:
        item = data.get("item") or {}
        at = data.get("output_index")
        if item.get("type") == "reasoning":
            self._reasoning.setdefault(at, _Reasoning()).item = item
        elif item.get("type") == "function_call":
            call = self._calls.setdefault(at, _Call())
            call.call_id = str(item.get("call_id") or call.call_id)
            call.name = str(item.get("name") or call.name)
            if isinstance(item.get("arguments"), str):  # the whole arguments, authoritative
                call.args = [item["arguments"]]
            call.done = True

    def _on_completed(self, data: dict[str, Any]) -> None:
        response = data.get("response") or {}
        self._set_usage(response.get("usage") or {})
        reason = (response.get("incomplete_details") or {}).get("reason")
        self.stop_reason = reason or ("tool_calls" if self._calls else "stop")
        self.finished = True

    def _on_failed(self, data: dict[str, Any]) -> None:
        raise _stream_error({"error": (data.get("response") or {}).get("error") or {}})

    def _set_usage(self, usage: dict[str, Any]) -> None:
        self.usage.input = count(usage.get("input_tokens"))
        self.usage.output = count(usage.get("output_tokens"))
        self.usage.cache_read = count(
            (usage.get("input_tokens_details") or {}).get("cached_tokens")
        )
        self.usage.thinking = count(
            (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
        )

    _handlers: ClassVar[dict[str, Any]] = {
        "response.output_text.delta": _on_text_delta,
        "response.reasoning_summary_part.added": _on_summary_part,
        "response.reasoning_summary_text.delta": _on_reasoning_delta,
        "response.reasoning_text.delta": _on_reasoning_delta,
        "response.output_item.added": _on_item_added,
        "response.function_call_arguments.delta": _on_arguments_delta,
        "response.output_item.done": _on_item_done,
        "response.completed": _on_completed,
        "response.incomplete": _on_completed,
        "response.failed": _on_failed,
    }

    def _tool_calls(self, *, partial: bool) -> list[ToolCall]:
        return [
            ToolCall(call.call_id, call.name, parse_input("".join(call.args)))
            for _, call in sorted(self._calls.items(), key=_order)
            if call.done or not partial
        ]

    def _thinking(self, *, partial: bool) -> list[Thinking]:
        """Each finished reasoning item, whole: an unfinished one has no encrypted
        content to send back."""
        out = []
        for _, r in sorted(self._reasoning.items(), key=_order):
            if r.item is not None:
                out.append(Thinking(_summary(r.item) or "".join(r.parts), r.item))
        return out


def _order(pair: tuple[Any, Any]) -> int:
    return pair[0] if isinstance(pair[0], int) else 0


def _summary(item: dict[str, Any]) -> str:
    """What a reasoning item says to the person: its summary, else that it is sealed."""
    texts = [
        str(s.get("text") or "")
        for s in item.get("summary") or []
        if isinstance(s, dict) and s.get("text")
    ]
    texts += [
        str(c.get("text") or "")
        for c in item.get("content") or []
        if isinstance(c, dict) and c.get("type") == "reasoning_text" and c.get("text")
    ]
    return "\n\n".join(texts) or ENCRYPTED_REASONING


def _stream_error(data: dict[str, Any]) -> ProviderError:
    """An ``error`` event (or a failed response) after a 200; overflow first."""
    raw = json.dumps(data if "error" in data else {"error": data})
    overflow = parse_overflow(None, raw)
    if overflow is not None:
        return overflow
    nested = data.get("error")
    error = nested if isinstance(nested, dict) else data
    code = str(error.get("code") or error.get("type") or "error")
    message = str(error.get("message") or "")
    return ProviderError(f"stream error {code}: {message}", retryable=code in _RETRYABLE_CODES)


# -- the request body ----------------------------------------------------------


def _body(wire: ResponsesWire, request: Request) -> Built:
    arr = wire.arranged(request)
    out = arr.out
    kept = [k for k, m in enumerate(out) if m.role != "thinking" or _followed(out, k)]
    items = [_item_of(out[k]) for k in kept]
    body: dict[str, Any] = {
        "model": request.model,
        "instructions": request.system,
        "input": EncodedList([i for i, _ in items], [t for _, t in items]),
        "tools": encoded_tools(wire, request.tools),
        "max_output_tokens": request.max_tokens,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    thinking = request.thinking
    if thinking is not None and thinking.wire is not None:
        body["reasoning"] = dict(thinking.wire)
    return Built(body, arr.sent, arranged=out)


def _followed(out: list[Message], k: int) -> bool:
    """A reasoning item must be followed by the message or call it led to (the API
    refuses one "provided without its required following item")."""
    for m in out[k + 1 :]:
        if m.role != "thinking":
            return m.role not in USER_SIDE and m.role != "tool"
    return False


def _item_of(m: Message) -> tuple[dict[str, Any], bytes]:
    """The message's input item and its JSON, made once per message object."""
    hit = m.memo.get("responses:item")
    if hit is None:
        key = (TAG, m.digest, *tool_of(m))
        hit = known_part(key)
        if hit is None:
            item = _input_item(m)
            hit = keep_part(key, (item, dumpb(item)))
        m.memo["responses:item"] = hit
    return hit


def _input_item(m: Message) -> dict[str, Any]:
    if m.role == "thinking":
        return dict(m.payload["block"])  # the reasoning item as streamed, byte for byte
    if m.role == "call":
        return {
            "type": "function_call",
            "call_id": WIRE.tool_id(m.id),
            "name": m.payload.get("name", "eval"),
            "arguments": json.dumps(call_input(m), ensure_ascii=False),
        }
    if m.role == "tool":
        return {
            "type": "function_call_output",
            "call_id": WIRE.tool_id(m.call_id or 0),
            "output": m.text,
        }
    role = "user" if m.role in USER_SIDE else "assistant"
    return {"role": role, "content": m.text}


def _function_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool["name"],
        "description": tool["description"],
        "parameters": tool["input_schema"],
        "strict": False,  # strict mode rewrites what a schema may say; ours is the model's
    }


# -- the thinking setting ---------------------------------------------------------


def _thinking_setting(raw: Any, where: str) -> ThinkingSetting:
    """A model entry's ``thinking``: ``effort`` and ``summary``, sent as ``reasoning``
    (a summary is what the person sees; ``"auto"`` unless said)."""
    if raw is None:
        return ThinkingSetting()
    if not isinstance(raw, dict):
        raise ConfigError(f"config.jsonc: {where}.thinking must be an object (found {raw!r})")
    extra = sorted(set(raw) - {"effort", "summary"})
    if extra:
        raise ConfigError(
            f'config.jsonc: {where}.thinking for the Responses API takes "effort" and "summary" '
            f"(found key {extra[0]!r})"
        )
    effort, summary = raw.get("effort"), raw.get("summary", "auto")
    if effort is not None and effort not in EFFORTS:
        raise ConfigError(
            f"config.jsonc: {where}.thinking.effort must be one of {', '.join(EFFORTS)} "
            f"(found {effort!r})"
        )
    if summary not in SUMMARIES:
        raise ConfigError(
            f"config.jsonc: {where}.thinking.summary must be one of {', '.join(SUMMARIES)} "
            f"(found {summary!r})"
        )
    reasoning = {"summary": summary} | ({"effort": effort} if effort is not None else {})
    return ThinkingSetting(reasoning, effort)
