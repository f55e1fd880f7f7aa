"""The loopback server's thinking: the blocks it signs, and the check that a
request carries them back as the APIs require (doc/nodecode.txt,
``nodecode-thinking``, names the sources of every rule and text here).

Anthropic, with thinking on in the request: every ``thinking`` block must hold
a signature this server issued for exactly that text, every
``redacted_thinking`` block data it issued; and when the request answers tool
calls, the assistant message before those results must start with the
thinking blocks of the reply that made the calls, complete and in order. The
refusals are Anthropic's texts. OpenAI-compatible, with ``reasoning_required``
(DeepSeek's thinking mode): every assistant message with tool calls must carry
its reasoning back, else DeepSeek's refusal.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from typing import Any

from nodecode.loopback.script import Round

CANNOT_MODIFY = (
    "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
    "modified. These blocks must remain as they were in the original response."
)
EXPECTED_THINKING = (
    "Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is "
    "enabled, a final `assistant` message must start with a thinking block (preceeding the "
    "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking "
    "blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult "
    "our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
INVALID_SIGNATURE = "Invalid `signature` in `thinking` block"
INVALID_DATA = "Invalid `data` in `redacted_thinking` block"
DEEPSEEK_NEEDS_REASONING = (
    "The `reasoning_content` in the thinking mode must be passed back to the API."
)
THINKING_TYPES = ("thinking", "redacted_thinking")
ON = ("enabled", "adaptive")


def _token(seed: str) -> str:
    # surrogatepass: a scripted thought may hold a lone surrogate (see ``wire``)
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    return base64.b64encode(digest * 3).decode()


class ThinkingLedger:
    """What this server signed, and the thinking the next tool-result request owes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signed: dict[str, str] = {}  # signature → the thinking text it signs
        self._redacted: set[str] = set()
        self._owed: list[dict[str, Any]] = []  # the last reply with calls: its thinking blocks

    def sign(self, rnd: Round) -> list[dict[str, Any]]:
        """The round's thinking as Anthropic blocks, each with a fresh signature or data."""
        blocks: list[dict[str, Any]] = []
        with self._lock:
            for kind, text in rnd.thinking:
                n = len(self._signed) + len(self._redacted)
                if kind == "redacted":
                    data = _token(f"redacted\0{n}")
                    self._redacted.add(data)
                    blocks.append({"type": "redacted_thinking", "data": data})
                else:
                    signature = _token(f"signed\0{n}\0{text}")
                    self._signed[signature] = text
                    blocks.append({"type": "thinking", "thinking": text, "signature": signature})
        return blocks

    def answered(self, blocks: list[dict[str, Any]], calls: bool) -> None:
        """A reply went out: with calls, its thinking is owed by the next request."""
        with self._lock:
            self._owed = [dict(b) for b in blocks] if calls else []

    def refusal(self, body: dict[str, Any]) -> str | None:
        """Anthropic's 400 text for a request that breaks the thinking rules, else None."""
        if (body.get("thinking") or {}).get("type") not in ON:
            return None
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        latest = max(
            (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
        )
        with self._lock:
            for i, m in enumerate(messages):
                found = self._invalid(m, i == latest)
                if found is not None:
                    return f"messages.{i}.content.{found[0]}: {found[1]}"
            return self._owed_refusal(messages, latest)

    def _invalid(self, message: dict[str, Any], latest: bool) -> tuple[int, str] | None:
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            return None
        for j, block in enumerate(message["content"]):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "thinking":
                ok = self._signed.get(str(block.get("signature"))) == block.get("thinking")
            elif kind == "redacted_thinking":
                ok = block.get("data") in self._redacted
            else:
                continue
            if not ok:
                return j, CANNOT_MODIFY if latest else (
                    INVALID_SIGNATURE if kind == "thinking" else INVALID_DATA
                )
        return None

    def _owed_refusal(self, messages: list[dict[str, Any]], latest: int) -> str | None:
        """The results of the last reply's calls must follow its thinking, as it was."""
        if not self._owed or latest < 0 or latest != len(messages) - 2:
            return None
        results = messages[-1].get("content")
        if not isinstance(results, list) or not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in results
        ):
            return None
        content = messages[latest].get("content")
        content = content if isinstance(content, list) else [{"type": "text"}]
        first = content[0] if content and isinstance(content[0], dict) else {}
        if first.get("type") not in THINKING_TYPES:
            found = first.get("type") or "text"
            return f"messages.{latest}.content.0.type: " + EXPECTED_THINKING.format(found=found)
        for j, owed in enumerate(self._owed):
            sent = content[j] if j < len(content) else {}
            if sent != owed:
                return f"messages.{latest}.content.{j}: {CANNOT_MODIFY}"
        return None


def reasoning_refusal(body: dict[str, Any], field: str) -> str | None:
    """DeepSeek's thinking mode: an assistant message with tool calls lacks its reasoning."""
    for m in body.get("messages") or []:
        calls = isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
        if calls and not (isinstance(m.get(field), str) and m[field]):
            return DEEPSEEK_NEEDS_REASONING
    return None
