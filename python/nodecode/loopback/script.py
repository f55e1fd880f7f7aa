"""The loopback server's script: the queue of scripted model rounds.

Script: rounds ``{"text" | "chunks", "calls": [{"code"} | {"name", "input"}], "match"?,
"thinking"?: ["a thought" | {"redacted": true}]}`` from a list or a JSONL file;
``chunks`` streams the text in exactly those deltas; ``thinking`` comes first
in the reply (Anthropic thinking blocks, signed; an OpenAI-compatible reply's
reasoning). Text, tool input and thinking may hold lone UTF-16 surrogates (a
JSON script's ``"\\ud800"``): they go on the wire as JSON ``\\ud800`` escapes, as
from a gateway that cuts strings between UTF-16 units. A request takes the
first remaining round whose ``match`` (if any) is in its last user text and
whose ``match_ask`` (if any) is in its newest ask, the newest user text that
is not a notice or stub, whose first line is in square brackets (a whole
turn's rounds keep matching its ask when a notice follows it, and an earlier
turn's ask matches nothing, ended or stopped);
skipped rounds stay for later. A ``"keep": true`` round stays after it is
taken: the answer to whatever no other round matches.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from typing import Any

EXHAUSTED_TEXT = "(the loopback script has no more rounds)"
# nodecode's notices and stubs (a first line wholly in square brackets): not an ask.
NOTICE = re.compile(r"\[[^\n]*\](\n.*)?", re.DOTALL)


@dataclass(frozen=True)
class Round:
    """One scripted model reply: text, then tool calls as (name, input).
    ``chunks``, when given, are the text's deltas on the wire (they join to ``text``)."""

    text: str = ""
    calls: tuple[tuple[str, dict], ...] = ()
    match: str | None = None
    chunks: tuple[str, ...] = ()
    match_ask: str | None = None
    thinking: tuple[tuple[str, str], ...] = ()  # ("text", thought) or ("redacted", "")
    keep: bool = False  # stays in the queue when taken


def _parse_call(call: Any, where: str) -> tuple[str, dict]:
    if isinstance(call, dict) and isinstance(call.get("code"), str):
        return "eval", {"code": call["code"]}
    if isinstance(call, dict) and isinstance(call.get("name"), str):
        tool_input = call.get("input", {})
        if isinstance(tool_input, dict):
            return call["name"], tool_input
    raise ValueError(f"{where}: a call must be {{code}} or {{name, input: object}} (got {call!r})")


def _parse_thinking(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    items = raw or []
    out = []
    for item in items if isinstance(items, list) else [items]:
        if isinstance(item, str):
            out.append(("text", item))
        elif isinstance(item, dict) and item.get("redacted"):
            out.append(("redacted", ""))
        else:
            raise ValueError(
                f"{where}: 'thinking' must be a list of texts or {{redacted: true}} (got {item!r})"
            )
    return tuple(out)


KEYS = tuple(f.name for f in dataclasses.fields(Round))


def parse_round(raw: Any, where: str = "round") -> Round:
    """A ``Round`` from its JSON form; ``where`` names it in the error (a key it
    does not know too: a misspelt ``match_ask`` would otherwise answer any ask)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be a JSON object (got {raw!r})")
    unknown = sorted(str(k) for k in raw if k not in KEYS)
    if unknown:
        raise ValueError(
            f"{where}: unknown key {', '.join(map(repr, unknown))} (a round has {', '.join(KEYS)})"
        )
    calls = raw.get("calls") or []
    if not isinstance(calls, list):
        raise ValueError(f"{where}: 'calls' must be a list (got {calls!r})")
    match, match_ask = raw.get("match"), raw.get("match_ask")
    chunks = raw.get("chunks") or []
    if not isinstance(chunks, list) or not all(isinstance(c, str) for c in chunks):
        raise ValueError(f"{where}: 'chunks' must be a list of strings (got {chunks!r})")
    return Round(
        text="".join(chunks) if chunks else str(raw.get("text") or ""),
        calls=tuple(_parse_call(c, where) for c in calls),
        match=str(match) if match is not None else None,
        chunks=tuple(chunks),
        match_ask=str(match_ask) if match_ask is not None else None,
        thinking=_parse_thinking(raw.get("thinking"), where),
        keep=_parse_keep(raw.get("keep", False), where),
    )


def _parse_keep(keep: Any, where: str) -> bool:
    if not isinstance(keep, bool):
        raise ValueError(f"{where}: 'keep' must be true or false (got {keep!r})")
    return keep


def load_script(script: list[dict] | str | os.PathLike | None) -> list[Round]:
    """Rounds from a list, or a JSONL file (blank and ``//`` lines ignored)."""
    if script is None:
        return []
    if isinstance(script, list):
        return [parse_round(r, f"round {i + 1}") for i, r in enumerate(script)]
    rounds = []
    with open(script, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("//"):
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{os.fspath(script)}:{n}: not JSON ({exc})") from None
            rounds.append(parse_round(raw, f"{os.fspath(script)}:{n}"))
    return rounds


class ScriptQueue:
    """The remaining rounds; callers hold the server lock."""

    def __init__(self, rounds: list[Round]) -> None:
        self.rounds = list(rounds)

    def _find(self, user_text: str, every: str) -> int | None:
        for i, rnd in enumerate(self.rounds):
            if (rnd.match is None or rnd.match in user_text) and (
                rnd.match_ask is None or rnd.match_ask in every
            ):
                return i
        return None

    def peek(self, user_text: str, every: str = "") -> Round:
        i = self._find(user_text, every)
        return Round(text=EXHAUSTED_TEXT) if i is None else self.rounds[i]

    def take(self, user_text: str, every: str = "") -> Round:
        i = self._find(user_text, every)
        if i is None:
            return Round(text=EXHAUSTED_TEXT)
        return self.rounds[i] if self.rounds[i].keep else self.rounds.pop(i)


def _user_contents(body: dict) -> list[Any]:
    """The content of each user message of any wire format, oldest first: Messages
    and Chat Completions ``messages``, Responses ``input`` items, Gemini ``contents``
    (a Responses ``input`` that is one string is one user text)."""
    items = body.get("input")
    if isinstance(items, str):
        return [items]
    return [
        m.get("content") or m.get("parts")
        for m in body.get("messages") or items or body.get("contents") or []
        if isinstance(m, dict) and m.get("role") == "user"
    ]


def _blocks(content: Any) -> list[str]:
    """The text blocks of a message's content, each whole (tool results are none)."""
    if isinstance(content, str):
        return [content]
    parts = content if isinstance(content, list) else []
    return [
        str(p.get("text", ""))
        for p in parts
        if isinstance(p, dict) and p.get("type", "text") in ("text", "input_text") and "text" in p
    ]


def newest_ask(body: dict) -> str:
    """The newest user text of a request that is not a notice (any wire format):
    the ask of the turn it belongs to. A text whose first line is wholly in
    square brackets is nodecode's (a notice, a stub), and tool results are not
    user text."""
    asks = [
        text
        for content in _user_contents(body)
        for text in _blocks(content)
        if text.strip() and not NOTICE.fullmatch(text.strip())
    ]
    return asks[-1] if asks else ""


def last_user_text(body: dict) -> str:
    """The newest non-empty user text of any wire format (tool results are not user
    text), its blocks joined."""
    for content in reversed(_user_contents(body)):
        text = "\n".join(_blocks(content))
        if text:
            return text
    return ""
