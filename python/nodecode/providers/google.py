"""Google's Gemini API: ``POST {base_url}/models/MODEL:streamGenerateContent?alt=sse``.

The request is ``contents`` (runs of ``user`` and ``model`` turns, each a list
of ``parts``), ``systemInstruction``, ``tools[].functionDeclarations`` and a
``generationConfig``; the key goes in the ``x-goog-api-key`` header. Each SSE
event is a whole ``GenerateContentResponse`` holding the next parts of the one
candidate; the last carries ``finishReason`` and ``usageMetadata``.

Thinking: a part with ``"thought": true`` is a thought summary, shown and
logged as thinking; a ``thoughtSignature`` belongs to the part it arrived on
and must go back on that part, unmodified (Gemini 3 refuses a function call
without it). So each signed or thought part is logged as one thinking message
whose block is what goes back: a thought part or an empty signed part as it
arrived, or, for a signature that rode on a function call or on reply text,
``{"thoughtSignature": ..., "on": "functionCall" | "text"}``, which is put
back on the next such part of the same model turn (doc/nodecode.txt,
``nodecode-thinking``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from nodecode.cache.auto import AutoCache
from nodecode.context.arrange import ASSISTANT_SIDE
from nodecode.context.message import Message
from nodecode.errors import ConfigError, ProviderError
from nodecode.providers.overflow import parse_overflow, unwrap_error
from nodecode.providers.sse import DONE, ServerSentEvent
from nodecode.providers.types import EncodedList, Thinking, ThinkingSetting, ToolCall, count, dumpb
from nodecode.providers.wire import (
    Built,
    Request,
    StreamParser,
    TextSink,
    WireFormat,
    call_input,
    encoded,
    encoded_tools,
    load_data,
)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
# Gemini's implicit caching (the context caching page): on for Gemini 2.5 and newer,
# from a minimum prompt per model (2.5: 2,048 tokens; newer: 4,096); no lifetime is
# documented ("send requests with similar prefix in a short amount of time"): five
# minutes is assumed, and a miss after a longer pause is called an expiry.
GEMINI_CACHE = AutoCache(
    "Gemini's implicit cache",
    default_minimum=4096,
    lifetime=300.0,
    minimums=(("gemini-2.5-", 2048),),
    source="https://ai.google.dev/gemini-api/docs/caching",
)
TAG = "google"
SIGNATURE = "thoughtSignature"
SIGNED = "[thought signature: sealed by the provider, sent back as received]"
THINKING_KEYS = ("thinkingBudget", "thinkingLevel", "includeThoughts")
LEVELS = ("minimal", "low", "medium", "high")
_RETRYABLE_STATUSES = {"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"}


class GoogleWire(WireFormat):
    """The Gemini API; ``base_url`` includes the version
    (https://generativelanguage.googleapis.com/v1beta)."""

    type = "google"
    label = "Google Gemini"
    default_base_url = DEFAULT_BASE_URL
    thinking_tag = TAG
    auto_cache = GEMINI_CACHE

    def url(self, base_url: str, model: str) -> str:
        return f"{base_url}/models/{model}:streamGenerateContent?alt=sse"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if api_key:
            headers["x-goog-api-key"] = api_key
        return headers

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """The model is in the URL, not the body (the API takes no such field)."""
        return {k: v for k, v in body.items() if k != "model"}

    def parser(self, on_text: TextSink | None, on_thinking: TextSink | None) -> StreamParser:
        return GoogleParser(on_text, on_thinking)

    def build(self, request: Request) -> Built:
        return _body(self, request)

    def tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_declaration(t) for t in tools]

    def thinking(self, raw: Any, where: str) -> ThinkingSetting:
        return _thinking_setting(raw, where)

    def sends_thinking(self, setting: ThinkingSetting | None) -> bool:
        return True  # signatures go back on their parts, thoughts with them


WIRE = GoogleWire()


# -- the stream ------------------------------------------------------------------


@dataclass
class _Reply:
    """What the candidate's parts said, in order."""

    calls: list[ToolCall] = field(default_factory=list)
    thinking: list[Thinking] = field(default_factory=list)
    thought: dict[str, Any] | None = None  # the thought part streaming now
    text_signed: bool = False  # reply text already carried a signature


