"""The loopback server's Gemini API: ``streamGenerateContent?alt=sse`` events of a
round, in the shape of recorded streams (tests/fixtures/SOURCES.md), the
thought signatures it issues and the check that a request carries them back.

Each of a round's thoughts streams as thought parts; the first function call
carries a thought signature (Gemini 3 does), and a round that thought but made
no call ends with an empty signed part. A signature is made from the part it
rides on. A request is refused with the real API's errors: a signature this
server did not issue for that very part is "Corrupted thought signature.";
in the current turn (after the last user text), a model turn whose first
function call has no signature is "Function call is missing a
thought_signature in functionCall parts. …".
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from typing import Any

from nodecode.loopback.script import Round
from nodecode.loopback.tokens import OVERHEAD_PER_MESSAGE, count_text
from nodecode.loopback.wire import escape_surrogates, text_chunks, text_deltas, thinking_tokens

SIGNATURE = "thoughtSignature"
CORRUPTED = "Corrupted thought signature."
MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}. "
    "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
STATUSES = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}  # fmt: skip
MESSAGES = {
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
}


def google_error(status: int, message: str | None = None) -> dict:
    """Google's error body: ``{"error": {"code", "message", "status"}}``."""
    return {
        "error": {
            "code": status,
            "message": message or MESSAGES.get(status, "Request contains an invalid argument."),
            "status": STATUSES.get(status, "UNKNOWN"),
        }
    }


def overflow_message(tokens: int, window: int) -> str:
    return (
        f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({window})."
    )


# -- tokens ------------------------------------------------------------------------


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return json.dumps(part)
    if "functionCall" in part:
        call = part["functionCall"] or {}
        return f"{call.get('name', '')} {json.dumps(call.get('args') or {})}"
    if "functionResponse" in part:
        return json.dumps((part["functionResponse"] or {}).get("response") or {})
    return str(part.get("text") or "")


def prompt_units(body: dict) -> list[tuple[str, int]]:
    """The prompt as units in order (system and tools, then each content), each with
    its canonical JSON (signatures left out) and its tokens."""
    system = body.get("systemInstruction") or {}
    head_text = "\n".join(_part_text(p) for p in system.get("parts") or [])
    tools = sum(count_text(json.dumps(t, ensure_ascii=False)) for t in body.get("tools") or [])
    units = [
        (json.dumps([system, body.get("tools")], sort_keys=True), count_text(head_text) + tools)
    ]
    for content in body.get("contents") or []:
        parts = content.get("parts") or [] if isinstance(content, dict) else []
        text = "\n".join(_part_text(p) for p in parts)
        units.append((json.dumps(content, sort_keys=True), count_text(text) + OVERHEAD_PER_MESSAGE))
    return units


def gemini_tokens(body: dict) -> int:
    return sum(tokens for _, tokens in prompt_units(body))


# -- signatures ------------------------------------------------------------------------


def _canonical(part: dict) -> str:
    return json.dumps({k: v for k, v in part.items() if k != SIGNATURE}, sort_keys=True)


class SignatureLedger:
    """The signatures this server issued, each for the part it rode on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: dict[str, str] = {}  # signature → the canonical part it signs

    def sign(self, part: dict) -> dict:
        with self._lock:
            seed = f"{len(self._issued)}\0{_canonical(part)}"
            digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest() * 6
            signature = base64.b64encode(digest).decode()
            self._issued[signature] = _canonical(part)
        return {**part, SIGNATURE: signature}

    def refusal(self, body: dict) -> str | None:
        """The API's 400 message for signatures not sent back as received, else None."""
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        with self._lock:
            for content in contents:
                for part in content.get("parts") or []:
                    signed = isinstance(part, dict) and SIGNATURE in part
                    if signed and self._issued.get(str(part[SIGNATURE])) != _canonical(part):
                        return CORRUPTED
        return _missing(contents)


def _missing(contents: list[dict]) -> str | None:
    """In the current turn, a model turn's first function call must carry its signature."""
    asks = [
        k
        for k, c in enumerate(contents)
        if c.get("role") == "user"
        and any(isinstance(p, dict) and p.get("text") for p in c.get("parts") or [])
    ]
    for k in range(asks[-1] + 1 if asks else 0, len(contents)):
        if contents[k].get("role") != "model":
            continue
        calls = [p for p in contents[k].get("parts") or [] if "functionCall" in p]
        if calls and SIGNATURE not in calls[0]:
            name = (calls[0]["functionCall"] or {}).get("name", "")
            return MISSING.format(name=name, position=k + 1)
    return None


# -- events ---------------------------------------------------------------------------


def frame(event: dict) -> bytes:
    data = escape_surrogates(json.dumps(event, separators=(",", ":"), ensure_ascii=False))
    return f"data: {data}\n\n".encode()


def usage_metadata(usage: dict, rnd: Round) -> dict:
    thoughts = thinking_tokens(rnd)
    meta: dict[str, Any] = {
        "promptTokenCount": usage["input"],
        "candidatesTokenCount": max(usage["output"] - thoughts, 0),
        "totalTokenCount": usage["input"] + usage["output"],
    }
    if usage["cache_read"]:
        meta["cachedContentTokenCount"] = usage["cache_read"]
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    return meta


def gemini_events(
    rnd: Round, model: str, rid: str, usage: dict, ledger: SignatureLedger
) -> list[dict]:
    """The event sequence of one round; every event carries the usage so far."""
    meta = usage_metadata(usage, rnd)

    def event(parts: list[dict], finish: str | None = None) -> dict:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "usageMetadata": meta, "modelVersion": model,
                "responseId": rid}  # fmt: skip

    thoughts = [t for kind, t in rnd.thinking if kind == "text"]
    events = [event([{"text": p, "thought": True}]) for t in thoughts for p in text_chunks(t)]
    events += [event([{"text": piece}]) for piece in text_deltas(rnd)]
    calls = [{"functionCall": {"name": n, "args": args}} for n, args in rnd.calls]
    if calls:
        events.append(event([ledger.sign(calls[0]), *calls[1:]]))
    last = ledger.sign({"text": ""}) if rnd.thinking and not calls else {"text": ""}
    events.append(event([last], "STOP"))
    return events
