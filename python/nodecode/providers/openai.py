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

import json
import re
from dataclasses import dataclass, field
from typing import Any

from nodecode.errors import ProviderError
from nodecode.providers.base import Provider, StreamParser, TextSink, load_data, parse_input
from nodecode.providers.overflow import parse_overflow, unwrap_error
from nodecode.providers.sse import DONE, ServerSentEvent
from nodecode.providers.types import Thinking, ToolCall

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_TRANSIENT = re.compile(
    r"overload|rate.?limit|timed? ?out|timeout|temporar|unavailable|try again|server.?error|"
    r"internal error|capacity",
    re.IGNORECASE,
)
_TRANSIENT_CODES = {"408", "409", "429", "500", "502", "503", "504", "529"}
REASONING_FIELDS = ("reasoning_content", "reasoning")  # the first present in a delta is read
_DETAIL_TEXT = ("text", "summary", "data", "signature")  # fragments of one detail join


class OpenAIProvider(Provider):
    """Chat Completions; ``base_url`` includes ``/v1`` (https://api.openai.com/v1)."""

    name = "openai"
    default_base_url = DEFAULT_BASE_URL

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def wire_body(self, body: dict[str, Any]) -> dict[str, Any]:
        options = {**(body.get("stream_options") or {}), "include_usage": True}
        return {**body, "stream": True, "stream_options": options}

    def new_parser(
        self, on_text: TextSink | None, on_thinking: TextSink | None = None
    ) -> StreamParser:
        return OpenAIParser(on_text, on_thinking)


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
        self.usage.input = _int(usage.get("prompt_tokens"))
        self.usage.output = _int(usage.get("completion_tokens"))
        self.usage.cache_read = _int(details.get("cached_tokens"))
        self.usage.cache_write = _int(
            details.get("cache_write_tokens") or usage.get("cache_write_tokens")
        )
        self.usage.thinking = _int(
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
            self.usage.input = _int(data.get("prompt_eval_count"))
            self.usage.output = _int(data.get("eval_count"))
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


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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
