"""What the loopback server writes back: the ``Reply``, and each format's errors
as the real APIs send them (HTTP errors, the overflow error, an error inside a
stream, the keep-alives of a stream that never ends)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from nodecode.loopback import gemini, responses
from nodecode.loopback.wire import anthropic_frame, openai_frame

ANTHROPIC, OPENAI, RESPONSES, GOOGLE = "anthropic", "openai", "openai-responses", "google"
SSE_TYPE = "text/event-stream; charset=utf-8"
JSON_TYPE = "application/json"


def _zero_usage() -> dict:
    return {
        "input": 0, "output": 0, "cache_read": 0,
        "cache_write": 0, "cache_write_1h": 0, "cache_write_5m": 0,
    }  # fmt: skip


@dataclass
class Reply:
    """What the handler writes: a whole ``body``, or SSE ``frames`` sent one
    chunk each. ``cut`` sends only the first bytes of ``body``; ``abort``
    closes the socket without finishing, after ``stall`` seconds of silence."""

    status: int
    body: bytes = b""
    frames: list[bytes] | None = None
    content_type: str = JSON_TYPE
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict = field(default_factory=_zero_usage)
    cut: int | None = None
    abort: bool = False
    stall: float = 0.0
    endless: tuple[bytes, float] | None = None  # a frame sent every so many seconds, forever


_ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Invalid request"),
    404: ("not_found_error", "Not found"),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}
_OPENAI_ERRORS = {  # (type, message, code)
    400: ("invalid_request_error", "Invalid request", None),
    404: ("invalid_request_error", "Not found", None),
    429: ("requests", "Rate limit reached for requests. Try again later.", "rate_limit_exceeded"),
    500: ("server_error", "The server had an error while processing your request.", None),
    529: ("server_error", "Overloaded", None),
}


def json_reply(
    status: int, body: dict, headers: dict | None = None, usage: dict | None = None
) -> Reply:
    reply = Reply(status, json.dumps(body).encode(), headers=dict(headers or {}))
    reply.usage = usage or reply.usage
    return reply


def anthropic_error(status: int, message: str | None = None) -> dict:
    """Anthropic's error body (the overloaded one without request_id, as recorded)."""
    default_kind, default_message = _ANTHROPIC_ERRORS.get(
        status, ("api_error", "Internal server error")
    )
    body: dict[str, Any] = {
        "type": "error",
        "error": {"type": default_kind, "message": message or default_message},
    }
    if body["error"]["type"] != "overloaded_error":
        body["request_id"] = "req_loopback"
    return body


def openai_error(
    status: int, message: str | None = None, param: str | None = None, code: str | None = None
) -> dict:
    kind, default_message, default_code = _OPENAI_ERRORS.get(
        status, ("server_error", "Server error", None)
    )
    return {
        "error": {
            "message": message or default_message,
            "type": kind,
            "param": param,
            "code": code or default_code,
        }
    }


def error_reply(
    flavor: str, status: int, message: str | None = None, headers: dict | None = None
) -> Reply:
    if flavor == ANTHROPIC:
        body = anthropic_error(status, message)
    elif flavor == GOOGLE:
        body = gemini.google_error(status, message)
    else:
        body = openai_error(status, message)
    return json_reply(status, body, headers)


def overflow_reply(flavor: str, tokens: int, window: int) -> Reply:
    """The provider's exact context-overflow error (HTTP 400)."""
    if flavor == ANTHROPIC:
        return error_reply(
            ANTHROPIC, 400, f"prompt is too long: {tokens} tokens > {window} maximum"
        )
    if flavor == GOOGLE:
        return error_reply(GOOGLE, 400, gemini.overflow_message(tokens, window))
    if flavor == RESPONSES:  # no numbers: the Responses API names neither size
        error = openai_error(400, responses.CONTEXT_WINDOW_EXCEEDED, "input")
        error["error"]["code"] = "context_length_exceeded"
        return json_reply(400, error)
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    return json_reply(400, openai_error(400, message, "messages", "context_length_exceeded"))


def stream_error_frame(flavor: str, message: str | None = None) -> bytes:
    """An overloaded error inside a 200 stream (``message``: its text, else the provider's)."""
    if flavor == ANTHROPIC:
        return anthropic_frame(anthropic_error(529, message))
    if flavor == GOOGLE:
        return gemini.frame(gemini.google_error(503, message))
    if flavor == RESPONSES:
        return responses.frame(responses.error_event("server_error", message or "Overloaded"))
    return openai_frame(openai_error(529, message))


def endless_frame(flavor: str, kind: str) -> bytes:
    """What a "ping" or "drip" fault sends again and again: a keep-alive, or one
    character of reply text (a keep-alive where the format has no simple delta)."""
    if kind == "drip" and flavor == ANTHROPIC:
        return anthropic_frame(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "."},
            }
        )
    if kind == "drip" and flavor == OPENAI:
        delta = {"index": 0, "delta": {"content": "."}, "finish_reason": None}
        return openai_frame({"id": "drip", "object": "chat.completion.chunk", "choices": [delta]})
    if flavor == ANTHROPIC:
        return anthropic_frame({"type": "ping"})
    return b": ping\n\n"
