"""Turn the context into a valid provider request, whatever was edited.

``arrange`` applies SPEC §2 "Valid requests" to the message list (call
batches whole, results after their calls, a note never last, a user message
first, empty texts dropped); ``anthropic_body`` and ``openai_body`` map the
arranged list onto each wire format. The same messages always give the same
bytes: nothing here depends on time or on what the provider streamed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodecode.context.model import Message
from nodecode.providers.types import EncodedList, dumps

CONTEXT_BEGINS = "(context begins)"
USER_SIDE = ("user", "stub", "notice")
ASSISTANT_SIDE = ("assistant", "note", "call")
CACHE = {"type": "ephemeral"}  # a 5-minute entry
CACHE_1H = {"type": "ephemeral", "ttl": "1h"}
SHORT, LONG = 300.0, 3600.0
# Where a request's cache breakpoints go: arranged messages → (index, ttl seconds),
# index -1 being the system prompt (see context.cache_plan).
Marks = Callable[[list[Message]], list[tuple[int, float]]]


def missing_result(call: Message) -> Message:
    """The result a call gets when none was logged (a stopped turn)."""
    text = f"[no result: the turn stopped before this call ran] [seq {call.id}]"
    return Message(-call.id, "tool", text, call.turn, {"call": call.id, "error": True})


def arrange(messages: list[Message]) -> list[Message]:
    """The messages in an order every provider accepts."""
    kept = [m for m in messages if m.role in ("call", "tool") or m.text.strip()]
    out = _batches(kept)
    out = _note_not_last(out)
    if not out or out[0].role not in USER_SIDE:
        out.insert(0, Message(0, "user", CONTEXT_BEGINS))
    return out


def _batches(msgs: list[Message]) -> list[Message]:
    """Each run of calls is followed at once by all its results, in call order;
    whatever stood between a batch's calls and its last result moves after it."""
    result_at: dict[int, int] = {}
    for i, m in enumerate(msgs):
        if m.role == "tool" and m.call_id is not None:
            result_at.setdefault(m.call_id, i)
    used: set[int] = set()
    out: list[Message] = []
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if i in used or m.role == "tool":  # a result already placed, or an orphan
            i += 1
            continue
        if m.role != "call":
            out.append(m)
            i += 1
            continue
        j = i
        calls = []
        while j < len(msgs) and msgs[j].role == "call":
            calls.append(msgs[j])
            j += 1
        out.extend(calls)
        for call in calls:
            at = result_at.get(call.id)
            if at is not None and at > i and at not in used:
                used.add(at)
                out.append(msgs[at])
            else:
                out.append(missing_result(call))
        i = j
    return out


def _note_not_last(out: list[Message]) -> list[Message]:
    """Trailing notes go to the start of the newest reply instead of ending the
    request; with no reply after the last ask, just before that ask."""
    tail: list[Message] = []
    while out and out[-1].role == "note":
        tail.insert(0, out.pop())
    if not tail:
        return out
    last_user = max((k for k, m in enumerate(out) if m.role in USER_SIDE), default=-1)
    at = last_user if last_user == len(out) - 1 else last_user + 1
    return out[: max(at, 0)] + tail + out[max(at, 0) :]


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
    messages: list[Message],
    *,
    model: str,
    system: str,
    tools: list[dict],
    max_tokens: int,
    marks: Marks | None = None,
) -> Built:
    arranged = arrange(messages)
    sent = [(m.id, m.digest) for m in arranged]
    placed = sorted((marks or default_marks)(arranged))
    system_block: dict[str, Any] = {"type": "text", "text": system}
    ttl_at: dict[int, float] = {}
    for at, ttl in placed:
        if at < 0:
            system_block["cache_control"] = _cache(ttl)
        else:
            ttl_at[at] = ttl
    wire: list[dict[str, Any]] = []
    parts: list[list[str]] = []  # each wire message's blocks, as JSON
    for i, m in enumerate(arranged):
        block, encoded = _block_of(m, ttl_at.get(i))
        role = "assistant" if m.role in ASSISTANT_SIDE else "user"
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].append(block)
            parts[-1].append(encoded)
        else:
            wire.append({"role": role, "content": [block]})
            parts.append([encoded])
    for msg, texts in zip(wire, parts, strict=True):  # results first in their message (stable)
        content = msg["content"]
        if msg["role"] == "user" and len(content) > 1:
            order = sorted(range(len(content)), key=lambda k: content[k]["type"] != "tool_result")
            msg["content"] = [content[k] for k in order]
            texts[:] = [texts[k] for k in order]
    encoded = ",".join(
        f'{{"role":"{msg["role"]}","content":[{",".join(texts)}]}}'
        for msg, texts in zip(wire, parts, strict=True)
    )
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "system": [system_block],
        "tools": _tools(tools, "anthropic"),
        "messages": EncodedList(wire, f"[{encoded}]"),
    }
    ids = [arranged[i].id if i >= 0 else 0 for i, _ in placed]
    return Built(body, sent, ids, [ttl for _, ttl in placed], arranged)


def _block_of(m: Message, ttl: float | None = None) -> tuple[dict[str, Any], str]:
    """The message's block (with a breakpoint of ``ttl``) and its JSON, made once
    per message object (messages are immutable): a request encodes only the new."""
    memo = m.__dict__.setdefault("_anthropic_block", {})
    hit = memo.get(ttl)
    if hit is None:
        block = (
            _anthropic_block(m)
            if ttl is None
            else {**_block_of(m)[0], "cache_control": _cache(ttl)}
        )
        hit = memo[ttl] = (block, dumps(block))
    return hit


def _anthropic_block(m: Message) -> dict[str, Any]:
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
    messages: list[Message],
    *,
    model: str,
    system: str,
    tools: list[dict],
    max_tokens: int,
    marks: Marks | None = None,
) -> Built:
    arranged = arrange(messages)
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
    parts = [_system_json(system)]
    for group in _openai_groups(arranged):
        msg, encoded = _openai_message(group)
        wire.append(msg)
        parts.append(encoded)
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": EncodedList(wire, f"[{','.join(parts)}]"),
        "tools": _tools(tools, "openai"),
    }
    return Built(body, [(m.id, m.digest) for m in arranged], arranged=arranged)


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


def _openai_message(group: list[Message]) -> tuple[dict[str, Any], str]:
    """One wire message and its JSON, made once per group of message objects (kept
    on the first, keyed by every member's id and digest)."""
    first = group[0]
    key = tuple((m.id, m.digest) for m in group)
    memo = first.__dict__.get("_openai_message")
    if memo is not None and memo[0] == key:
        return memo[1], memo[2]
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
            if m.role == "call":
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
    encoded = dumps(msg)
    first.__dict__["_openai_message"] = (key, msg, encoded)
    return msg, encoded


_ENCODED: dict[Any, Any] = {}  # what every request starts with, encoded once per process


def _system_json(system: str) -> str:
    key = ("system", system)
    hit = _ENCODED.get(key)
    if hit is None:
        if len(_ENCODED) > 32:
            _ENCODED.clear()
        hit = _ENCODED[key] = dumps({"role": "system", "content": system})
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
        hit = _ENCODED[key] = (tools, EncodedList(list(items), dumps(items)))
    return hit[1]


def _openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }


def build(provider_type: str, messages: list[Message], **kw: Any) -> Built:
    fn = anthropic_body if provider_type == "anthropic" else openai_body
    return fn(messages, **kw)
