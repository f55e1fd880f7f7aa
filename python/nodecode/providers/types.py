"""Provider-neutral results of one streamed model request."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from nodecode.errors import ConfigError


@dataclass
class ToolCall:
    """One tool call as streamed: ``id`` is whatever the provider sent (may be
    empty or repeated: nodecode derives its own wire ids from seqs)."""

    id: str
    name: str
    input: Any  # the parsed JSON object; the raw string when it does not parse


@dataclass
class Usage:
    """Token usage. ``input`` is the provider's own figure, which each wire format
    reads its own way (``WireFormat.prompt_tokens`` gives the whole prompt)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    thinking: int = 0  # of ``output``, the tokens spent thinking (when the provider says)
    cache_write_1h: int = 0  # of ``cache_write``, the 1-hour entries' (Anthropic's split)

    @classmethod
    def of(cls, recorded: dict[str, Any] | None) -> Usage:
        """The usage a request event recorded (its ``usage`` dict)."""
        r = recorded or {}
        return cls(
            *(
                int(r.get(k) or 0)
                for k in (
                    "input",
                    "output",
                    "cache_read",
                    "cache_write",
                    "thinking",
                    "cache_write_1h",
                )
            )
        )


_RECORDED = ("input", "output", "cache_read", "cache_write", "thinking", "cache_write_1h")

REDACTED_THINKING = "[redacted thinking: encrypted by the provider, sent back as received]"


@dataclass
class Thinking:
    """One piece of the model's reasoning as it arrived. ``block`` is what goes
    back to the provider, byte for byte: an Anthropic ``thinking`` block (with its
    signature) or ``redacted_thinking`` block, or an OpenAI-compatible reply's
    reasoning fields (``reasoning_content`` / ``reasoning`` / ``reasoning_details``)
    under the names they arrived with. ``text`` is what the person reads."""

    text: str
    block: dict[str, Any]


@dataclass
class Reply:
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    thinking: list[Thinking] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    stopped: bool = False  # the person stopped it; text/calls are what arrived
    retries: int = 0
    id: str | None = None  # the provider's id of this response, when it names one
    # Why the provider says its cache missed, when asked (Anthropic's cache diagnostics):
    # {"type": reason, "missed": tokens or None}.
    diagnostics: dict[str, Any] | None = None


# One encoder for every part: json.dumps with arguments makes a new one per call,
# which is most of what encoding a small block costs (a new App encodes 2,000).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def count(value: Any) -> int:
    """A usage field's token count: a whole number as sent, else 0 (a bool, a
    float or a string is no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def dumps(value: Any) -> str:
    """Compact JSON, as a request body is sent (httpx's ``json=`` writes the same)."""
    return _ENCODER.encode(value)


def dumpb(value: Any) -> bytes:
    """``dumps`` as the UTF-8 bytes that are sent."""
    return dumps(value).encode("utf-8")


class EncodedList(list):
    """A list that carries its own JSON: ``parts`` are its items' ``dumpb``, made
    with them from what is kept per message, so a body's messages are sent without
    being encoded again. Never changed after it is made."""

    def __init__(self, items: list[Any], parts: list[bytes]) -> None:
        super().__init__(items)
        self.parts = parts


def encode_body(body: dict[str, Any]) -> bytes:
    """``body`` as the bytes of ``dumps(body)``, each ``EncodedList`` value written
    from its parts: at 2,000 messages encoding the whole body takes 5-10 ms. Fields
    and list items are both comma-separated, so the body is one join of chunks (a
    megabyte is copied once)."""
    chunks: list[bytes] = []
    for key, value in body.items():
        head = dumpb(key) + b":"
        if isinstance(value, EncodedList) and value.parts:
            parts = value.parts
            if len(parts) == 1:
                chunks.append(head + b"[" + parts[0] + b"]")
            else:
                chunks.append(head + b"[" + parts[0])
                chunks += islice(parts, 1, len(parts) - 1)
                chunks.append(parts[-1] + b"]")
        else:
            chunks.append(head + dumpb(list(value) if isinstance(value, EncodedList) else value))
    if not chunks:
        return b"{}"
    chunks[0] = b"{" + chunks[0]
    chunks[-1] = chunks[-1] + b"}"
    return b",".join(chunks)


@dataclass(frozen=True)
class ThinkingSetting:
    """A model's ``thinking`` setting, checked by its wire format (doc/nodecode.txt,
    ``nodecode-thinking``). ``wire`` is the request's thinking object (None: not
    asked for) and ``effort`` its effort level; ``send_back`` says whether later
    requests carry reasoning back, for a format where that is a choice."""

    wire: dict[str, Any] | None = None
    effort: str | None = None
    send_back: bool = False

    def check_budget(self, max_tokens: int, where: str) -> None:
        """A thinking budget must be below the reply's max_tokens (the APIs refuse it)."""
        budget = (self.wire or {}).get("budget_tokens")
        if isinstance(budget, int) and budget >= max_tokens:
            raise ConfigError(
                f"config.jsonc: {where}.thinking.budget_tokens must be below the reply's "
                f"max_tokens ({max_tokens}): lower it or raise max_tokens (found {budget})"
            )


# A JSON escape of a UTF-16 surrogate. The bytes of a body are decoded with
# replacement, so a lone surrogate can only come from such an escape: a gateway
# that cuts strings between UTF-16 units, or a model's own output.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(text: str) -> Any:
    """``json.loads`` of what a provider sent, with each lone surrogate
    (``"\\ud800"`` alone) read as U+FFFD: nothing can encode one (not the log,
    not a terminal, not the next request), so a reply or an error holding one
    would be lost; a valid pair stays the character it is."""
    value = json.loads(text)
    return _well_formed(value) if _SURROGATE_ESCAPE.search(text) else value


def _well_formed(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_well_formed(k): _well_formed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_well_formed(v) for v in value]
    return value
