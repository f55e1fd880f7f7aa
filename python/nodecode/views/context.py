"""What the person's editor shows of a session (doc/design.md "Neovim"): the context buffer's
blocks with their token counts and what the cache holds (``cache_view``, which
/context shows too), the removed messages a restore can bring back, a turn's
messages, and the session list.

Plain values only (the host sends them to Lua as they are); nothing here
changes the log except ``open_export``, which is an ordinary export.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from nodecode.budget.meter import Basis
from nodecode.cache import ledger
from nodecode.config import schema
from nodecode.context import derived, fileformat, rendered
from nodecode.context import take as takes
from nodecode.context.derived import Read
from nodecode.context.message import Message
from nodecode.errors import UserError
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.log.store import Store
from nodecode.providers.types import Usage
from nodecode.providers.wire import WireFormat
from nodecode.views.titles import session_title
from nodecode.workspace import Workspace

if TYPE_CHECKING:
    pass

FIRST_LINE_CUT = 100
DEFAULT_ENCODING: str = schema.default("encoding")


@functools.cache
def _encoding(name: str) -> Any:
    import tiktoken  # imported late: loading the ranks takes ~100 ms

    return tiktoken.get_encoding(name)


@functools.lru_cache(maxsize=65536)
def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of one block's text (memoized: each re-export counts only new texts)."""
    return len(_encoding(encoding).encode_ordinary(text)) if text else 0


def open_export(
    ws: Workspace, sid: str, basis: Basis, encoding: str = DEFAULT_ENCODING
) -> dict[str, Any]:
    """Export the context and describe the file for the buffer: its blocks
    (header line, role, tokens), its nonce and what the cache holds of it.
    The blocks come from the very messages the export rendered (one
    transaction: no turn logs in between), so the file is not read back."""
    store = ws.store
    with store.atomic():
        path = takes.export(ws, sid)
        r = derived.read(store, sid)
        messages, exp = r.state.messages, r.takes.latest_export
    blocks, line = [], 2
    for m in messages:  # render(): a header line, the text, one newline
        blocks.append(
            {"id": m.id, "role": m.role, "line": line, "tokens": count_tokens(m.text, encoding)}
        )
        line += 2 + m.text.count("\n")
    return _described(ws, sid, exp, path, blocks, basis)


def describe(
    ws: Workspace, sid: str, first: str, basis: Basis, encoding: str = DEFAULT_ENCODING
) -> dict[str, Any]:
    """What ``open_export`` says, for the export the line ``first`` names (the
    file was reloaded from disk, as another process exported): no new export."""
    parsed = fileformat.parse_first(first)
    exp = None
    if parsed is not None and parsed[:2] == (ws.store_name, sid):
        exp = next(
            (
                e
                for e in ws.store.events(sid, kinds=("export",))
                if (e.payload.get("number"), e.payload.get("nonce")) == parsed[2:]
            ),
            None,
        )
    if exp is None:
        raise UserError(
            f"context.txt: expected an export of {ws.store_name}/{sid} on line 1 "
            f"(found {first[:80]!r}): :NodecodeContext writes a new one"
        )
    # An export's bytes are rendered again from the order it recorded (it keeps
    # no blob since issue 12): reading them as a blob found none, and no blocks.
    data = rendered.export_bytes(ws.store, exp)
    if data is None:
        raise UserError(
            f"context.txt: export {exp.payload['number']} no longer renders to the bytes it "
            "wrote: :NodecodeContext writes a new one"
        )
    blocks = [
        {"id": b.id, "role": b.role, "line": b.line, "tokens": count_tokens(b.body, encoding)}
        for b in rendered.export_split(ws.store, exp, data)[1].blocks
    ]
    return _described(ws, sid, exp, ws.context_file(sid), blocks, basis)


