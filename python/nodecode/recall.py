"""Recall: the session log read back (log, one entry, full-text search) — doc/design.md "Recall".

Recall reads the sessions this one forked from (each up to its child's fork
point) and the turns an undo hid, which it marks ``undone``. Every query is
SQL with a LIMIT on an index: ``(session, seq)`` for the log, FTS5 for search.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import msgpack

from nodecode.context import model
from nodecode.errors import CellError
from nodecode.log import turns as turn_tree
from nodecode.log.store import Store
from nodecode.providers import pricing

CLIP = 200
# Events the picker leaves out unless asked: each export and each model request
# is a row, and together they outnumber what was said.
BOOKKEEPING = ("export", "request")
DEFAULT_LIMIT = 20
NO_MATCHES = "(no matches)"
_NO_BOUND = 2**62


@dataclass(frozen=True)
class Hit:
    """One event as recall shows it; ``text`` is clipped or whole by the caller's choice."""

    session: str
    seq: int
    kind: str
    role: str | None
    turn: int | None
    text: str
    payload: dict[str, Any]
    undone: bool

    @property
    def label(self) -> str:
        return self.role or self.kind


# -- the head path (which ancestor events a session reads: turns.scopes) ------------

# Up the turn tree from one turn while the parent stays above a floor. A parent
# is always numbered below its child, which also bounds the walk on bad data.
_WALK = """
    WITH RECURSIVE up(number, parent) AS (
        SELECT number, parent FROM turns WHERE session = ?1 AND number = ?2
        UNION ALL
        SELECT t.number, t.parent FROM up JOIN turns AS t ON t.session = ?1 AND t.number = up.parent
        WHERE up.parent > ?3 AND up.parent < up.number)
    SELECT number, parent FROM up"""


def head_path(store: Store, sid: str, low: int = 1) -> set[tuple[str, int]]:
    """(owner, number) of the head path's turns numbered ``low`` or more (as turns.path).

    Numbers fall along the path, so the walk stops below ``low``; turns at or
    before a fork point are read in the nearest ancestor, as turns.get does.
    """
    out: set[tuple[str, int]] = set()
    infos = turn_tree.ancestry(store, sid)
    number = infos[0].head
    for info in infos:
        if number is None or number < low:
            break
        if info.fork_turn is not None and number <= info.fork_turn:
            continue
        rows = store.read(_WALK, (info.id, number, max(info.fork_turn or 0, low - 1)))
        out.update((info.id, n) for n, _ in rows)
        number = rows[-1][1] if rows else None
    return out


def _path_for(store: Store, sid: str, rows: list[tuple]) -> set[tuple[str, int]]:
    """The part of the session's head path that the turns of ``rows`` could be on."""
    numbers = [row[4] for row in rows if row[4] is not None]
    return head_path(store, sid, min(numbers)) if numbers else set()


def _marked(store: Store, sid: str, rows: list[tuple]) -> list[Hit]:
    """Hits of one session's recall, ``undone`` when their turn is off its head path."""
    path = _path_for(store, sid, rows)
    return [_hit(row, path) for row in rows]


# -- recall-log ---------------------------------------------------------------------


def like_clause(match: str) -> tuple[str, str]:
    """SQL and parameter for ``:match``: a ``%`` pattern as written, else the text literally."""
    if "%" in match:
        return " AND text LIKE ?", match
    escaped = match.replace("\\", "\\\\").replace("_", "\\_")
    return " AND text LIKE ? ESCAPE '\\'", f"%{escaped}%"


def log_hits(
    store: Store,
    sid: str,
    *,
    match: str | None = None,
    before: int | None = None,
    limit: int | None = DEFAULT_LIMIT,
    hide: tuple[str, ...] = (),
) -> list[Hit]:
    """The ``limit`` matching events nearest before seq ``before``, nearest first;
    events of the kinds in ``hide`` are left out."""
    _check_limit("recall-log", limit)
    where, params = "", []
    if match is not None:
        where, pattern = like_clause(match)
        params.append(pattern)
    if hide:
        where += f" AND kind NOT IN ({','.join('?' * len(hide))})"
        params.extend(hide)
    rows: list[tuple] = []
    for owner, upto in turn_tree.scopes(store, sid):
        want = _NO_BOUND if limit is None else limit - len(rows)
        if want <= 0:
            break
        bound = min(
            _NO_BOUND if upto is None else upto + 1, _NO_BOUND if before is None else before
        )
        rows += store.read(
            "SELECT session, seq, kind, role, turn, substr(text, 1, ?), "
            "CASE WHEN text = '' THEN payload END FROM events "
            f"WHERE session = ? AND seq < ?{where} ORDER BY seq DESC LIMIT ?",
            (CLIP + 1, owner, bound, *params, want),
        )
    return _marked(store, sid, rows)


