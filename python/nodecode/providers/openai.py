"""OpenAI Chat Completions and every compatible server, streamed.

``POST {base_url}/chat/completions`` (``base_url`` includes ``/v1``). Chunk
shapes and the quirks tolerated here are in research/providers.md §2.2-2.4:
tool calls accumulate by ``index`` (id and name only on the first fragment,
repeats ignored, a missing index means "new call when the id changes"),
usage comes from whichever chunk carries it, and Ollama's native NDJSON
(``message`` / ``done``) parses too. Reasoning is never reply text: it
arrives as ``reasoning_content`` (DeepSeek, llama.cpp, older vLLM),
``reasoning`` (OpenRouter, vLLM ≥ 0.11) and ``reasoning_details``
(OpenRouter: typed items whose streamed fragments share an index and a
type), and is kept under the names it arrived with, so that it can go back
as received (doc/nodecode.txt, ``nodecode-thinking``).
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

from nodecode.cache.auto import AutoCache
from nodecode.context.arrange import USER_SIDE, Arranged
from nodecode.context.message import Message
from nodecode.errors import ConfigError, ProviderError
from nodecode.providers.overflow import parse_overflow, unwrap_error
from nodecode.providers.sse import DONE, ServerSentEvent
from nodecode.providers.types import EncodedList, Thinking, ThinkingSetting, ToolCall, count, dumpb
from nodecode.providers.wire import (
    Built,
    Request,
    StreamParser,
    TextSink,
    WireFormat,
    call_input,
    encoded,
    encoded_tools,
    keep_part,
    known_part,
    load_data,
    parse_input,
    tool_of,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# OpenAI's prompt caching guide: automatic for prompts of 1,024 tokens or more, hits
# in steps of 128 tokens past them, entries cleared after 5–10 minutes unused (the
# shorter bound is taken). Chat completions and the Responses API alike.
OPENAI_CACHE = AutoCache(
    "OpenAI's automatic cache",
    default_minimum=1024,
    step=128,
    lifetime=300.0,
    source="https://platform.openai.com/docs/guides/prompt-caching",
)
_TRANSIENT = re.compile(
    r"overload|rate.?limit|timed? ?out|timeout|temporar|unavailable|try again|server.?error|"
    r"internal error|capacity",
    re.IGNORECASE,
)
_TRANSIENT_CODES = {"408", "409", "429", "500", "502", "503", "504", "529"}
MAX_TOKENS, MAX_COMPLETION_TOKENS = "max_tokens", "max_completion_tokens"
# OpenAI's model ids that take only max_completion_tokens, optionally behind a
# router's "openai/" prefix: the o-series and the gpt-5 family.
_REASONING_MODEL = re.compile(r"^(?:openai/)?(?:o\d+(?:$|[-.])|gpt-5)", re.IGNORECASE)
REASONING_FIELDS = ("reasoning_content", "reasoning")  # the first present in a delta is read
_DETAIL_TEXT = ("text", "summary", "data", "signature")  # fragments of one detail join


class OpenAIWire(WireFormat):
    """Chat Completions; ``base_url`` includes ``/v1`` (https://api.openai.com/v1)."""

    type = "openai"
    label = "OpenAI chat completions"
    default_base_url = DEFAULT_BASE_URL
    thinking_tag = "openai"
    auto_cache = OPENAI_CACHE

    def url(self, base_url: str, model: str) -> str:
        return f"{base_url}/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        options = {**(body.get("stream_options") or {}), "include_usage": True}
        return {**body, "stream": True, "stream_options": options}

    def parser(self, on_text: TextSink | None, on_thinking: TextSink | None) -> StreamParser:
        return OpenAIParser(on_text, on_thinking)

    def build(self, request: Request) -> Built:
        return _body(self, request)

    def tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_openai_tool(t) for t in tools]

    def thinking(self, raw: Any, where: str) -> ThinkingSetting:
        """Reasoning always shows; ``{"send_back": true}`` sends it back in later
        requests (DeepSeek's thinking mode wants it)."""
        if raw is None:
            return ThinkingSetting()
        if not isinstance(raw, dict):
            raise ConfigError(f"config.jsonc: {where}.thinking must be an object (found {raw!r})")
        extra = sorted(set(raw) - {"send_back"})
        send_back = raw.get("send_back", False)
        if extra or not isinstance(send_back, bool):
            found = f"key {extra[0]!r}" if extra else repr(send_back)
            raise ConfigError(
                f"config.jsonc: {where}.thinking for an OpenAI-compatible provider must be "
                f'{{"send_back": true | false}} (found {found})'
            )
        return ThinkingSetting(send_back=send_back)

    def sends_thinking(self, setting: ThinkingSetting | None) -> bool:
        return setting is not None and setting.send_back