def _described(
    ws: Workspace, sid: str, exp: Any, path: Any, blocks: list[dict[str, Any]], basis: Basis
) -> dict[str, Any]:
    """An export's description for the buffer; each block carries the prefix
    tokens through it and whether the next request can read that prefix from cache."""
    nonce, number = exp.payload["nonce"], exp.payload["number"]
    r = derived.read(ws.store, sid)
    cache = cache_view(r, basis, takes.next_order(r))
    prefix, cached = cache.pop("prefix"), cache.pop("cached")
    for b in blocks:
        b["prefix"] = prefix.get(b["id"])
        b["cached"] = b["id"] in cached
    return {
        "path": str(path),
        "session": sid,
        "nonce": nonce,
        "export": number,
        "first": fileformat.first_line(ws.store_name, sid, number, nonce),
        "blocks": blocks,
        "cache": cache,
        "receipt": str(ws.receipt_file(sid)),
    }


def cache_view(
    r: Read, basis: Basis, order: list[Message], now: float | None = None
) -> dict[str, Any]:
    """What the provider's cache holds for a request of ``order``: the one source
    the context buffer's mark and /context both show. ``last``: what the last
    request really read (its usage); ``through``: the last message the next can
    read from cache (``system``: at least the system prompt and tools, ``fixed``
    tokens), with the prompt tokens through it; ``prefix`` and ``cached``: the
    same per message. ``r``: the session as read."""
    store, scope = r.store, basis.scope
    meter = basis.meter(r.views)
    ratio = meter.ratio()
    count = meter.count(order)
    arranged = [m for m, _ in count.messages]
    at = basis.clock() if now is None else now
    live = set(ledger.live_positions(store, scope, arranged, at)) if scope else set()
    present = {m.id for m in order}
    running = count.system + count.tools
    prefix: dict[int, int] = {}
    cached: set[int] = set()
    through, tokens = None, round(running * ratio) if 0 in live else None
    for i, (m, n) in enumerate(count.messages, 1):
        running += n
        if m.id not in present:
            continue  # `(context begins)`, a stopped call's stand-in result
        prefix[m.id] = round(running * ratio)
        if i in live:
            cached.add(m.id)
            through, tokens = m.id, prefix[m.id]
    return {
        "through": through,
        "system": 0 in live,
        "fixed": round((count.system + count.tools) * ratio),
        "tokens": tokens,
        "last": _last_read(r, meter.wire),
        "prefix": prefix,
        "cached": cached,
    }


def _last_read(r: Read, wire: WireFormat) -> dict[str, Any] | None:
    """What the last request read from cache, from its usage (None before any), and
    what it missed of what was expected, with the reason (``cache.miss``)."""
    last = r.requests.last
    if last is None:
        return None
    usage = Usage.of(last[1].get("usage"))
    out: dict[str, Any] = {
        "seq": last[0],
        "read": usage.cache_read,
        "prompt": wire.prompt_tokens(usage),
    }
    miss = last[1].get("cache_miss")
    if isinstance(miss, dict):  # it read short of what the mark promised, and why
        out["missed"], out["why"] = miss.get("missed"), miss.get("reason")
    return out


def first_line(text: str) -> str:
    line = next((x for x in text.split("\n") if x.strip()), "")
    return line[:FIRST_LINE_CUT] + "…" if len(line) > FIRST_LINE_CUT else line


def path_messages(store: Store, sid: str) -> list[dict[str, Any]]:
    """The head path's messages, for the chat view."""
    return [
        {"seq": m.id, "role": m.role, "text": m.text, "turn": m.turn}
        for m in derived.build(store, sid)
    ]


def removed(store: Store, sid: str) -> list[dict[str, Any]]:
    """Messages of the head's path that are not in the context (deleted or
    evicted): what a restore header can bring back, oldest first."""
    return [
        {"id": m.id, "role": m.role, "turn": m.turn, "first_line": first_line(m.text)}
        for m in derived.state(store, sid).removed()
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
                "title": session_title(store, info),
                "first_ask": first_line(asks[0][0]) if asks else "",
                "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(info.created)),
                "turns": len(turn_tree.turns(store, info.id)),
                "head": info.head,
                "pinned": info.id == pinned,
            }
        )
    return rows
