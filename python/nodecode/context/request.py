"""Turn the context into a valid provider request, whatever was edited.

``arrange`` applies SPEC §2 "Valid requests" to the message list (call
batches whole, results after their calls, a note never last, a user message
first, empty texts dropped); ``anthropic_body`` and ``openai_body`` map the
arranged list onto each wire format. The same messages always give the same
bytes: nothing here depends on time or on what the provider streamed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from nodecode.context.model import Message

CONTEXT_BEGINS = "(context begins)"
USER_SIDE = ("user", "stub", "notice")
ASSISTANT_SIDE = ("assistant", "note", "call")
CACHE = {"type": "ephemeral"}


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
    breakpoints: list[int] = field(default_factory=list)  # message ids marked for caching


def common_prefix(sent: list[tuple[int, str]], previous: list[tuple[int, str]] | None) -> int:
    """How many leading messages equal the previous request's."""
    n = 0
    for a, b in zip(sent, previous or [], strict=False):
        if tuple(a) != tuple(b):
            break
        n += 1
    return n


def anthropic_body(
    messages: list[Message],
    *,
    model: str,
    system: str,
    tools: list[dict],
    max_tokens: int,
    previous: list[tuple[int, str]] | None = None,
) -> Built:
    arranged = arrange(messages)
    sent = [(m.id, m.digest) for m in arranged]
    blocks = [_block_of(m) for m in arranged]
    marks = _breakpoints(arranged, common_prefix(sent, previous))
    for at in marks:
        blocks[at] = {**blocks[at], "cache_control": CACHE}
    wire: list[dict[str, Any]] = []
    for m, block in zip(arranged, blocks, strict=True):
        role = "assistant" if m.role in ASSISTANT_SIDE else "user"
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].append(block)
        else:
            wire.append({"role": role, "content": [block]})
    for msg in wire:  # results first in their message, in call order (stable)
        if msg["role"] == "user":
            msg["content"].sort(key=lambda b: b["type"] != "tool_result")
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": system, "cache_control": CACHE}],
        "tools": tools,
        "messages": wire,
    }
    return Built(body, sent, [arranged[i].id for i in marks])


def _breakpoints(arranged: list[Message], prefix: int) -> list[int]:
    """Where cache entries are written (with the system one, at most 4): the last
    block unchanged since the previous request, the end of the newest reply, and
    the end. The newest reply's end gets an entry of its own so that a later edit
    just after it (dropping the next turn, say) still finds its prefix cached."""
    end = len(arranged) - 1
    marks = {end}
    if 0 < prefix <= end:
        marks.add(prefix - 1)
    at = end
    while at >= 0 and arranged[at].role not in ASSISTANT_SIDE:
        at -= 1
    if at >= max(prefix - 1, 0):
        marks.add(at)
    return sorted(marks)


def _block_of(m: Message) -> dict[str, Any]:
    """The message's block, made once per message object (messages are immutable)."""
    block = m.__dict__.get("_anthropic_block")
    if block is None:
        block = _anthropic_block(m)
        m.__dict__["_anthropic_block"] = block
    return block


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
    previous: list[tuple[int, str]] | None = None,
) -> Built:
    arranged = arrange(messages)
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in arranged:
        if m.role in USER_SIDE:
            wire.append({"role": "user", "content": m.text})
        elif m.role == "tool":
            wire.append(
                {
                    "role": "tool",
                    "tool_call_id": wire_tool_id(m.call_id or 0, "openai"),
                    "content": m.text,
                }
            )
        else:
            last = wire[-1]
            if last["role"] != "assistant" or (m.role != "call" and last.get("tool_calls")):
                last = {"role": "assistant", "content": None}
                wire.append(last)
            if m.role == "call":
                last.setdefault("tool_calls", []).append(
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
                last["content"] = (
                    m.text if last["content"] is None else (last["content"] + "\n\n" + m.text)
                )
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": wire,
        "tools": [_openai_tool(t) for t in tools],
    }
    return Built(body, [(m.id, m.digest) for m in arranged])


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
