"""Recognise "the request is too large for the window" in any provider's error.

Texts and regexes are from research/providers.md §2.5, checked against every
body in shared/fixtures/errors/. The body is unwrapped first: ``error`` may
be an object, a string, or a string holding more JSON (Ollama wrapping
llama.cpp). Numbers in fields (llama.cpp ``n_ctx``) win over numbers in text.
"""

from __future__ import annotations

import re
from typing import Any

from nodecode.errors import ContextOverflow
from nodecode.providers.types import parse_json

# Each names ``max`` (the window: M in "A + B > M") and, when the text says it, ``prompt``.
_WITH_NUMBERS = [
    r"prompt is too long:\s*(?P<prompt>\d+)\s*tokens\s*>\s*(?P<max>\d+)\s*maximum",
    (
        r"input length and `?max_tokens`? exceed context limit:\s*(?P<prompt>\d+)\s*\+\s*\d+\s*>\s*"
        r"(?P<max>\d+)"
    ),
    (
        r"maximum context length is (?P<max>\d+) tokens\.\s*However, your messages resulted in "
        r"(?P<prompt>\d+) tokens"
    ),
    (
        r"maximum context length is (?P<max>\d+) tokens[.,]\s*however,? you requested \d+ tokens\s*"
        r"\((?P<prompt>\d+) in (?:the messages|your prompt)"
    ),
    (
        r"maximum context length is (?P<max>\d+) tokens\.\s*However, you requested \d+ "
        r"output tokens and your prompt contains at least (?P<prompt>\d+) input tokens"
    ),
    (
        r"maximum context length is (?P<max>\d+) tokens\.\s*However, your request has "
        r"(?P<prompt>\d+) input tokens"
    ),
    (
        r"is too large:\s*\d+\.\s*This model's maximum context length is (?P<max>\d+) tokens and "
        r"your request has (?P<prompt>\d+) input tokens"
    ),
    (
        r"request \((?P<prompt>\d+) tokens\) exceeds the available context size "
        r"\((?P<max>\d+) tokens\)"
    ),
    r"input \((?P<prompt>\d+) tokens\) is larger than the max context size \((?P<max>\d+) tokens\)",
    r"n_keep:?\s*\(?(?P<prompt>\d+)\)?\s*>=\s*n_ctx:?\s*\(?(?P<max>\d+)\)?",
    (
        r"input token count \((?P<prompt>\d+)\) exceeds the maximum number of tokens allowed "
        r"\((?P<max>\d+)\)"
    ),
    r"maximum context length is (?P<max>\d+) tokens",  # OpenRouter and other relatives
]
_WITHOUT_NUMBERS = [
    r"prompt is too long",
    r"exceeds the context window",
    r"exceeds the available context size",
    r"context size has been exceeded",
    r"greater than the context length",
    r"input length exceeds the context length",
    r"context[_ ]length[_ ]exceeded",
    r"input is too long for requested model",
    r"context window exceeds limit",
    r"exceeded model token limit",
    r"too large for model with \d+ maximum context length",
    r"reduce the length of the messages",
]
_NUMBERED = [re.compile(p, re.IGNORECASE) for p in _WITH_NUMBERS]
_PLAIN = [re.compile(p, re.IGNORECASE) for p in _WITHOUT_NUMBERS]
_OVERFLOW_CODES = {"context_length_exceeded", "exceed_context_size_error"}
_OPENROUTER_INPUT = re.compile(r"(\d+) of (?:text|tool) input", re.IGNORECASE)


def unwrap_error(body: str) -> tuple[str, dict[str, Any]]:
    """The error's message and its object's fields, however the body nests them."""
    value: Any = _loads(body)
    if value is None:
        return body.strip(), {}
    for _ in range(4):  # error inside error inside a string, at most a few deep
        if isinstance(value, dict) and "error" in value and value["error"]:
            value = value["error"]
        elif isinstance(value, str) and _loads(value) is not None:
            value = _loads(value)
        else:
            break
    if isinstance(value, dict):
        message = value.get("message") or value.get("detail") or ""
        return str(message).strip(), value
    return str(value).strip(), {}


def parse_overflow(status: int | None, body: str) -> ContextOverflow | None:
    """A ContextOverflow when ``body`` says the request exceeds the window, else None."""
    message, fields = unwrap_error(body)
    if not _is_overflow(message, fields):
        return None
    maximum, prompt = _numbers(message, fields)
    where = f" (HTTP {status})" if status else ""
    text = " ".join(message.split()) or "the request exceeds the model's context window"
    return ContextOverflow(
        f"context overflow{where}: {text}", status=status, maximum=maximum, prompt=prompt
    )


def _is_overflow(message: str, fields: dict[str, Any]) -> bool:
    codes = {str(fields.get("code", "")), str(fields.get("type", ""))}
    if codes & _OVERFLOW_CODES:
        return True
    return any(p.search(message) for p in _NUMBERED + _PLAIN)


def _numbers(message: str, fields: dict[str, Any]) -> tuple[int | None, int | None]:
    maximum, prompt = _int(fields.get("n_ctx")), _int(fields.get("n_prompt_tokens"))
    for pattern in _NUMBERED:
        match = pattern.search(message)
        if match:
            groups = match.groupdict()
            maximum = maximum if maximum is not None else _int(groups.get("max"))
            prompt = prompt if prompt is not None else _int(groups.get("prompt"))
            break
    if prompt is None:
        inputs = [int(n) for n in _OPENROUTER_INPUT.findall(message)]
        prompt = sum(inputs) if inputs else None
    return maximum, prompt


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _loads(text: str) -> Any:
    """Parsed JSON when ``text`` is a JSON object or string of one, else None."""
    text = text.strip()
    if not text.startswith(("{", '"')):
        return None
    try:
        return parse_json(text)
    except ValueError:
        return None