class GoogleParser(StreamParser):
    """``GenerateContentResponse`` events → Reply."""

    terminal = "a finishReason"

    def __init__(self, on_text: TextSink | None, on_thinking: TextSink | None = None) -> None:
        super().__init__(on_text, on_thinking)
        self._r = _Reply()

    @property
    def complete(self) -> bool:
        return self.finished or self.stop_reason is not None

    def feed(self, event: ServerSentEvent) -> None:
        if event.data == DONE:
            return
        data = load_data(event.data, "event")
        if data.get("error"):
            raise _stream_error(event.data)
        if isinstance(data.get("usageMetadata"), dict):
            self._set_usage(data["usageMetadata"])
        candidates = data.get("candidates") or []
        candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part, dict):
                self._part(part)
        reason = candidate.get("finishReason")
        if reason:
            self.stop_reason = str(reason)
            self._close_thought()
            self.finished = "usageMetadata" in data  # the last event carries both

    def _part(self, part: dict[str, Any]) -> None:
        if part.get("thought"):
            self._thought(part)
            return
        self._close_thought()
        signature = part.get(SIGNATURE)
        call = part.get("functionCall")
        if isinstance(call, dict):
            if signature:
                self._sealed({SIGNATURE: signature, "on": "functionCall"})
            args = call.get("args")
            name = str(call.get("name") or "")
            self._r.calls.append(ToolCall(str(call.get("id") or ""), name, args or {}))
        elif isinstance(part.get("text"), str):
            text = part["text"]
            if signature and not text:
                self._sealed(dict(part))  # an empty signed part goes back as it is
            elif signature:
                self._sealed({SIGNATURE: signature, "on": "text"})
            self.emit_text(text)

    def _thought(self, part: dict[str, Any]) -> None:
        """A thought part; consecutive unsigned ones are one thought as it streams."""
        text = str(part.get("text") or "")
        self.emit_thinking(text)
        open_ = self._r.thought
        if open_ is not None and SIGNATURE not in open_:
            open_["text"] = str(open_.get("text") or "") + text
            if part.get(SIGNATURE):
                open_[SIGNATURE] = part[SIGNATURE]
            return
        self._close_thought()
        self._r.thought = dict(part)

    def _close_thought(self) -> None:
        thought, self._r.thought = self._r.thought, None
        if thought is not None:
            self._r.thinking.append(Thinking(str(thought.get("text") or ""), thought))

    def _sealed(self, block: dict[str, Any]) -> None:
        self._r.thinking.append(Thinking(SIGNED, block))

    def _set_usage(self, usage: dict[str, Any]) -> None:
        thoughts = count(usage.get("thoughtsTokenCount"))
        self.usage.input = count(usage.get("promptTokenCount"))
        self.usage.cache_read = count(usage.get("cachedContentTokenCount"))
        self.usage.output = count(usage.get("candidatesTokenCount")) + thoughts
        self.usage.thinking = thoughts

    def _tool_calls(self, *, partial: bool) -> list[ToolCall]:
        return list(self._r.calls)  # each call arrives whole

    def _thinking(self, *, partial: bool) -> list[Thinking]:
        open_ = self._r.thought
        if open_ is None or partial:
            return list(self._r.thinking)
        return [*self._r.thinking, Thinking(str(open_.get("text") or ""), open_)]


def _stream_error(raw: str) -> ProviderError:
    """``data: {"error": ...}`` after a 200: overflow first, then by its status."""
    overflow = parse_overflow(None, raw)
    if overflow is not None:
        return overflow
    message, fields = unwrap_error(raw)
    status = str(fields.get("status") or fields.get("code") or "error")
    return ProviderError(
        f"stream error {status}: {message}", retryable=status in _RETRYABLE_STATUSES
    )


# -- the request body ----------------------------------------------------------


def _body(wire: GoogleWire, request: Request) -> Built:
    arr = wire.arranged(request)
    out = arr.out
    names = {m.id: str(m.payload.get("name") or "eval") for m in out if m.role == "call"}
    contents: list[dict[str, Any]] = []
    texts: list[bytes] = []
    i = 0
    while i < len(out):
        side, j = _side(out[i]), i + 1
        while j < len(out) and _side(out[j]) == side:
            j += 1
        content, text = _content(out, i, j, names)
        contents.append(content)
        texts.append(text)
        i = j
    config: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
    thinking = request.thinking
    if thinking is not None and thinking.wire is not None:
        config["thinkingConfig"] = dict(thinking.wire)
    body: dict[str, Any] = {
        "model": request.model,
        "contents": EncodedList(contents, texts),
        "systemInstruction": _system(request.system),
        "generationConfig": config,
    }
    if request.tools:
        body["tools"] = [{"functionDeclarations": list(encoded_tools(wire, request.tools))}]
    return Built(body, arr.sent, arranged=out)