WIRE = OpenAIWire()


@dataclass
class _Call:
    """One tool call as its fragments arrive."""

    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)
    obj: Any = None  # Ollama sends arguments as an object, whole


class OpenAIParser(StreamParser):
    """Chat-completion chunks (or Ollama native lines) → Reply."""

    terminal = "[DONE] or a finish_reason with usage"

    def __init__(self, on_text: TextSink | None, on_thinking: TextSink | None = None) -> None:
        super().__init__(on_text, on_thinking)
        self._calls: list[_Call] = []
        self._by_index: dict[int, _Call] = {}
        self._usage_seen = False
        self._reasoning = _Reasoning()

    @property
    def complete(self) -> bool:
        return self.finished or (self.stop_reason is not None and self._usage_seen)

    def feed(self, event: ServerSentEvent) -> None:
        if event.data == DONE:
            self.finished = True
            return
        data = load_data(event.data, "chunk")
        if data.get("error"):
            raise _stream_error(event.data)
        if "choices" in data or "usage" in data:
            self._chunk(data)
        elif "message" in data or "done" in data:
            self._ollama_line(data)

    def _chunk(self, data: dict[str, Any]) -> None:
        if isinstance(data.get("usage"), dict):
            self._set_usage(data["usage"])
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # only one completion is asked for
            delta = choice.get("delta") or {}
            self.emit_thinking(self._reasoning.feed(delta))
            if isinstance(delta.get("content"), str):
                self.emit_text(delta["content"])
            for fragment in delta.get("tool_calls") or []:
                self._tool_fragment(fragment)
            self.stop_reason = choice.get("finish_reason") or self.stop_reason

    def _set_usage(self, usage: dict[str, Any]) -> None:
        details = usage.get("prompt_tokens_details") or {}
        self.usage.input = count(usage.get("prompt_tokens"))
        self.usage.output = count(usage.get("completion_tokens"))
        self.usage.cache_read = count(details.get("cached_tokens"))
        self.usage.cache_write = count(
            details.get("cache_write_tokens") or usage.get("cache_write_tokens")
        )
        self.usage.thinking = count(
            (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
        )
        self._usage_seen = True

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        function = fragment.get("function") or {}
        call = self._call_for(fragment.get("index"), str(fragment.get("id") or ""))
        call.id = call.id or str(fragment.get("id") or "")
        call.name = call.name or str(function.get("name") or "")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.args.append(arguments)
        elif isinstance(arguments, dict):
            call.obj = arguments

    def _call_for(self, index: Any, call_id: str) -> _Call:
        """The call a fragment belongs to, opening a new one when it starts one."""
        if isinstance(index, int):
            known = self._by_index.get(index)
            if known is not None and not (call_id and known.id and call_id != known.id):
                return known
        elif self._calls and (not call_id or call_id == self._calls[-1].id):
            return self._calls[-1]
        call = _Call()
        self._calls.append(call)
        if isinstance(index, int):
            self._by_index[index] = call
        return call

    def _ollama_line(self, data: dict[str, Any]) -> None:
        """Ollama /api/chat NDJSON: whole tool calls with object arguments, ``done`` at the end."""
        message = data.get("message") or {}
        self.emit_thinking(self._reasoning.feed(message))
        if isinstance(message.get("content"), str):
            self.emit_text(message["content"])
        for tool_call in message.get("tool_calls") or []:
            function = tool_call.get("function") or {}
            self._calls.append(
                _Call(
                    id=str(tool_call.get("id") or ""),
                    name=str(function.get("name") or ""),
                    obj=function.get("arguments"),
                )
            )
        if data.get("done"):
            self.usage.input = count(data.get("prompt_eval_count"))
            self.usage.output = count(data.get("eval_count"))
            self._usage_seen = True
            self.stop_reason = data.get("done_reason") or "stop"
            self.finished = True

    def _tool_calls(self, *, partial: bool) -> list[ToolCall]:
        return [
            ToolCall(call.id, call.name, _input(call))
            for n, call in enumerate(self._calls)
            if not partial or self._call_done(n, call)
        ]

    def _thinking(self, *, partial: bool) -> list[Thinking]:
        thought = self._reasoning.thinking()
        return [thought] if thought is not None else []

    def _call_done(self, n: int, call: _Call) -> bool:
        """Finished when a later call began, the choice finished, or its JSON is whole."""
        if n < len(self._calls) - 1 or self.stop_reason is not None or call.obj is not None:
            return True
        raw = "".join(call.args)
        try:
            json.loads(raw)
        except ValueError:
            return False
        return True


@dataclass
class _Reasoning:
    """One reply's reasoning as its fragments arrive: the text under the field it
    came in (Ollama's native ``thinking`` too), and ``reasoning_details`` items."""

    name: str | None = None  # the field the text came in
    parts: list[str] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)

    def feed(self, delta: dict[str, Any]) -> str:
        """Take one delta's reasoning; returns the text the person should see."""
        shown = ""
        for name in (*REASONING_FIELDS, "thinking"):
            value = delta.get(name)
            if isinstance(value, str) and value:
                self.name = self.name or name
                self.parts.append(value)
                shown = value
                break
        for item in delta.get("reasoning_details") or []:
            if isinstance(item, dict):
                text = self._detail(item)
                shown = shown or text
        return shown

    def _detail(self, item: dict[str, Any]) -> str:
        """Join a fragment to the item it continues (same index and type) or start one."""
        last = self.details[-1] if self.details else None
        if last is not None and (last.get("index"), last.get("type")) == (
            item.get("index"),
            item.get("type"),
        ):
            for key, value in item.items():
                if key in _DETAIL_TEXT and isinstance(value, str):
                    last[key] = str(last.get(key) or "") + value
                elif key not in last or last[key] is None:
                    last[key] = value
        else:
            self.details.append(dict(item))
        text = item.get("text") if item.get("type") == "reasoning.text" else item.get("summary")
        return text if isinstance(text, str) else ""

    def thinking(self) -> Thinking | None:
        text = "".join(self.parts)
        if not text and not self.details:
            return None
        block: dict[str, Any] = {self.name: text} if self.name else {}
        if self.details:
            block["reasoning_details"] = self.details
        if not text:  # details only: what they say, for the person
            text = "".join(
                str(d.get("text") or d.get("summary") or "")
                for d in self.details
                if d.get("type") in ("reasoning.text", "reasoning.summary")
            )
        return Thinking(text, block)


