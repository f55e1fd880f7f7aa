"""Turn the context into a valid provider request, whatever was edited.

``arrange`` (in ``context.arrange``) applies SPEC §2 "Valid requests" to the
message list; ``anthropic_body`` and ``openai_body`` map the arranged list onto
each wire format, keeping each message's block and its JSON so that a request
encodes only what the one before it did not send. The same messages always give the same
bytes: nothing here depends on time or on what the provider streamed.

Thinking messages go back as they arrived (doc/nodecode.txt,
``nodecode-thinking``): an Anthropic block first in its assistant message,
never carrying a cache breakpoint; an OpenAI-compatible reply's reasoning as
fields of its assistant message, only when the model's setting says
``send_back``. Thinking of the other wire format is never sent.
"""

from __future__ import annotations

import bisect
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

from nodecode.context.arrange import (
    ASSISTANT_SIDE,
    CONTEXT_BEGINS,
    USER_SIDE,
    Arranged,
    arrange,
    missing_result,
    sendable,
    sends_thinking,
)
from nodecode.context.model import Message
from nodecode.providers.types import EncodedList, dumpb

__all__ = [  # with what it re-exports of context.arrange, which it was once part of
    "CONTEXT_BEGINS",
    "USER_SIDE",
    "Arranged",
    "Built",
    "anthropic_body",
    "arrange",
    "build",
    "missing_result",
    "openai_body",
    "sendable",
    "sends_thinking",
    "wire_tool_id",
]

if TYPE_CHECKING:
    from nodecode.config import Thinking

THINKING_BLOCKS = ("thinking", "redacted_thinking")
CACHE = {"type": "ephemeral"}  # a 5-minute entry
CACHE_1H = {"type": "ephemeral", "ttl": "1h"}
SHORT, LONG = 300.0, 3600.0
# Where a request's cache breakpoints go: arranged messages → (index, ttl seconds),
# index -1 being the system prompt (see cache.plan).
Marks = Callable[[list[Message]], list[tuple[int, float]]]


def _input(call: Message) -> Any:
    value = call.payload.get("input")
    return value if isinstance(value, dict) else {"input": value}


def wire_tool_id(call_seq: int, provider_type: str) -> str:
    return f"toolu_nc{call_seq}" if provider_type == "anthropic" else f"call_nc{call_seq}"


@dataclass
class Built:
    """A request body plus what the log records about it."""

    body: dict[str, Any]
    sent: list[tuple[int, str]]  # (message id, digest) in order
    breakpoints: list[int] = field(default_factory=list)  # message ids marked (0: the system)
    ttls: list[float] = field(default_factory=list)  # each breakpoint's lifetime, seconds
    arranged: list[Message] = field(default_factory=list)


def default_marks(arranged: list[Message]) -> list[tuple[int, float]]:
    """Without a plan: the system prompt and the end, 5-minute entries."""
    return [(-1, SHORT), (len(arranged) - 1, SHORT)]


def _cache(ttl: float) -> dict[str, str]:
    return dict(CACHE_1H) if ttl >= LONG else dict(CACHE)


def anthropic_body(
    messages: list[Message] | Arranged,
    *,
    model: str,
    system: str,
    tools: list[dict],
    max_tokens: int,
    marks: Marks | None = None,
    thinking: Thinking | None = None,
) -> Built:
    arr = (
        messages
        if isinstance(messages, Arranged)
        else Arranged(sendable(messages, "anthropic", False))
    )
    arranged = arr.out
    placed = sorted(p for p in (marks or default_marks)(arranged) if _markable(arranged, p[0]))
    system_ttl: float | None = None
    ttl_at: dict[int, float] = {}
    for at, ttl in placed:
        if at < 0:
            system_ttl = ttl
        else:
            ttl_at[at] = ttl
    wire, parts = _anthropic_wire(arr, ttl_at)
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "system": _system_blocks(system, system_ttl),
        "tools": _tools(tools, "anthropic"),
        "messages": EncodedList(wire, parts),
    }
    if thinking is not None and thinking.wire is not None:
        body["thinking"] = dict(thinking.wire)
    if thinking is not None and thinking.effort is not None:
        body["output_config"] = {"effort": thinking.effort}
    ids = [arranged[i].id if i >= 0 else 0 for i, _ in placed]
    return Built(body, arr.sent, ids, [ttl for _, ttl in placed], arranged)


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
    memo = first.__dict__.get("_nc_run")
    if j == i + 1:
        if memo is not None and memo[0] is None:
            return memo[1], memo[2]
        block, text = _block_of(first)
        side = _SIDES.get(first.role, "user")
        msg, text = {"role": side, "content": [block]}, _HEADS[side] + text + b"]}"
        first.__dict__["_nc_run"] = (None, msg, text)
        return msg, text
    if ttl_at and any(k in ttl_at for k in range(i + 1, j)):
        return _anthropic_message(out, i, j, ttl_at)
    rest = tuple(islice(out, i + 1, j))
    # The very objects, not equal ones: messages of two sessions may be equal (the
    # same seq, role, text and turn) and differ in their payload (a thinking block).
    kept = memo[0] if memo is not None else None  # None: kept as a one-block run
    if kept is not None and len(kept) == len(rest) and all(map(operator.is_, kept, rest)):
        return memo[1], memo[2]
    msg, text = _anthropic_message(out, i, j, ttl_at)
    first.__dict__["_nc_run"] = (rest, msg, text)
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
        hit = m.__dict__.get("_nc_block")
        if hit is None:
            key = ("anthropic", m.digest, *_tool_of(m))
            hit = _PARTS.get(key)
            if hit is None:
                block = _anthropic_block(m)
                hit = _keep(key, (block, dumpb(block)))
            m.__dict__["_nc_block"] = hit
        return hit
    marked = m.__dict__.setdefault("_nc_marked", {})
    hit = marked.get(ttl)
    if hit is None:
        key = ("anthropic", m.digest, *_tool_of(m), ttl)
        hit = _PARTS.get(key)
        if hit is None:
            block = {**_block_of(m)[0], "cache_control": _cache(ttl)}
            hit = _keep(key, (block, dumpb(block)))
        marked[ttl] = hit
    return hit


