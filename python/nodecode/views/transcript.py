"""The chat's transcript: what happened in a session, read from its log.

The context (``context.model``) is what the next request reads: evicted turns
are a stub there, rewrites replace text. The transcript is the other view:
every message as it was logged, in order, with a marker where something
happened to the turns instead of a rewrite: ``failed: …``, ``stopped``,
``undone`` (a turn off the head path) and ``evicted at seq N: …`` where an
eviction took place. Rows are ``{seq, role, text, turn}``; a marker's role is
``mark``, its text the marker's words; a turn's ask carries ``spent``, what
its requests cost.
"""

from __future__ import annotations

from typing import Any

from nodecode.log import turns as turn_tree
from nodecode.log.store import Event, Store

# Messages the chat shows (a stub is the model's view of evicted turns: not shown).
SHOWN = ("user", "assistant", "thinking", "call", "tool", "note", "notice")
ENDED = {"stopped": "stopped", "round-limit": "stopped: round limit reached"}
STOPPED_BY_PERSON = "stopped by the person"


def rows(store: Store, sid: str) -> list[dict[str, Any]]:
    """The transcript of session ``sid``: its ancestors' part up to each fork, then its own."""
    visible = turn_tree.visible(store, sid)
    on_path = {(t.session, t.number) for t in turn_tree.path(store, sid)}
    ends = {(t.session, t.last_seq): t for t in visible.values() if t.last_seq is not None}
    out: list[dict[str, Any]] = []
    errors: dict[tuple[str, int], str] = {}
    stops: dict[tuple[str, int], str] = {}
    asks: dict[tuple[str, int], dict[str, Any]] = {}
    for owner, upto in reversed(turn_tree.scopes(store, sid)):
        for e in store.events(owner, upto=upto):
            turn = visible.get(e.turn) if e.turn is not None else None
            if e.turn is not None and (turn is None or turn.session != owner):
                continue  # a turn this session does not see
            key = (owner, e.turn or 0)
            if e.kind == "error":
                errors[key] = e.text
            elif e.kind == "stopped":
                stops[key] = e.text
            elif e.kind == "request" and key in asks:
                _spend(asks[key], e.payload)
            row = _row(e)
            if row is not None:
                out.append(row)
                if row["role"] == "user" and e.turn is not None:
                    asks.setdefault(key, row)
            ended = ends.get((owner, e.seq))
            if ended is not None:
                out += _marks(ended, (owner, ended.number) in on_path, errors, stops)
    return out


def _spend(ask: dict[str, Any], payload: dict[str, Any]) -> None:
    """Add a request of the ask's turn to its ``spent`` (what the chat shows beside
    the reply's header): {dollars, priced, requests, input, output}. Requests
    logged before their prompt tokens were are left out."""
    usage = payload.get("usage") or {}
    if "prompt" not in usage:
        return
    spent = ask.setdefault(
        "spent", {"dollars": 0.0, "priced": 0, "requests": 0, "input": 0, "output": 0}
    )
    cost = payload.get("cost")
    if isinstance(cost, (int, float)):
        spent["dollars"] += cost
        spent["priced"] += 1
    spent["requests"] += 1
    spent["input"] += int(usage.get("prompt") or 0)
    spent["output"] += int(usage.get("output") or 0)


def _row(e: Event) -> dict[str, Any] | None:
    if e.role in SHOWN:
        return {"seq": e.seq, "role": e.role, "text": e.text, "turn": e.turn}
    if e.kind == "receipt":
        return {"seq": e.seq, "role": "receipt", "text": e.text, "turn": e.turn}
    if e.kind == "evict":
        body = e.text.split("\n", 1)[1] if "\n" in e.text else e.text
        return {"seq": e.seq, "role": "mark", "text": body, "turn": e.turn}
    return None


def _marks(
    turn: turn_tree.Turn,
    on_path: bool,
    errors: dict[tuple[str, int], str],
    stops: dict[tuple[str, int], str],
) -> list[dict[str, Any]]:
    """The markers at the end of ``turn``: how it ended (unless it simply did), undone."""
    key = (turn.session, turn.number)
    words = []
    if turn.status == "failed":
        words.append("failed" + (f": {errors[key]}" if errors.get(key) else ""))
    elif turn.status == "stopped" and stops.get(key, STOPPED_BY_PERSON) != STOPPED_BY_PERSON:
        words.append(f"stopped: {stops[key]}")
    elif turn.status in ENDED:
        words.append(ENDED[turn.status])
    if not on_path:
        words.append("undone")
    return [{"seq": turn.last_seq, "role": "mark", "text": w, "turn": turn.number} for w in words]


def parts(rows: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """``rows`` cut into parts of about ``size`` rows, newest part first, each
    starting at an ask (a turn is never cut: the chat draws each part alone)."""
    out: list[list[dict[str, Any]]] = []
    end = len(rows)
    for start in range(len(rows) - 1, -1, -1):
        if start == 0 or (end - start >= size and rows[start]["role"] == "user"):
            out.append(rows[start:end])
            end = start
    return out