def _input(call: _Call) -> Any:
    """Arguments as parsed JSON: ``""`` is ``{}``, unparsable stays the raw string."""
    return call.obj if call.obj is not None else parse_input("".join(call.args))


def _stream_error(raw: str) -> ProviderError:
    """``data: {"error": ...}`` after a 200 (OpenRouter, vLLM, llama.cpp)."""
    overflow = parse_overflow(None, raw)
    if overflow is not None:
        return overflow
    message, fields = unwrap_error(raw)
    code = str(fields.get("code") or fields.get("type") or "")
    transient = code in _TRANSIENT_CODES or bool(_TRANSIENT.search(f"{code} {message}"))
    label = f"stream error {code}" if code else "stream error"
    return ProviderError(f"{label}: {message}", retryable=transient)


# -- the request body ----------------------------------------------------------


def _body(wire: OpenAIWire, request: Request) -> Built:
    arr = wire.arranged(request)
    messages, parts = _openai_wire(arr)
    system = request.system
    body = {
        "model": request.model,
        max_tokens_field(request): request.max_tokens,
        "messages": EncodedList(
            [{"role": "system", "content": system}, *messages],
            [_system_json(system), *parts],
        ),
        "tools": encoded_tools(wire, request.tools),
    }
    return Built(body, arr.sent, arranged=arr.out)


def max_tokens_field(request: Request) -> str:
    """The field the reply limit goes in: OpenAI's reasoning models (o1, o3, o4,
    gpt-5 …) refuse ``max_tokens`` and want ``max_completion_tokens``, which other
    servers may not know; a model entry's ``max_tokens_field`` chooses."""
    chosen = request.entry.get("max_tokens_field")
    if chosen is None:
        return MAX_COMPLETION_TOKENS if _REASONING_MODEL.match(request.model) else MAX_TOKENS
    if chosen not in (MAX_TOKENS, MAX_COMPLETION_TOKENS):
        raise ConfigError(
            f'config.jsonc: {request.where}.max_tokens_field must be "{MAX_TOKENS}" or '
            f'"{MAX_COMPLETION_TOKENS}" (found {chosen!r})'
        )
    return str(chosen)