# Blocks and wire messages with their JSON, for the process, by what they are made
# of (digests name the id, role, text and a call's input; a result's call and error
# flag are added): an App opening a store this process has sent from before (a
# host's second App on it, a command after an ask) encodes none of it again.
_PARTS: dict[tuple[Any, ...], Any] = {}
MAX_PARTS = 100_000


def _keep(key: tuple[Any, ...], value: Any) -> Any:
    if len(_PARTS) >= MAX_PARTS:
        _PARTS.clear()
    _PARTS[key] = value
    return value


def _tool_of(m: Message) -> tuple[Any, ...]:
    """What of a result its digest does not name: its call and whether it failed."""
    return (m.call_id, bool(m.payload.get("error"))) if m.role == "tool" else ()


def _anthropic_block(m: Message) -> dict[str, Any]:
    if m.role == "thinking":
        return dict(m.payload["block"])  # as streamed, signature and data byte for byte
    if m.role == "call":
        return {
            "type": "tool_use",
            "id": wire_tool_id(m.id, "anthropic"),
            "name": m.payload.get("name", "eval"),
            "input": _input(m),
        }
    if m.role == "tool":
        block = {
            "type": "tool_result",
            "tool_use_id": wire_tool_id(m.call_id or 0, "anthropic"),
            "content": m.text,
        }
        if m.payload.get("error"):
            block["is_error"] = True
        return block
    return {"type": "text", "text": m.text}


def openai_body(
    messages: list[Message] | Arranged,
    *,
    model: str,
    system: str,
    tools: list[dict],
    max_tokens: int,
    marks: Marks | None = None,
    thinking: Thinking | None = None,
) -> Built:
    send_back = thinking is not None and thinking.send_back
    arr = (
        messages
        if isinstance(messages, Arranged)
        else Arranged(sendable(messages, "openai", send_back))
    )
    wire, parts = _openai_wire(arr)
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": EncodedList(
            [{"role": "system", "content": system}, *wire],
            [_system_json(system), *parts],
        ),
        "tools": _tools(tools, "openai"),
    }
    return Built(body, arr.sent, arranged=arr.out)


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
    key = ("openai", *((m.id, m.digest) for m in group), *_tool_of(first))
    memo = first.__dict__.get("_openai_message")
    if memo is not None and memo[0] == key:
        return memo[1], memo[2]
    hit = _PARTS.get(key)
    if hit is not None:
        first.__dict__["_openai_message"] = (key, *hit)
        return hit
    if first.role in USER_SIDE:
        msg: dict[str, Any] = {"role": "user", "content": first.text}
    elif first.role == "tool":
        msg = {
            "role": "tool",
            "tool_call_id": wire_tool_id(first.call_id or 0, "openai"),
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
                        "id": wire_tool_id(m.id, "openai"),
                        "type": "function",
                        "function": {
                            "name": m.payload.get("name", "eval"),
                            "arguments": json.dumps(_input(m), ensure_ascii=False),
                        },
                    }
                )
            else:
                msg["content"] = (
                    m.text if msg["content"] is None else (msg["content"] + "\n\n" + m.text)
                )
    encoded = dumpb(msg)
    first.__dict__["_openai_message"] = (key, msg, encoded)
    return _keep(key, (msg, encoded))


_ENCODED: dict[Any, Any] = {}  # what every request starts with, encoded once per process


def _system_json(system: str) -> bytes:
    key = ("system", system)
    hit = _ENCODED.get(key)
    if hit is None:
        if len(_ENCODED) > 32:
            _ENCODED.clear()
        hit = _ENCODED[key] = dumpb({"role": "system", "content": system})
    return hit


def _system_blocks(system: str, ttl: float | None) -> EncodedList:
    """The Anthropic system prompt's block list (a breakpoint on it when ``ttl``)."""
    key = ("system-blocks", system, ttl)
    hit = _ENCODED.get(key)
    if hit is None:
        block: dict[str, Any] = {"type": "text", "text": system}
        if ttl is not None:
            block["cache_control"] = _cache(ttl)
        if len(_ENCODED) > 32:
            _ENCODED.clear()
        hit = _ENCODED[key] = EncodedList([block], [dumpb(block)])
    return hit


def _tools(tools: list[dict], fmt: str) -> EncodedList:
    """The tool definitions in ``fmt``'s shape with their JSON, kept per tools list
    (the prompt's is a constant; another list object is encoded anew)."""
    key = (id(tools), fmt)
    hit = _ENCODED.get(key)
    if hit is None or hit[0] is not tools:
        items = tools if fmt == "anthropic" else [_openai_tool(t) for t in tools]
        if len(_ENCODED) > 32:
            _ENCODED.clear()
        hit = _ENCODED[key] = (tools, EncodedList(list(items), [dumpb(t) for t in items]))
    return hit[1]


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


def build(provider_type: str, messages: list[Message] | Arranged, **kw: Any) -> Built:
    fn = anthropic_body if provider_type == "anthropic" else openai_body
    return fn(messages, **kw)
