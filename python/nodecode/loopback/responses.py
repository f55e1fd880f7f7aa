"""The loopback server's OpenAI Responses API: the ``response.*`` events of a
round, in the shape of recorded streams (tests/fixtures/SOURCES.md), the
reasoning items it issues and the check that a request carries them back.

Reasoning items: each of a round's thoughts is one item whose summary is the
thought and whose ``encrypted_content`` this server made from the item's id and
summary. A request is refused with the real API's error when an item's
encrypted content is not one it issued for that item ("The encrypted content
… could not be verified.", ``invalid_encrypted_content``), when a reasoning
item has nothing after it ("… was provided without its required following
item."), or when it answers the last reply's calls without that reply's
reasoning items, unmodified, before its calls. The real API ties that last
rule to the function call's item id (``fc_…``), which nodecode does not send:
the loopback names the call by its ``call_id`` in the same sentence.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from typing import Any

from nodecode.loopback.script import Round
from nodecode.loopback.tokens import OVERHEAD_PER_MESSAGE, count_text
from nodecode.loopback.wire import (
    escape_surrogates,
    json_fragments,
    text_chunks,
    text_deltas,
    thinking_tokens,
)

CONTEXT_WINDOW_EXCEEDED = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
NOT_VERIFIED = "The encrypted content {short} could not be verified."
NO_FOLLOWING = "Item '{id}' of type 'reasoning' was provided without its required following item."
NO_REASONING = (
    "Item '{call}' of type 'function_call' was provided without its required 'reasoning' item: "
    "'{id}'."
)


def _sealed(seed: str) -> str:
    """Something shaped like OpenAI's encrypted content (Fernet tokens start gAAAAA)."""
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest() * 4
    return "gAAAAAB" + base64.urlsafe_b64encode(digest).decode()


def short(content: str) -> str:
    """How the API's error names encrypted content: its first and last four characters."""
    return f"{content[:4]}...{content[-4:]}"


# -- tokens ------------------------------------------------------------------------


def _item_text(item: Any) -> str:
    if not isinstance(item, dict):
        return json.dumps(item)
    content = item.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    kind = item.get("type")
    if kind == "function_call":
        return f"{item.get('name', '')} {item.get('arguments') or ''}"
    if kind == "function_call_output":
        return str(item.get("output") or "")
    if kind == "reasoning":
        return "\n".join(str(s.get("text", "")) for s in item.get("summary") or [])
    return str(content or "")


def prompt_units(body: dict) -> list[tuple[str, int]]:
    """The prompt as units in order (instructions and tools, then each input item),
    each with its canonical JSON and its tokens: what the prefix cache keys on."""
    head = json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True)
    units = [(head, count_text(str(body.get("instructions") or "")) + _tool_tokens(body))]
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    for item in items:
        units.append(
            (json.dumps(item, sort_keys=True), count_text(_item_text(item)) + OVERHEAD_PER_MESSAGE)
        )
    return units


def _tool_tokens(body: dict) -> int:
    return sum(count_text(json.dumps(t, ensure_ascii=False)) for t in body.get("tools") or [])


def responses_tokens(body: dict) -> int:
    return sum(tokens for _, tokens in prompt_units(body))


# -- reasoning items ----------------------------------------------------------------


class ReasoningLedger:
    """The reasoning items this server issued, and those the next request owes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: dict[str, tuple[str, list]] = {}  # encrypted content → (id, summary)
        self._owed: list[dict[str, Any]] = []

    def issue(self, rnd: Round) -> list[dict[str, Any]]:
        """The round's thoughts as reasoning items (a redacted one has no summary)."""
        items = []
        with self._lock:
            for kind, text in rnd.thinking:
                item_id = f"rs_lb{len(self._issued) + 1}"
                summary = [{"type": "summary_text", "text": text}] if kind == "text" else []
                sealed = _sealed(f"{item_id}\0{json.dumps(summary)}")
                self._issued[sealed] = (item_id, summary)
                items.append(
                    {
                        "id": item_id,
                        "type": "reasoning",
                        "summary": summary,
                        "encrypted_content": sealed,
                    }  # fmt: skip
                )
        return items

    def answered(self, items: list[dict[str, Any]], calls: bool) -> None:
        with self._lock:
            self._owed = [dict(i) for i in items] if calls else []

    def refusal(self, body: dict) -> tuple[str, str | None, str | None] | None:
        """(message, param, code) of the API's 400 for reasoning not sent back as
        received, else None."""
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        with self._lock:
            for k, item in enumerate(items):
                if item.get("type") != "reasoning":
                    continue
                sealed = str(item.get("encrypted_content") or "")
                if self._issued.get(sealed) != (item.get("id"), item.get("summary")):
                    return (
                        NOT_VERIFIED.format(short=short(sealed)),
                        None,
                        "invalid_encrypted_content",
                    )
                if not _followed(items, k):
                    return NO_FOLLOWING.format(id=item.get("id")), "input", None
            return self._owed_refusal(items)

    def _owed_refusal(self, items: list[dict[str, Any]]) -> tuple[str, str, None] | None:
        """Answering the last reply's calls: its reasoning items come back before them."""
        last_user = max((k for k, i in enumerate(items) if i.get("role") == "user"), default=-1)
        turn = items[last_user + 1 :]
        calls = [i for i in turn if i.get("type") == "function_call"]
        if (
            not self._owed
            or not calls
            or not any(i.get("type") == "function_call_output" for i in turn)
        ):
            return None
        before = turn[: turn.index(calls[-1])]
        for owed in self._owed:
            if owed not in before:
                message = NO_REASONING.format(call=calls[-1].get("call_id"), id=owed["id"])
                return message, "input", None
        return None