def _openai_wire(arr: Arranged) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The wire messages after the system prompt and their JSON; the previous
    request's are kept where they cover only positions it shares with this one."""
    ends: list[int] = []
    msgs: list[dict[str, Any]] = []
    texts: list[bytes] = []
    old = arr.previous.memo.get("openai-wire") if arr.previous is not None else None
    if old is not None:
        kept = bisect.bisect_left(old[0], arr.same)
        ends, msgs, texts = (list(x[:kept]) for x in old)
    at = ends[-1] if ends else 0
    for group in _openai_groups(arr.out[at:]):  # a kept message's end starts a new one
        msg, text = _openai_message(group)
        at += len(group)
        ends.append(at)
        msgs.append(msg)
        texts.append(text)
    arr.memo["openai-wire"] = (ends, msgs, texts)
    if not arr.series("thinking", False, lambda seen, m: seen or m.role == "thinking")[-1]:
        return msgs, texts
    # reasoning alone (a reply that only thought) is no message a server takes
    shown = [k for k, m in enumerate(msgs) if not _reasoning_only(m)]
    return [msgs[k] for k in shown], [texts[k] for k in shown]


def _reasoning_only(msg: dict[str, Any]) -> bool:
    return msg["role"] == "assistant" and not msg["content"] and not msg.get("tool_calls")


def _openai_groups(arranged: list[Message]) -> list[list[Message]]:
    """The arranged messages as the wire messages they become: a user-side message
    or a result alone; assistant texts and notes together, then the calls after them
    (a text after calls starts another assistant message)."""
    groups: list[list[Message]] = []
    calls = False  # the open assistant group has calls
    for m in arranged:
        if m.role in USER_SIDE or m.role == "tool":
            groups.append([m])
            calls = False
            continue
        last = groups[-1] if groups else None
        if last is None or last[0].role in USER_SIDE or last[0].role == "tool":
            groups.append([m])
        elif m.role != "call" and calls:
            groups.append([m])
            calls = False
        else:
            last.append(m)
        calls = calls or m.role == "call"
    return groups


def _openai_message(group: list[Message]) -> tuple[dict[str, Any], bytes]:
    """One wire message and its JSON, made once per group of message objects (kept
    on the first, keyed by every member's id and digest)."""
    first = group[0]
    key = ("openai", *((m.id, m.digest) for m in group), *tool_of(first))
    memo = first.memo.get("openai:message")
    if memo is not None and memo[0] == key:
        return memo[1], memo[2]
    hit = known_part(key)
    if hit is not None:
        first.memo["openai:message"] = (key, *hit)
        return hit
    if first.role in USER_SIDE:
        msg: dict[str, Any] = {"role": "user", "content": first.text}
    elif first.role == "tool":
        msg = {
            "role": "tool",
            "tool_call_id": WIRE.tool_id(first.call_id or 0),
            "content": first.text,
        }
    else:
        msg = {"role": "assistant", "content": None}
        for m in group:
            if m.role == "thinking":
                _add_reasoning(msg, m.payload.get("block") or {})
            elif m.role == "call":
                msg.setdefault("tool_calls", []).append(
                    {
                        "id": WIRE.tool_id(m.id),
                        "type": "function",
                        "function": {
                            "name": m.payload.get("name", "eval"),
                            "arguments": json.dumps(call_input(m), ensure_ascii=False),
                        },
                    }
                )
            else:
                msg["content"] = (
                    m.text if msg["content"] is None else (msg["content"] + "\n\n" + m.text)
                )
    data = dumpb(msg)
    first.memo["openai:message"] = (key, msg, data)
    return keep_part(key, (msg, data))


def _system_json(system: str) -> bytes:
    return encoded(("system", system), lambda: dumpb({"role": "system", "content": system}))


def _add_reasoning(message: dict[str, Any], block: dict[str, Any]) -> None:
    """A reply's reasoning fields on its assistant message, under the names they
    arrived with; a second reasoning merged into the same message (edits can join
    two replies) follows the first."""
    for key, value in block.items():
        if key not in message:
            message[key] = value
        elif isinstance(value, str) and isinstance(message[key], str):
            message[key] = message[key] + "\n\n" + value
        elif isinstance(value, list) and isinstance(message[key], list):
            message[key] = message[key] + value


def _openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }
