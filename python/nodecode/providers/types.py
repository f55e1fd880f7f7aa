"""Provider-neutral results of one streamed model request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """One tool call as streamed: ``id`` is whatever the provider sent (may be
    empty or repeated: nodecode derives its own wire ids from seqs)."""

    id: str
    name: str
    input: Any  # the parsed JSON object; the raw string when it does not parse


@dataclass
class Usage:
    """Token usage. ``input`` is the provider's own figure: for Anthropic the
    uncached part (prompt = input + cache_read + cache_write); for OpenAI
    ``prompt_tokens`` (cached tokens included)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @classmethod
    def of(cls, recorded: dict[str, Any] | None) -> Usage:
        """The usage a request event recorded (its ``usage`` dict)."""
        r = recorded or {}
        return cls(*(int(r.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write")))

    def prompt_total(self, provider_type: str) -> int:
        if provider_type == "anthropic":
            return self.input + self.cache_read + self.cache_write
        return self.input


@dataclass
class Reply:
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    stopped: bool = False  # the person stopped it; text/calls are what arrived
    retries: int = 0
