"""Turn the context into a valid provider request, whatever was edited.

``arrange`` applies SPEC §2 "Valid requests" to the message list (call
batches whole, results after their calls, a note never last, a user message
first, empty texts dropped); ``anthropic_body`` and ``openai_body`` map the
arranged list onto each wire format. The same messages always give the same
bytes: nothing here depends on time or on what the provider streamed.

Thinking messages go back as they arrived (doc/nodecode.txt,
``nodecode-thinking``): an Anthropic block first in its assistant message,
never carrying a cache breakpoint; an OpenAI-compatible reply's reasoning as
fields of its assistant message, only when the model's setting says
``send_back``. Thinking of the other wire format is never sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodecode.context.model import Message
from nodecode.providers.types import EncodedList, dumps

if TYPE_CHECKING:
    from nodecode.config import Thinking

CONTEXT_BEGINS = "(context begins)"
USER_SIDE = ("user", "stub", "notice")
ASSISTANT_SIDE = ("assistant", "note", "call", "thinking")
THINKING_BLOCKS = ("thinking", "redacted_thinking")
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


def sends_thinking(m: Message, provider_type: str, send_back: bool) -> bool:
    """Whether a thinking message goes into a request of this wire format: an
    Anthropic block always (finished turns' too, so the prefix keeps its bytes),
    OpenAI-compatible reasoning when ``send_back``; another format's never."""
    fmt = m.payload.get("format")
    if provider_type == "anthropic":
        return fmt == "anthropic"
    return send_back and fmt == "openai"


def sendable(messages: list[Message], provider_type: str, send_back: bool) -> list[Message]:
    """``messages`` without the thinking this request does not carry."""
    return [
        m for m in messages if m.role != "thinking" or sends_thinking(m, provider_type, send_back)
    ]


def arrange(messages: list[Message]) -> list[Message]:
    """The messages in an order every provider accepts."""
    kept = [m for m in messages if m.role in ("call", "tool", "thinking") or m.text.strip()]
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
    thinking: Thinking | None = None,
) -> Built:
    arranged = arrange(sendable(messages, "anthropic", False))
    sent = [(m.id, m.digest) for m in arranged]
    placed = sorted(p for p in (marks or default_marks)(arranged) if _markable(arranged, p[0]))
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
        if len(content) > 1:  # results first in a user message, thinking in an assistant's
            if msg["role"] == "user":
                order = sorted(
                    range(len(content)), key=lambda k: content[k]["type"] != "tool_result"
                )
            else:
                order = sorted(
                    range(len(content)), key=lambda k: content[k]["type"] not in THINKING_BLOCKS
                )
            msg["content"] = [content[k] for k in order]
            texts[:] = [texts[k] for k in order]
    encoded = ",".join(
        f'{{"role":"{msg["role"]}","content":[{",".join(texts)}]}}'
        for msg, texts in zip(wire, parts, strict=True)
    )
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "system": [system_block],
        "tools": _tools(tools, "anthropic"),
        "messages": EncodedList(wire, f"[{encoded}]"),
    }
    if thinking is not None and thinking.wire is not None:
        body["thinking"] = dict(thinking.wire)
    if thinking is not None and thinking.effort is not None:
        body["output_config"] = {"effort": thinking.effort}
    ids = [arranged[i].id if i >= 0 else 0 for i, _ in placed]
    return Built(body, sent, ids, [ttl for _, ttl in placed], arranged)


def _markable(arranged: list[Message], at: int) -> bool:
    return at < 0 or arranged[at].role != "thinking"


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
    messages: list[Message],
    *,
    model: str,
    system: str,
    tools: list[dict],
    max_tokens: int,
    marks: Marks | None = None,
    thinking: Thinking | None = None,
) -> Built:
    send_back = thinking is not None and thinking.send_back
    arranged = arrange(sendable(messages, "openai", send_back))
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
    parts = [_system_json(system)]
    for group in _openai_groups(arranged):
        msg, encoded = _openai_message(group)
        if msg["role"] == "assistant" and not msg["content"] and not msg.get("tool_calls"):
            continue  # reasoning alone (a reply that only thought) is no message a server takes
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


def build(provider_type: str, messages: list[Message], **kw: Any) -> Built:
    fn = anthropic_body if provider_type == "anthropic" else openai_body
    return fn(messages, **kw)
