"""A structural validator of request bodies, for both wire formats (doc/design.md "The context"
"Valid requests from any edit"): what a provider would reject, or read wrong.
It knows thinking blocks (doc/nodecode.txt, ``nodecode-thinking``): only in
assistant messages, first in them, whole (a signature, or a redacted block's
data), never with cache_control.

``problems(ptype, body)`` returns every broken rule as a sentence (empty when
the body is valid); ``check(ptype, body)`` raises AssertionError with them.
"""

from __future__ import annotations

import json
from typing import Any

MAX_CACHE_MARKS = 4


def check(ptype: str, body: dict[str, Any]) -> None:
    found = problems(ptype, body)
    assert not found, (
        "invalid request body:\n  "
        + "\n  ".join(found)
        + "\n"
        + json.dumps(body.get("messages"), ensure_ascii=False, indent=1)[:6000]
    )


def problems(ptype: str, body: dict[str, Any]) -> list[str]:
    return anthropic_problems(body) if ptype == "anthropic" else openai_problems(body)


def _blank(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


# -- Anthropic ------------------------------------------------------------------


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ["messages: expected a non-empty list"]
    out += _anthropic_roles(messages)
    out += _anthropic_blocks(messages)
    out += _anthropic_pairs(messages)
    marks = _cache_marks(body)
    if marks > MAX_CACHE_MARKS:
        out.append(f"{marks} cache_control marks: at most {MAX_CACHE_MARKS} allowed")
    return out


def _anthropic_roles(messages: list[dict]) -> list[str]:
    out = []
    for i, msg in enumerate(messages):
        want = "user" if i % 2 == 0 else "assistant"
        if msg.get("role") != want:
            out.append(
                f"message {i}: role {msg.get('role')!r}, expected {want!r} "
                "(alternating, starting with user)"
            )
            break
    if messages[-1].get("role") != "user":
        out.append("the last message is not a user message")
    return out


THINKING = ("thinking", "redacted_thinking")


def _thinking_block(i: int, j: int, msg: dict, b: dict, after_other: bool) -> list[str]:
    where = f"message {i} block {j}"
    out = []
    if msg["role"] != "assistant":
        out.append(f"{where}: {b['type']} in a {msg['role']} message")
    if after_other:
        out.append(f"{where}: thinking blocks must come first")
    if "cache_control" in b:
        out.append(f"{where}: cache_control on a thinking block")
    if b["type"] == "thinking" and not (
        isinstance(b.get("thinking"), str) and isinstance(b.get("signature"), str)
    ):
        out.append(f"{where}: thinking needs its text and signature")
    if b["type"] == "redacted_thinking" and not isinstance(b.get("data"), str):
        out.append(f"{where}: redacted_thinking needs its data")
    return out


def _anthropic_blocks(messages: list[dict]) -> list[str]:
    out = []
    for i, msg in enumerate(messages):
        content = msg.get("content")
        if not isinstance(content, list) or not content:
            out.append(f"message {i}: content must be a non-empty list of blocks")
            continue
        other = False  # a block that is not thinking came before
        for j, b in enumerate(content):
            kind = b.get("type")
            if kind in THINKING:
                out += _thinking_block(i, j, msg, b, other)
                continue
            other = True
            if kind == "text" and _blank(b.get("text")):
                out.append(f"message {i} block {j}: empty or whitespace-only text")
            elif kind == "tool_use":
                if msg["role"] != "assistant":
                    out.append(f"message {i} block {j}: tool_use in a {msg['role']} message")
                if not isinstance(b.get("input"), dict) or not b.get("name") or not b.get("id"):
                    out.append(
                        f"message {i} block {j}: tool_use needs id, name and an object input"
                    )
            elif kind == "tool_result":
                if msg["role"] != "user":
                    out.append(f"message {i} block {j}: tool_result in a {msg['role']} message")
            elif kind != "text":
                out.append(f"message {i} block {j}: unknown block type {kind!r}")
    return out


def _anthropic_pairs(messages: list[dict]) -> list[str]:
    out = []
    seen: set[str] = set()
    for i, msg in enumerate(messages):
        blocks = msg.get("content") or []
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        for u in uses:
            if u in seen:
                out.append(f"message {i}: tool_use id {u} is not unique")
            seen.add(u)
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        prev = messages[i - 1].get("content") or [] if i else []
        asked = [b.get("id") for b in prev if b.get("type") == "tool_use"]
        if results != asked:
            out.append(
                f"message {i}: tool_results {results} do not answer the previous "
                f"message's tool_uses {asked} one for one, in order"
            )
        lead = [b.get("type") == "tool_result" for b in blocks]
        if results and lead[: len(results)] != [True] * len(results):
            out.append(f"message {i}: tool_results are not first in their message")
        if uses and i + 1 == len(messages):
            out.append(f"message {i}: tool_uses {uses} have no following results")
    return out


def _cache_marks(body: dict[str, Any]) -> int:
    n = 0
    for part in ("system", "tools"):
        value = body.get(part)
        if isinstance(value, list):
            n += sum(1 for b in value if isinstance(b, dict) and "cache_control" in b)
    for msg in body.get("messages") or []:
        n += sum(1 for b in msg.get("content") or [] if "cache_control" in b)
    return n


# -- OpenAI ---------------------------------------------------------------------


def openai_problems(body: dict[str, Any]) -> list[str]:
    messages = body.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        return ["messages: expected a system message and at least one more"]
    out = []
    if messages[0].get("role") != "system":
        out.append("message 0 is not the system message")
    if messages[1].get("role") != "user":
        out.append("message 1 (after the system message) is not a user message")
    if messages[-1].get("role") not in ("user", "tool"):
        out.append(
            f"the last message is a {messages[-1].get('role')} message, expected user or tool"
        )
    out += _openai_messages(messages)
    out += _openai_pairs(messages)
    return out


def _openai_messages(messages: list[dict]) -> list[str]:
    out = []
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if i and role == "system":
            out.append(f"message {i}: a second system message")
        elif role == "user" and _blank(msg.get("content")):
            out.append(f"message {i}: empty or whitespace-only user text")
        elif role == "assistant":
            content, calls = msg.get("content"), msg.get("tool_calls")
            for key in ("reasoning_content", "reasoning"):
                if key in msg and not isinstance(msg[key], str):
                    out.append(f"message {i}: {key} is not a string")
            if content is not None and _blank(content):
                out.append(f"message {i}: empty or whitespace-only assistant text")
            if content is None and not calls:
                out.append(f"message {i}: an assistant message with neither text nor calls")
            for c in calls or []:
                try:
                    args = json.loads(c["function"]["arguments"])
                except (KeyError, TypeError, ValueError):
                    args = None
                if not isinstance(args, dict):
                    out.append(
                        f"message {i}: tool call {c.get('id')} arguments are not a JSON object"
                    )
        elif role == "tool" and not isinstance(msg.get("content"), str):
            out.append(f"message {i}: tool content is not a string")
        elif role not in ("system", "user", "assistant", "tool"):
            out.append(f"message {i}: unknown role {role!r}")
    return out


def _openai_pairs(messages: list[dict]) -> list[str]:
    out = []
    seen: set[str] = set()
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg.get("role") == "tool":
            out.append(
                f"message {i}: a tool message ({msg.get('tool_call_id')}) without "
                "its call just before"
            )
            i += 1
            continue
        calls = (
            [c.get("id") for c in msg.get("tool_calls") or []]
            if msg.get("role") == "assistant"
            else []
        )
        for c in calls:
            if c in seen:
                out.append(f"message {i}: tool call id {c} is not unique")
            seen.add(c)
        answers = []
        j = i + 1
        while j < len(messages) and messages[j].get("role") == "tool":
            answers.append(messages[j].get("tool_call_id"))
            j += 1
        if calls and answers != calls:
            out.append(
                f"message {i}: tool calls {calls} are answered by {answers}: expected "
                "exactly one tool message per call, in order, right after"
            )
        i = j if calls else i + 1
    return out
