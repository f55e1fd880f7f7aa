"""Anthropic Messages API: ``POST {host}/v1/messages`` streamed as SSE.

Event flow and usage rules are in research/providers.md §1.5-1.6. Thinking
blocks (``thinking_delta`` / ``signature_delta``) and ``redacted_thinking``
blocks are kept exactly as streamed, to be sent back (doc/nodecode.txt,
``nodecode-thinking``). Block and delta types this module does not use
(server tools and their results, citations, compaction) are skipped, as the
API's versioning policy asks of clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from nodecode.errors import ProviderError
from nodecode.providers.base import Provider, StreamParser, TextSink, load_data, parse_input
from nodecode.providers.overflow import parse_overflow
from nodecode.providers.sse import ServerSentEvent
from nodecode.providers.types import REDACTED_THINKING, Thinking, ToolCall

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
_USAGE_FIELDS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}
THINKING_TYPES = ("thinking", "redacted_thinking")


class AnthropicProvider(Provider):
    """The Messages API; ``base_url`` is the host, e.g. https://api.anthropic.com."""

    name = "anthropic"
    default_base_url = DEFAULT_BASE_URL

    def url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "accept": "text/event-stream"}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def wire_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def new_parser(
        self, on_text: TextSink | None, on_thinking: TextSink | None = None
    ) -> StreamParser:
        return AnthropicParser(on_text, on_thinking)


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
        self._merge_usage((data.get("message") or {}).get("usage"))

    def _on_content_block_start(self, data: dict[str, Any]) -> None:
        block = data.get("content_block") or {}
        self._blocks[data.get("index", len(self._blocks))] = _Block(
            type=str(block.get("type", "")),
            id=str(block.get("id") or ""),
            name=str(block.get("name") or ""),
            start=dict(block) if block.get("type") in THINKING_TYPES else {},
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
            if block.type in THINKING_TYPES and (block.done or not partial):
                exact = block.exact()
                text = exact.get("thinking", "") if block.type == "thinking" else REDACTED_THINKING
                out.append(Thinking(str(text), exact))
        return out


def _stream_error(raw: str, data: dict[str, Any]) -> ProviderError:
    """An ``event: error`` after a 200: overloaded is retried like an HTTP 529."""
    overflow = parse_overflow(None, raw)
    if overflow is not None:
        return overflow
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    kind, message = str(error.get("type") or "error"), str(error.get("message") or "")
    return ProviderError(
        f"stream error {kind}: {message}", retryable=kind in _RETRYABLE_STREAM_ERRORS
    )