def recall_log(
    store: Store,
    sid: str,
    *,
    match: str | None = None,
    before: int | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[str]:
    """This session's log and its ancestors', oldest first, bodies clipped."""
    hits = log_hits(store, sid, match=match, before=before, limit=limit)
    return [line(h) for h in reversed(hits)]


# -- recall-search ------------------------------------------------------------------


def fts_query(words: str) -> str:
    """Every word quoted FTS5-style and joined by spaces (AND): operators are just text."""
    quoted = ['"' + w.replace('"', '""') + '"' for w in words.split()]
    if not quoted:
        raise CellError('recall-search: expected one or more words to search for (got "")')
    return " ".join(quoted)


def search_hits(store: Store, words: str, *, limit: int = DEFAULT_LIMIT) -> list[Hit]:
    """Messages of every session holding every word, newest first.

    Newest is the append order: ``events.id`` (the FTS rowid) grows with each
    append and ``time`` is taken inside the same write lock, so FTS5 can walk
    its rowids backwards and stop at the limit instead of sorting every match.
    """
    _check_limit("recall-search", limit)
    rows = store.read(
        "SELECT e.session, e.seq, e.kind, e.role, e.turn, substr(e.text, 1, ?), NULL "
        "FROM (SELECT rowid FROM events_fts WHERE events_fts MATCH ? "
        "      ORDER BY rowid DESC LIMIT ?) AS f "
        "JOIN events AS e ON e.id = f.rowid ORDER BY e.id DESC",
        (CLIP + 1, fts_query(words), limit),
    )
    paths = {
        sid: _path_for(store, sid, [r for r in rows if r[0] == sid])
        for sid in {row[0] for row in rows}
    }
    return [_hit(row, paths[row[0]]) for row in rows]


def recall_search(store: Store, words: str, *, limit: int = DEFAULT_LIMIT) -> list[str]:
    """Search hits of every session, newest first, each line naming its session."""
    return [line(h, with_session=True) for h in search_hits(store, words, limit=limit)]


# -- recall-entry -------------------------------------------------------------------


def entry_hit(store: Store, sid: str, n: int) -> Hit:
    """The whole event at seq N, resolved in the nearest ancestor that has it."""
    for owner, upto in turn_tree.scopes(store, sid):
        if upto is not None and n > upto:
            continue
        rows = store.read(
            "SELECT session, seq, kind, role, turn, text, payload FROM events "
            "WHERE session = ? AND seq = ?",
            (owner, n),
        )
        if rows:
            return _marked(store, sid, rows)[0]
    raise CellError(f"recall-entry: no event at seq {n} in session {sid} ({_extent(store, sid)})")


def recall_entry(store: Store, sid: str, n: int) -> str:
    """The header line, then the whole text (a cut result's full output; a call's cell)."""
    hit = entry_hit(store, sid, n)
    body = _whole_text(replace(hit, payload=_as_recorded(store, hit)))
    return head(hit) + ("\n" + body if body else "")


def _as_recorded(store: Store, hit: Hit) -> dict[str, Any]:
    """The payload with its snapshot whole, as such events were always shown: a
    delta is decoded, and an export's order is shown as its ``ids``."""
    context = hit.payload.get("context")
    if not isinstance(context, dict) or (hit.kind != "export" and "after" not in context):
        return hit.payload
    snap = model.decoded(store, hit.session, hit.seq)
    if hit.kind == "export":
        return {
            ("ids" if k == "context" else k): (snap.order if k == "context" else v)
            for k, v in hit.payload.items()
        }
    return {**hit.payload, "context": model.whole(snap)}


def _whole_text(hit: Hit) -> str:
    output = hit.payload.get("output")
    if hit.role == "tool" and isinstance(output, str):
        return output
    cell = hit.payload.get("input")
    if hit.role == "call" and isinstance(cell, dict) and isinstance(cell.get("code"), str):
        return cell["code"]
    if hit.role is None and hit.payload:
        dump = json.dumps(hit.payload, indent=2, ensure_ascii=False, default=_plain)
        return (hit.text + "\n" if hit.text else "") + dump
    return hit.text


def _extent(store: Store, sid: str) -> str:
    low = None
    for owner, upto in turn_tree.scopes(store, sid):
        row = store.read(
            "SELECT MIN(seq) FROM events WHERE session = ? AND seq <= ?",
            (owner, _NO_BOUND if upto is None else upto),
        )[0]
        low = row[0] if row[0] is not None else low
    if low is None:
        return "its log is empty"
    return f"its log has seqs {low}–{store.last_seq(sid)}"


# -- lines ----------------------------------------------------------------------------


def head(hit: Hit, *, with_session: bool = False) -> str:
    """``[s-… · seq N · turn T · role · undone]``, leaving out what does not apply."""
    parts = [hit.session] if with_session else []
    parts.append(f"seq {hit.seq}")
    if hit.turn is not None:
        parts.append(f"turn {hit.turn}")
    parts.append(hit.label)
    if hit.undone:
        parts.append("undone")
    return "[" + " · ".join(parts) + "]"


def line(hit: Hit, *, with_session: bool = False) -> str:
    """One recall line: the head and the body clipped to CLIP characters on one line."""
    body = clip(hit.text or summary(hit.kind, hit.payload))
    return head(hit, with_session=with_session) + (" " + body if body else "")


def clip(text: str, width: int = CLIP) -> str:
    """Newlines shown as ⏎, cut at ``width`` characters with …."""
    flat = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎")
    return flat[:width] + "…" if len(flat) > width else flat


def summary(kind: str, payload: dict[str, Any]) -> str:
    """A compact line for an event with no text: a request's usage, else key=value pairs."""
    usage = payload.get("usage")
    if kind == "request" and isinstance(usage, dict):
        model = payload.get("model")
        by = f"{payload.get('provider')}/{model} " if model else ""
        ignored = " (not used to calibrate: implausible)" if payload.get("usage_ignored") else ""
        written = f" cache_write={usage['cache_write']}" if usage.get("cache_write") else ""
        cost = payload.get("cost")
        priced = f" · {pricing.money(cost)}" if isinstance(cost, (int, float)) else ""
        return (
            f"{by}usage in={usage.get('input')} out={usage.get('output')} "
            f"cache_read={usage.get('cache_read')}{written}{priced}{ignored}"
        )
    return " ".join(f"{k}={_brief(v)}" for k, v in payload.items())


def _brief(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"[{len(value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(map(str, value)) + "}"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def _plain(value: Any) -> Any:
    return f"<{len(value)} bytes>" if isinstance(value, bytes) else repr(value)


def _hit(row: tuple, path: set[tuple[str, int]]) -> Hit:
    session, seq, kind, role, turn, text, packed = row
    payload = msgpack.unpackb(packed, raw=False) if packed is not None else {}
    undone = turn is not None and (session, turn) not in path
    return Hit(session, seq, kind, role, turn, text, payload, undone)


def _check_limit(name: str, limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise CellError(f"{name}: :limit must be 1 or more (got {limit})")


# -- the picker (host) ----------------------------------------------------------------


def recall_items(
    store: Store,
    sid: str,
    *,
    query: str | None,
    everywhere: bool,
    every_kind: bool = False,
    limit: int = 200,
) -> list[dict[str, Any]]:
    """Picker rows, nearest first: this log (``query`` as :match) or, everywhere, a
    search (messages only); the BOOKKEEPING kinds only with ``every_kind``."""
    if everywhere:
        if not (query or "").strip():
            return []
        hits, named = search_hits(store, query or "", limit=limit), True
    else:
        hide = () if every_kind else BOOKKEEPING
        hits, named = log_hits(store, sid, match=query or None, limit=limit, hide=hide), False
    return [
        {
            "session": h.session,
            "seq": h.seq,
            "turn": h.turn,
            "kind": h.kind,
            "role": h.label,
            "line": line(h, with_session=named),
            "undone": h.undone,
        }
        for h in hits
    ]


@dataclass(frozen=True)
class Spent:
    """What a session's own requests cost (a fork's parent's are the parent's):
    in all, and per turn (undone turns too: their money is spent)."""

    total: pricing.Total
    turns: Mapping[int, pricing.Total]


def spent(store: Store, sid: str) -> Spent:
    """The session's spending, read from its request events, the summary
    requests its stubs record (``budget.summary``) and its automatic title's
    request (``agent.title``: the session's, not a turn's)."""
    done = _spent_in_log(store, sid)
    rows = store.read(
        "SELECT cost FROM titles WHERE session = ? AND source = 'auto' AND title IS NOT NULL",
        (sid,),
    )
    total = done.total
    for (cost,) in rows:
        total = total.plus(cost)
    return Spent(total, done.turns) if rows else done


def _spent_in_log(store: Store, sid: str) -> Spent:
    """``spent`` of the log's events; events are never changed, so a second call
    reads only the events logged since the first."""
    key = ("cost", sid)
    seen, done = store.derived.get(key) or (0, Spent(pricing.NONE, {}))
    new = store.events(sid, after=seen, kinds=("request", "stub"))
    if not new:
        return done
    whole, turns = done.total, dict(done.turns)
    for e in new:
        if e.kind == "stub":
            if "summary" not in e.payload:
                continue
            cost = e.payload["summary"].get("cost")
        else:
            cost = e.payload.get("cost")
        whole = whole.plus(cost)
        if e.turn is not None:
            turns[e.turn] = turns.get(e.turn, pricing.NONE).plus(cost)
    done = Spent(whole, turns)
    store.derived[key] = (new[-1].seq, done)
    return done


def cost_lines(store: Store, sid: str) -> list[str]:
    """The session's spending as ``recall-cost`` prints it: one line per turn that
    made a request, then the session's sum (``:help nodecode-cost``)."""
    spending = spent(store, sid)
    lines = [f"turn {n}: {pricing.total_words(t)}" for n, t in sorted(spending.turns.items())]
    return [*lines, f"session {sid}: {pricing.total_words(spending.total)}"]
