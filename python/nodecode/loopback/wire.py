"""The loopback server's wire pieces: SSE frames and reply bodies in the
Anthropic Messages and OpenAI Chat Completions formats, built from a round."""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

from nodecode.loopback.script import Round
from nodecode.loopback.tokens import count_text

MAX_TEXT_DELTAS = 48  # long replies stream in grouped words, not one event per word


def text_chunks(text: str) -> list[str]:
    """``text`` cut on word boundaries into at most ``MAX_TEXT_DELTAS`` pieces."""
    words = re.findall(r"\s*\S+|\s+", text)
    per = max(1, math.ceil(len(words) / MAX_TEXT_DELTAS))
    return ["".join(words[i : i + per]) for i in range(0, len(words), per)]


def text_deltas(rnd: Round) -> list[str]:
    """The round's text as streamed: its scripted chunks, else cut on words."""
    return list(rnd.chunks) if rnd.chunks else text_chunks(rnd.text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(json_text: str) -> str:
    """JSON text with each lone surrogate as a ``\\udXXX`` escape, so that it
    encodes as UTF-8: the bytes of a gateway that cuts strings between UTF-16
    units (in JSON text they can only stand inside a string, where an escape is valid)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", json_text)


def json_fragments(value: dict, pieces: int = 4) -> list[str]:
    """``value`` as JSON text cut into about ``pieces`` fragments."""
    text = escape_surrogates(json.dumps(value, ensure_ascii=False))
    size = max(1, math.ceil(len(text) / pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


REDACTED_TOKENS = 64  # what a redacted block is reported to have cost


def thinking_tokens(rnd: Round) -> int:
    return sum(count_text(v) if k == "text" else REDACTED_TOKENS for k, v in rnd.thinking)


def output_tokens(rnd: Round) -> int:
    calls = sum(count_text(f"{name} {json.dumps(args)}") for name, args in rnd.calls)
    return max(1, count_text(rnd.text) + calls + thinking_tokens(rnd))


def _compact(value: Any) -> str:
    return escape_surrogates(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def anthropic_frame(event: dict) -> bytes:
    """One SSE event; ``event:`` always equals the JSON ``type``, ping spelled as on the wire."""
    data = '{"type": "ping"}' if event["type"] == "ping" else _compact(event)
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


def openai_frame(chunk: dict | str) -> bytes:
    return f"data: {chunk if isinstance(chunk, str) else _compact(chunk)}\n\n".encode()


def _anthropic_usage(usage: dict, output: int) -> dict:
    return {
        "input_tokens": usage["input"],
        "cache_creation_input_tokens": usage["cache_write"],
        "cache_read_input_tokens": usage["cache_read"],
        "output_tokens": output,
    }


def _thinking_events(blocks: list[dict]) -> list[dict]:
    """Each thinking block as the API streams it (text in deltas, then its signature);
    a redacted block arrives whole in its start event."""
    events: list[dict] = []
    for index, block in enumerate(blocks):
        if block["type"] == "redacted_thinking":
            start = dict(block)
        else:
            start = {"type": "thinking", "thinking": "", "signature": ""}
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        if block["type"] == "thinking":
            for piece in text_chunks(block["thinking"]):
                events.append(_delta(index, {"type": "thinking_delta", "thinking": piece}))
            events.append(
                _delta(index, {"type": "signature_delta", "signature": block["signature"]})
            )
        events.append({"type": "content_block_stop", "index": index})
    return events


def _anthropic_message(msg_id: str, model: str, content: list, stop: Any, usage: dict) -> dict:
    full_usage = _anthropic_usage(usage, usage["output"] if stop else 1)
    full_usage["cache_creation"] = {
        "ephemeral_5m_input_tokens": usage["cache_write_5m"],
        "ephemeral_1h_input_tokens": usage["cache_write_1h"],
    }
    full_usage["service_tier"] = "standard"
    return {
        "id": msg_id, "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": None, "usage": full_usage,
    }  # fmt: skip


def _tool_block(tool_id: str, name: str, tool_input: dict) -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def anthropic_events(
    rnd: Round,
    first_id: int,
    model: str,
    msg_id: str,
    usage: dict,
    thinking: list[dict] | None = None,
) -> list[dict]:
    """The full Messages event sequence of one round, shaped like recorded streams;
    ``thinking`` (the round's signed blocks) comes first."""
    start = _anthropic_message(msg_id, model, [], None, usage)
    events: list[dict] = [{"type": "message_start", "message": start}]
    events += _thinking_events(thinking or [])
    index = len(thinking or [])
    if rnd.text:
        events.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        )
        events += [
            _delta(index, {"type": "text_delta", "text": piece}) for piece in text_deltas(rnd)
        ]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for k, (name, tool_input) in enumerate(rnd.calls):
        block = _tool_block(f"toolu_lb{first_id + k}", name, {}) | {"caller": {"type": "direct"}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        pieces = ["", *json_fragments(tool_input)]
        events += [_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in pieces]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.insert(min(2, len(events)), {"type": "ping"})
    stop = {"stop_reason": "tool_use" if rnd.calls else "end_turn", "stop_sequence": None}
    final = _anthropic_usage(usage, usage["output"])
    if thinking:
        final["output_tokens_details"] = {"thinking_tokens": thinking_tokens(rnd)}
    events.append({"type": "message_delta", "delta": stop, "usage": final})
    events.append({"type": "message_stop"})
    return events


def _delta(index: int, delta: dict) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def anthropic_reply(
    rnd: Round,
    first_id: int,
    model: str,
    msg_id: str,
    usage: dict,
    thinking: list[dict] | None = None,
) -> dict:
    """The non-streaming Messages reply of one round."""
    content: list[dict] = [dict(b) for b in thinking or []]
    content += [{"type": "text", "text": rnd.text}] if rnd.text else []
    content += [_tool_block(f"toolu_lb{first_id + k}", n, i) for k, (n, i) in enumerate(rnd.calls)]
    return _anthropic_message(
        msg_id, model, content, "tool_use" if rnd.calls else "end_turn", usage
    )


def _openai_usage(usage: dict, thinking: int = 0) -> dict:
    return {
        "prompt_tokens": usage["input"],
        "completion_tokens": usage["output"],
        "total_tokens": usage["input"] + usage["output"],
        "prompt_tokens_details": {"cached_tokens": usage["cache_read"], "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": thinking,
            "audio_tokens": 0,
        },
    }


def reasoning_text(rnd: Round) -> str:
    """An OpenAI-compatible reply's reasoning: the round's thoughts, one after another."""
    return "\n\n".join(v for k, v in rnd.thinking if k == "text")


def openai_chunks(
    rnd: Round,
    first_id: int,
    model: str,
    cid: str,
    usage: dict,
    with_usage: bool,
    reasoning_field: str = "reasoning_content",
) -> list:
    """The Chat Completions chunk sequence of one round, ending with ``[DONE]``;
    the reasoning streams first, under ``reasoning_field``."""
    created = int(time.time())

    def chunk(delta: dict | None, finish: str | None = None) -> dict:
        choices = (
            []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": "fp_loopback", "choices": choices}  # fmt: skip
        return body | ({"usage": None} if with_usage else {})

    chunks = [chunk({"role": "assistant", "content": "" if rnd.text else None, "refusal": None})]
    reasoning = reasoning_text(rnd)
    chunks += [chunk({reasoning_field: piece}) for piece in text_chunks(reasoning) if reasoning]
    chunks += [chunk({"content": piece}) for piece in text_deltas(rnd)]
    for k, (name, tool_input) in enumerate(rnd.calls):
        head = {"index": k, "id": f"call_lb{first_id + k}", "type": "function",
                "function": {"name": name, "arguments": ""}}  # fmt: skip
        chunks.append(chunk({"tool_calls": [head]}))
        for piece in json_fragments(tool_input):
            chunks.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if rnd.calls else "stop"))
    if with_usage:
        chunks.append(chunk(None) | {"usage": _openai_usage(usage, thinking_tokens(rnd))})
    return [*chunks, "[DONE]"]


def openai_reply(
    rnd: Round,
    first_id: int,
    model: str,
    cid: str,
    usage: dict,
    reasoning_field: str = "reasoning_content",
) -> dict:
    """The non-streaming Chat Completions reply of one round."""
    message: dict[str, Any] = {"role": "assistant", "content": rnd.text or None, "refusal": None}
    if reasoning_text(rnd):
        message[reasoning_field] = reasoning_text(rnd)
    if rnd.calls:
        message["tool_calls"] = [
            {"id": f"call_lb{first_id + k}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for k, (name, args) in enumerate(rnd.calls)
        ]  # fmt: skip
    choice = {"index": 0, "message": message, "logprobs": None,
              "finish_reason": "tool_calls" if rnd.calls else "stop"}  # fmt: skip
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": _openai_usage(usage, thinking_tokens(rnd))}  # fmt: skip
