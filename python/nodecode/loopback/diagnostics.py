"""The loopback's answer to Anthropic's cache diagnostics (the beta
``cache-diagnosis-2026-04-07``; platform.claude.com/docs/en/build-with-claude/
cache-diagnostics), so that nodecode's ``"cache_diagnostics": true`` is tested
end to end.

As documented: with the beta header present, each request's fingerprint is kept,
keyed by its response's id; a request naming one in
``diagnostics.previous_message_id`` gets a ``diagnostics`` object on its
response (the ``message`` of ``message_start`` when streamed) whose
``cache_miss_reason`` is null when nothing diverged (or the id was null: the
first request opts in), else ``{"type": REASON, "cache_missed_input_tokens":
N}``, ``N`` only on the ``*_changed`` reasons: the previous request's tokens
from the first divergence on. An id it never answered is
``previous_message_not_found``.

Our readings where the docs are silent: the fingerprint compares, in this order,
the model, the tools, the system prompt and the message blocks (the prompt's
own order after the model), each without its ``cache_control`` markers; a
different ``thinking``, ``tool_choice`` or ``output_config`` is
``unavailable``; ``diagnostics`` without the beta header is a 400 naming it.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from nodecode.loopback.tokens import Block, anthropic_parts

BETA = "cache-diagnosis-2026-04-07"
SETTINGS = ("thinking", "tool_choice", "output_config")  # a change: "unavailable"
KEEP = 10_000  # fingerprints held (the API keeps them "for a limited time")


def _digest(blocks: list[Block]) -> str:
    h = hashlib.sha256()
    for b in blocks:
        h.update(b.key.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class Fingerprint:
    """Hashes and token counts of one request, never its text."""

    model: str
    tools: str
    system: str
    settings: str
    messages: tuple[str, ...]  # each message block's cumulative hash
    before: tuple[int, ...]  # tokens before each message block (tools and system included)
    fixed: tuple[int, int]  # tokens of the tools, of the system prompt
    total: int


def fingerprint(body: dict) -> Fingerprint:
    tools, system, messages = anthropic_parts(body)
    chained, before = [], []
    h = hashlib.sha256()
    running = sum(b.tokens for b in tools) + sum(b.tokens for b in system)
    for b in messages:
        h.update(b.key.encode() + b"\0")
        chained.append(h.hexdigest())
        before.append(running)
        running += b.tokens
    settings = repr([body.get(k) for k in SETTINGS])
    return Fingerprint(
        str(body.get("model") or ""),
        _digest(tools),
        _digest(system),
        settings,
        tuple(chained),
        tuple(before),
        (sum(b.tokens for b in tools), sum(b.tokens for b in system)),
        running,
    )


def betas(headers: dict[str, str]) -> list[str]:
    return [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]


class Diagnoses:
    """The fingerprints of the requests answered, by response id."""

    def __init__(self) -> None:
        self._prints: dict[str, Fingerprint] = {}
        self._lock = threading.Lock()

    def refusal(self, headers: dict[str, str], body: dict) -> str | None:
        """The 400's text for ``diagnostics`` sent without the beta header."""
        if "diagnostics" in body and BETA not in betas(headers):
            return f"diagnostics: the field needs the beta header anthropic-beta: {BETA}"
        diag = body.get("diagnostics")
        if "diagnostics" in body and (
            not isinstance(diag, dict)
            or not isinstance(diag.get("previous_message_id"), str | None)
        ):
            return "diagnostics.previous_message_id: Input should be a valid string or null"
        return None

    def answer(self, headers: dict[str, str], body: dict, msg_id: str, scale: float) -> dict | None:
        """Keep this request's fingerprint under ``msg_id``; the response's
        ``diagnostics`` (None: not asked for)."""
        if BETA not in betas(headers):
            return None
        now = fingerprint(body)
        with self._lock:
            if len(self._prints) >= KEEP:
                self._prints.clear()
            self._prints[msg_id] = now
            asked = body.get("diagnostics")
            if not isinstance(asked, dict):
                return None
            previous = asked.get("previous_message_id")
            if previous is None:
                return {"cache_miss_reason": None}
            before = self._prints.get(previous)
        if before is None:
            return {"cache_miss_reason": {"type": "previous_message_not_found"}}
        return {"cache_miss_reason": _compare(before, now, scale)}


def _compare(before: Fingerprint, now: Fingerprint, scale: float) -> dict | None:
    """The first divergence of ``now`` from ``before`` (None: none)."""
    if before.model != now.model:
        return _changed("model_changed", before.total, scale)
    if before.settings != now.settings:
        return {"type": "unavailable"}
    if before.tools != now.tools:
        return _changed("tools_changed", before.total, scale)
    if before.system != now.system:
        return _changed("system_changed", before.total - before.fixed[0], scale)
    for k, key in enumerate(before.messages):
        if k >= len(now.messages) or now.messages[k] != key:
            return _changed("messages_changed", before.total - before.before[k], scale)
    return None


def _changed(kind: str, tokens: int, scale: float) -> dict:
    return {"type": kind, "cache_missed_input_tokens": round(tokens * scale)}