def _followed(items: list[dict[str, Any]], k: int) -> bool:
    for item in items[k + 1 :]:
        if item.get("type") != "reasoning":
            return item.get("type") == "function_call" or item.get("role") == "assistant"
    return False


# -- events ---------------------------------------------------------------------------


def frame(event: dict | str) -> bytes:
    """One SSE event; ``event:`` names its type, as the API sends it."""
    if isinstance(event, str):
        return f"data: {event}\n\n".encode()
    data = escape_surrogates(json.dumps(event, separators=(",", ":"), ensure_ascii=False))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


def usage_of(usage: dict, rnd: Round) -> dict:
    return {
        "input_tokens": usage["input"],
        "input_tokens_details": {"cached_tokens": usage["cache_read"], "cache_write_tokens": 0},
        "output_tokens": usage["output"],
        "output_tokens_details": {"reasoning_tokens": thinking_tokens(rnd)},
        "total_tokens": usage["input"] + usage["output"],
    }


def response_object(rid: str, model: str, body: dict, output: list, usage: dict | None) -> dict:
    """The Response object as the stream's first and last events carry it."""
    return {
        "id": rid, "object": "response", "created_at": int(time.time()),
        "status": "completed" if usage is not None else "in_progress",
        "background": False, "error": None, "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"), "model": model, "output": output,
        "parallel_tool_calls": True, "previous_response_id": None,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": bool(body.get("store", True)), "temperature": 1.0,
        "text": {"format": {"type": "text"}}, "tool_choice": "auto",
        "tools": body.get("tools") or [], "top_p": 1.0, "truncation": "disabled",
        "usage": usage, "user": None, "metadata": {},
    }  # fmt: skip


class _Events:
    """Events numbered as they are made (every event carries its sequence_number)."""

    def __init__(self) -> None:
        self.out: list[dict] = []

    def add(self, kind: str, **fields: Any) -> None:
        self.out.append({"type": kind, "sequence_number": len(self.out), **fields})


def responses_events(
    rnd: Round, first_id: int, model: str, rid: str, body: dict, usage: dict, items: list[dict]
) -> list[dict]:
    """The whole event sequence of one round: reasoning items, the message, the calls."""
    ev = _Events()
    ev.add("response.created", response=response_object(rid, model, body, [], None))
    ev.add("response.in_progress", response=response_object(rid, model, body, [], None))
    output: list[dict] = []
    for item in items:
        _reasoning_events(ev, len(output), item)
        output.append(item)
    if rnd.text:
        output.append(_message_events(ev, len(output), f"msg_lb{rid}", rnd))
    for k, (name, tool_input) in enumerate(rnd.calls):
        call = {"id": f"fc_lb{first_id + k}", "type": "function_call", "status": "completed",
                "arguments": json.dumps(tool_input), "call_id": f"call_lb{first_id + k}",
                "name": name}  # fmt: skip
        _call_events(ev, len(output), call)
        output.append(call)
    done = response_object(rid, model, body, output, usage_of(usage, rnd))
    ev.add("response.completed", response=done)
    return ev.out


def _reasoning_events(ev: _Events, at: int, item: dict) -> None:
    ev.add("response.output_item.added", output_index=at, item={**item, "summary": []})
    for s, part in enumerate(item["summary"]):
        common = {"item_id": item["id"], "output_index": at, "summary_index": s}
        ev.add("response.reasoning_summary_part.added", **common,
               part={"type": "summary_text", "text": ""})  # fmt: skip
        for piece in text_chunks(part["text"]):
            ev.add("response.reasoning_summary_text.delta", **common, delta=piece)
        ev.add("response.reasoning_summary_text.done", **common, text=part["text"])
        ev.add("response.reasoning_summary_part.done", **common, part=dict(part))
    ev.add("response.output_item.done", output_index=at, item=item)


def _message_events(ev: _Events, at: int, item_id: str, rnd: Round) -> dict:
    common = {"item_id": item_id, "output_index": at, "content_index": 0}
    start = {"id": item_id, "type": "message", "status": "in_progress", "content": [],
             "role": "assistant"}  # fmt: skip
    ev.add("response.output_item.added", output_index=at, item=start)
    empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    ev.add("response.content_part.added", **common, part=empty)
    for piece in text_deltas(rnd):
        ev.add("response.output_text.delta", **common, delta=piece, logprobs=[])
    ev.add("response.output_text.done", **common, text=rnd.text, logprobs=[])
    part = {**empty, "text": rnd.text}
    ev.add("response.content_part.done", **common, part=part)
    item = {**start, "status": "completed", "content": [part]}
    ev.add("response.output_item.done", output_index=at, item=item)
    return item


def _call_events(ev: _Events, at: int, call: dict) -> None:
    ev.add("response.output_item.added", output_index=at,
           item={**call, "status": "in_progress", "arguments": ""})  # fmt: skip
    for piece in json_fragments(json.loads(call["arguments"])):
        ev.add("response.function_call_arguments.delta", item_id=call["id"], output_index=at,
               delta=piece)  # fmt: skip
    ev.add("response.function_call_arguments.done", item_id=call["id"], output_index=at,
           arguments=call["arguments"])  # fmt: skip
    ev.add("response.output_item.done", output_index=at, item=call)


def error_event(code: str, message: str, param: str | None = None) -> dict:
    """The stream's ``error`` event: the fields the API reference names, and the same
    in an ``error`` object as recorded streams carry them."""
    error = {"type": "invalid_request_error" if param else "server_error", "code": code,
             "message": message, "param": param}  # fmt: skip
    return {"type": "error", "sequence_number": 0, "code": code, "message": message,
            "param": param, "error": error}  # fmt: skip