def _side(m: Message) -> str:
    return "model" if m.role in ASSISTANT_SIDE else "user"


_HEADS = {side: b'{"role":"%s","parts":[' % side.encode() for side in ("user", "model")}


def _content(
    out: list[Message], i: int, j: int, names: dict[int, str]
) -> tuple[dict[str, Any], bytes]:
    """The turn of ``out[i:j]`` (one side) and its JSON: a model turn's signatures go
    back on the parts they came with; a user turn's function responses come first."""
    side = _side(out[i])
    run = list(islice(out, i, j))
    if side == "user":
        run = [m for m in run if m.role == "tool"] + [m for m in run if m.role != "tool"]
        parts = [_part_of(m, names) for m in run]
    else:
        parts = _model_parts(run, names)
    content = {"role": side, "parts": [p for p, _ in parts]}
    return content, _HEADS[side] + b",".join(t for _, t in parts) + b"]}"


def _model_parts(run: list[Message], names: dict[int, str]) -> list[tuple[dict[str, Any], bytes]]:
    parts: list[tuple[dict[str, Any], bytes]] = []
    pending: dict[str, list[str]] = {"functionCall": [], "text": []}
    for m in run:
        if m.role == "thinking":
            block = m.payload.get("block") or {}
            on = block.get("on")
            if on in pending:
                pending[on].append(block[SIGNATURE])
            else:  # a thought or an empty signed part, as it came
                parts.append(_part_of(m, names))
            continue
        part = _part_of(m, names)
        on = "functionCall" if m.role == "call" else "text"
        if pending[on]:
            signed = {**part[0], SIGNATURE: pending[on].pop(0)}
            part = (signed, dumpb(signed))
        parts.append(part)
    return parts


def _part_of(m: Message, names: dict[int, str]) -> tuple[dict[str, Any], bytes]:
    """The message's part and its JSON, made once per message object (a result's
    names its call's function, so that is part of what it is kept by)."""
    name = names.get(m.call_id or 0, "eval") if m.role == "tool" else None
    hit = m.memo.get("google:part")
    if hit is None or hit[0] != name:
        part = _make_part(m, name)
        hit = (name, part, dumpb(part))
        m.memo["google:part"] = hit
    return hit[1], hit[2]


def _make_part(m: Message, name: str | None) -> dict[str, Any]:
    if m.role == "thinking":
        return dict(m.payload["block"])
    if m.role == "call":
        return {"functionCall": {"name": m.payload.get("name", "eval"), "args": call_input(m)}}
    if m.role == "tool":
        key = "error" if m.payload.get("error") else "output"
        return {"functionResponse": {"name": name, "response": {key: m.text}}}
    return {"text": m.text}


def _system(system: str) -> dict[str, Any]:
    return encoded(("google-system", system), lambda: {"parts": [{"text": system}]})


def _declaration(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": tool["name"],
        "description": tool["description"],
        "parametersJsonSchema": tool["input_schema"],
    }


# -- the thinking setting ---------------------------------------------------------


def _thinking_setting(raw: Any, where: str) -> ThinkingSetting:
    """A model entry's ``thinking``: Gemini's ``thinkingConfig`` (``thinkingBudget``
    or ``thinkingLevel``), thoughts included unless ``includeThoughts`` is false."""
    if raw is None:
        return ThinkingSetting()
    if not isinstance(raw, dict):
        raise ConfigError(f"config.jsonc: {where}.thinking must be an object (found {raw!r})")
    extra = sorted(set(raw) - set(THINKING_KEYS))
    if extra:
        raise ConfigError(
            f"config.jsonc: {where}.thinking for Gemini takes {', '.join(THINKING_KEYS)} "
            f"(found key {extra[0]!r})"
        )
    budget, level = raw.get("thinkingBudget"), raw.get("thinkingLevel")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise ConfigError(
            f"config.jsonc: {where}.thinking.thinkingBudget must be a whole number "
            f"(found {budget!r})"
        )
    if level is not None and level not in LEVELS:
        raise ConfigError(
            f"config.jsonc: {where}.thinking.thinkingLevel must be one of {', '.join(LEVELS)} "
            f"(found {level!r})"
        )
    return ThinkingSetting({"includeThoughts": True, **raw}, level)
