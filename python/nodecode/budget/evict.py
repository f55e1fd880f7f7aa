"""Warn and evict (doc/design.md "Budget and eviction"): what each request does
about the budget, and eviction by hand (the stub that stands where evicted history was: ``stubs``).

At each request, after the take: over 85% of the budget and already warned
(or over the whole budget) → evict down to 50%; over 85% and not warned →
one ``notice`` at the end of the request. Whether a warning stands is read
from the log: the last warning notice, unless a request after it was sent
under 85%. An eviction is one ``evict`` snapshot event (a take), preceded by
one ``stub`` message per evicted run; the evicted messages stay on the path,
so the context file can restore them, and recall reads them all.

Eviction order: finished turns, oldest first and whole (with the notes and
notices placed among them); then the running turn's older rounds; messages
restored by a take last. Never the running turn's ask and newest round.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodecode.budget import meter as meters
from nodecode.budget import summary as summaries_of
from nodecode.budget import window as budgets
from nodecode.budget.stubs import (
    CONTENT,
    Unit,
    cell_line,
    note_lines,
    runs,
    stub_payload,
    stub_text,
)
from nodecode.budget.summary import Summarize
from nodecode.context import derived
from nodecode.context import take as takes
from nodecode.context.arrange import Arranged
from nodecode.context.derived import WARNING_MARK, Read, RequestLog
from nodecode.context.message import Message, message_of
from nodecode.context.model import State, snapshot
from nodecode.errors import ContextOverflow, DoesNotFit, UserError
from nodecode.log import turns as turn_tree
from nodecode.log.leases import Lease
from nodecode.log.store import Store
from nodecode.paths import write_private
from nodecode.words import plural
from nodecode.workspace import Workspace

if TYPE_CHECKING:
    from nodecode.config import Config

WARNING_PREFIX = WARNING_MARK


def warning_text(fill: int, budget: int) -> str:
    return (
        f"{WARNING_PREFIX}{round(100 * fill / budget)}% of the budget ({fill} of {budget} "
        "tokens): edit it with (context) — at the next request still over 85% the oldest "
        "turns are evicted into a stub]"
    )


# -- the armed state, from the log ---------------------------------------------


def warned(requests: RequestLog) -> bool:
    """A warning stands: one was given and no request since was sent under 85%."""
    if requests.warning is None:
        return False
    for payload in requests.after_warning():
        fill, tokens = payload.get("fill"), payload.get("budget")
        if fill is None or not tokens or fill < budgets.WARN_AT * tokens:
            return False
    return True


# -- what each request does ------------------------------------------------------


@dataclass
class Evicting:
    """What an eviction works with: the workspace, the session as read for the
    operation, the turn the eviction belongs to, the meter and the budget, and
    what summarizes each evicted span (None: ``evict_summary`` is off)."""

    ws: Workspace
    read: Read
    turn: int | None
    meter: meters.Meter
    plan: budgets.Budget
    summarize: Summarize | None = None

    def again(self) -> None:
        """Read the session again, after this operation wrote to it."""
        self.read = derived.read(self.ws.store, self.read.sid)


@dataclass
class Prepared:
    """The context a request sends, counted, and what the person is told."""

    budget: budgets.Budget
    messages: list[Message]
    counted: int  # our tokenizer's figure for the whole request
    fill: int  # calibrated: what the provider should report
    notices: list[str] = field(default_factory=list)
    arranged: Arranged | None = None  # the messages as sent, with what is derived of them

    def log_fields(self) -> dict[str, Any]:
        """What the request event records (the armed state and calibration read it)."""
        return {
            "counted": self.counted,
            "fill": self.fill,
            "budget": self.budget.tokens,
            "window": self.budget.window,
        }


def before_request(at: Evicting, receipts: list[str] | None = None) -> Prepared:
    """Count the fill, evict if armed and over 85% (or over the budget), warn
    if over 85% and not yet warned. Raises DoesNotFit instead of sending."""
    meter, plan = at.meter, at.plan
    ratio = meter.ratio()

    def counted() -> tuple[Arranged, int]:
        arranged = meter.arranged(at.read.state.messages)
        return arranged, meter.tokens(arranged)[-1]

    arranged, count = counted()
    fill = round(count * ratio)
    notices: list[str] = []
    limit = plan.tokens
    if (
        limit is not None
        and fill > budgets.WARN_AT * limit
        and (fill > limit or warned(at.read.requests))
    ):
        st = at.read.state
        done = evict(
            at,
            target=budgets.EVICT_TO * limit,
            protect=set(st.newest),
            ratio=ratio,
            reason="budget",
            receipts=receipts,
        )
        if done is not None:
            notices.append(done.receipt)
            at.again()
            arranged, count = counted()
            fill = round(count * ratio)
        if fill > limit:
            raise DoesNotFit(does_not_fit(fill, plan, meter, at.read.state, ratio))
    if limit is not None and fill > budgets.WARN_AT * limit and not warned(at.read.requests):
        text = warning_text(fill, limit)
        at.ws.store.append(
            at.read.sid,
            "notice",
            role="notice",
            turn=at.turn,
            text=text,
            payload={"budget": limit, "fill": fill},
        )
        notices.append(text)
        at.again()
        arranged, count = counted()
        fill = round(count * ratio)
    return Prepared(plan, at.read.state.messages, count, fill, notices, arranged)


def after_overflow(
    at: Evicting,
    config: Config,
    error: ContextOverflow,
    sent: Prepared,
    receipts: list[str] | None = None,
    *,
    redact: Callable[[str], str],
) -> Prepared:
    """The provider rejected ``sent`` as too large: record the ceiling (the
    maximum it named, else the size sent less one), log the rejection (so
    recall shows why history goes, and calibration has the size it named),
    evict down to 50% of the new budget and return the request to retry once."""
    store, meter = at.ws.store, at.meter
    ratio = meter.ratio()
    if error.prompt and meters.plausible(error.prompt, sent.counted):
        ratio = error.prompt / sent.counted  # the provider's own count of this very request
    ceiling = budgets.record_ceiling(
        store, config, error.maximum if error.maximum else sent.fill - 1
    )
    at.plan = plan = budgets.of(at.ws, config)
    notice = (
        f"the provider rejected the request as too large; ceiling for "
        f"{plan.provider}/{plan.model} now {plan.window} tokens (budget {plan.tokens})"
    )
    store.append(
        at.read.sid,
        "error",
        turn=at.turn,
        text=redact(f"{notice}: {error}"),
        payload={
            "status": error.status,
            "ceiling": ceiling,
            "maximum": error.maximum,
            "prompt": error.prompt,
            "sent": sent.fill,
            "counted": sent.counted,
            "provider": plan.provider,
            "model": config.model,
        },
    )
    at.again()
    notices = [notice]
    done = evict(
        at,
        target=budgets.EVICT_TO * (plan.tokens or 0),
        protect=set(at.read.state.newest),
        ratio=ratio,
        reason="overflow",
        receipts=receipts,
    )
    if done is not None:
        notices.append(done.receipt)
        at.again()
    st = at.read.state
    counted = meter.total(st.messages)
    fill = round(counted * ratio)
    if plan.tokens is None or fill > plan.tokens:
        why = does_not_fit(fill, plan, meter, st, ratio)
        raise DoesNotFit(f"{why}; the provider said: {error}")
    return Prepared(plan, st.messages, counted, fill, notices)


# -- when nothing fits -----------------------------------------------------------


def does_not_fit(
    fill: int, plan: budgets.Budget, meter: meters.Meter, st: State, ratio: float
) -> str:
    """Why the request cannot be sent, naming what really fills the budget (the
    system prompt and tools, the running turn's ask, the rest) and the one
    change that helps (never a command a higher source would shadow)."""
    fixed = round((meter.system + meter.tools) * ratio)
    asks = [m for m in st.messages if m.id in st.newest and m.role == "user"]
    ask = round(sum(meter.message(m) for m in asks) * ratio)
    head = (
        f"the context does not fit: {fill} tokens after evicting all that may go, over the "
        f"budget of {plan.tokens} (window {plan.window} from {plan.source}, less "
        f"{plan.reply} for the reply): the system prompt and tools take {fixed}, the ask "
        f"{ask}, the rest {max(fill - fixed - ask, 0)}"
    )
    if plan.tokens is not None and fixed >= plan.tokens:
        return f"{head}; the system prompt and tools alone are over the budget: {_wider(plan)}"
    return f"{head}; edit the ask and newest round with (context), or {_wider(plan)}"


def _wider(plan: budgets.Budget) -> str:
    """How to give the context a bigger window, given where the window comes from."""
    if plan.source == budgets.SOURCE_CEILING:
        return (
            "the window is the ceiling learned when the provider rejected a request; once "
            "the server's context is bigger, run `nodecode budget clear`"
        )
    if plan.source == budgets.SOURCE_ENV:
        return f"raise {budgets.ENV_WINDOW} (it shadows `nodecode budget set`)"
    if plan.source == budgets.SOURCE_CONFIG:
        return (
            f"raise context_window of {plan.provider}/{plan.model} in config.jsonc "
            "(it shadows `nodecode budget set`)"
        )
    return "raise the window with `nodecode budget set N`"


# -- who owns what -----------------------------------------------------------------


def owners(messages: list[Message]) -> list[int | None]:
    """The turn each message belongs to by position: its own for asks, replies,
    calls and results; for notes and notices, the one they sit in. Stubs: None."""
    out: list[int | None] = [None] * len(messages)
    last: int | None = None
    for k, m in enumerate(messages):
        if m.role == "stub":
            continue
        if m.role in CONTENT and m.turn is not None:
            last = m.turn
        out[k] = last
    following: int | None = None
    for k in range(len(messages) - 1, -1, -1):
        if messages[k].role == "stub":
            continue
        if out[k] is None:
            out[k] = following
        else:
            following = out[k]
    return out


def units(r: Read, st: State, protect: set[int]) -> list[Unit]:
    """Everything evictable, in eviction order (``r``: the session as read)."""
    order = st.messages
    own = owners(order)
    requests = r.running_requests()
    # Keys: ("turn", turn), ("round", turn, round), ("restored", either of those).
    turns: dict[tuple[Any, ...], Unit] = {}
    rounds: dict[tuple[Any, ...], Unit] = {}
    restored: dict[tuple[Any, ...], Unit] = {}
    current = 0
    for m, turn in zip(order, own, strict=True):
        if m.role == "stub" or m.id <= 0 or _protected(m, turn, protect, st.running):
            continue
        if turn is not None and turn == st.running:
            if m.role in CONTENT or m.role == "thinking":  # a round's thinking is its own
                current = bisect.bisect_left(requests, m.id)
            key: tuple[Any, ...] = ("round", turn, current)
            group = rounds
        else:
            key, group = ("turn", turn), turns
        if m.restored:
            key, group = ("restored", key), restored
        unit = group.get(key)
        if unit is None:
            is_round = key[0] == "round" or (key[0] == "restored" and key[1][0] == "round")
            unit = group[key] = Unit(key, turn, current if is_round else None)
        unit.ids.append(m.id)
    return [*turns.values(), *rounds.values(), *restored.values()]


def _protected(m: Message, owner: int | None, protect: set[int], running: int | None) -> bool:
    """Whether ``m`` stays. A note or notice is judged by where it sits, not by the
    turn that logged it: one the person wrote inside an older turn is taken at the
    newest turn's request, yet belongs to the span around it (one stub, not two)."""
    if m.id not in protect:
        return False
    return m.role in CONTENT or owner == running


# -- evicting ------------------------------------------------------------------------


@dataclass
class Eviction:
    """What an eviction did."""

    seq: int
    receipt: str
    evicted: list[int]
    stubs: list[int]
    before: int
    after: int


def evict(
    at: Evicting,
    *,
    target: float | None,
    protect: set[int],
    ratio: float,
    reason: str,
    only: set[int | None] | None = None,
    receipts: list[str] | None = None,
    explain: Callable[[int], str | None] | None = None,
    why: list[str] | None = None,
) -> Eviction | None:
    """Evict units of the context ``at`` read until the fill is at most ``target``
    (or, with ``only``, every finished turn in it). None when nothing went, also
    when evicting would grow the context (``why`` then gets the reason).
    ``explain`` gives the receipt's last line from the fill after, if it has one."""
    st, meter = at.read.state, at.meter
    count = meter.count(st.messages)
    before = round(count.total * ratio)
    tokens = {m.id: n for m, n in count.messages}
    chosen: list[Unit] = []
    estimate = float(count.total)
    for unit in units(at.read, st, protect):
        if only is not None:
            if unit.round is None and unit.turn in only:
                chosen.append(unit)
            continue
        if target is None or estimate * ratio <= target:
            break
        if not chosen:
            estimate += _stub_head(meter, st)
        chosen.append(unit)
        ids = set(unit.ids)
        estimate -= sum(tokens.get(i, 0) for i in ids)
        estimate += sum(
            meter.text(cell_line(m.text) if m.role == "call" else note_lines(m.text)) + 1
            for m in st.messages
            if m.id in ids and m.role in ("call", "note")
        )  # its line in the stub
    if not chosen:
        return None
    if _after(meter, st, tokens, chosen, count.total) >= count.total:
        if why is not None:  # a stub would cost more than the little it replaces
            why.append("its stub would be larger than what it replaces, so the context would grow")
        return None
    return _apply(at, chosen, before, ratio, reason, receipts, explain)


def _after(
    meter: meters.Meter, st: State, tokens: dict[int, int], chosen: list[Unit], total: int
) -> float:
    """About the fill after evicting ``chosen``: less their tokens, plus the stub
    (its header and a line per call or note it keeps)."""
    ids = {i for u in chosen for i in u.ids}
    kept = sum(
        meter.text(cell_line(m.text) if m.role == "call" else note_lines(m.text)) + 1
        for m in st.messages
        if m.id in ids and m.role in ("call", "note")
    )
    return total + _stub_head(meter, st) + kept - sum(tokens.get(i, 0) for i in ids)


def _stub_head(meter: meters.Meter, st: State) -> int:
    """About what a stub's header line costs (its seqs and counts are not known yet): an
    eviction estimated without it could end a few tokens over its target."""
    last = st.messages[-1].id if st.messages else 1
    return meter.text(stub_text((last, last), 1, [(last, 1)], [], [])) + meters.MESSAGE_OVERHEAD


def _with_pairs(st: State, ids: set[int], protect: set[int]) -> set[int]:
    """A call goes with its result and a result with its call (unless protected)."""
    present = {m.id for m in st.messages}
    results = {m.call_id: m.id for m in st.messages if m.role == "tool"}
    out = set(ids)
    for i in ids:
        m = st.path_messages.get(i)
        if m is None:
            continue
        other = m.call_id if m.role == "tool" else results.get(i) if m.role == "call" else None
        if other is not None and other in present and other not in protect:
            out.add(other)
    return out


def _apply(
    at: Evicting,
    chosen: list[Unit],
    before: int,
    ratio: float,
    reason: str,
    receipts: list[str] | None,
    explain: Callable[[int], str | None] | None = None,
) -> Eviction:
    ws, st, meter, plan, turn = at.ws, at.read.state, at.meter, at.plan, at.turn
    store, sid = ws.store, at.read.sid
    unit_of = {i: u for u in chosen for i in u.ids}
    evicted = _with_pairs(st, set(unit_of), set(st.newest) - set(unit_of))
    for i in evicted - set(unit_of):  # a pair's other half: with the unit of its partner
        m = st.path_messages[i]
        partner = (
            m.call_id
            if m.role == "tool"
            else next((r.id for r in st.messages if r.role == "tool" and r.call_id == i), None)
        )
        unit = unit_of.get(partner) if partner is not None else None
        unit_of[i] = unit or Unit(("pair", i), m.turn, None)
    items = runs(st.messages, evicted)
    asked = reason != "overflow"
    summaries, said = summaries_of.of_stubs(
        at.summarize, at.read.state.messages, items, unit_of, asked
    )
    with store.atomic():
        order: list[Message] = []
        stubs: list[Message] = []
        for k, item in enumerate(items):
            if isinstance(item, Message):
                order.append(item)
                continue
            payload = stub_payload(item, unit_of)
            summary = summaries.get(k)
            if summary is not None:
                payload["notes"].append(summary.note(tuple(payload["span"])))
                payload["summary"] = {
                    "model": summary.model,
                    "tokens": summary.tokens,
                    **({"cost": summary.cost} if summary.cost is not None else {}),
                }
            text = stub_text(
                tuple(payload["span"]),
                payload["turns"],
                [(t, r) for t, r in payload["of_rounds"]],
                payload["cells"],
                payload["notes"],
            )
            stub = message_of(
                store.append(sid, "stub", role="stub", turn=turn, text=text, payload=payload)
            )
            order.append(stub)
            stubs.append(stub)
        after = round(meter.total(order) * ratio)
        head = f"[[receipt {ws.store_name}/{sid} evict]]"
        line = _receipt_line(chosen, stubs, before, after, plan)
        why = explain(after) if explain is not None else None
        line += f"\n{why}" if why else ""
        line += "".join(f"\n{x}" for x in said)
        event = store.append(
            sid,
            "evict",
            turn=turn,
            text=lambda seq: f"{head}\nevicted at seq {seq}: {line}",
            payload={
                "context": snapshot(store, order, st),
                "reason": reason,
                "evicted": sorted(evicted),
                "stubs": [s.id for s in stubs],
                "before": before,
                "after": after,
                "budget": plan.tokens,
            },
        )
    write_private(ws.receipt_file(sid), "\n\n".join([*(receipts or []), event.text]) + "\n")
    return Eviction(event.seq, event.text, sorted(evicted), [s.id for s in stubs], before, after)


def _ranges(numbers: list[int]) -> str:
    """``1–3, 5`` for [1, 2, 3, 5]."""
    out: list[tuple[int, int]] = []  # (first, last) of each run
    for n in sorted(set(numbers)):
        if out and out[-1][1] == n - 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return ", ".join(f"{a}" if a == b else f"{a}\u2013{b}" for a, b in out)


def _receipt_line(
    chosen: list[Unit], stubs: list[Message], before: int, after: int, plan: budgets.Budget
) -> str:
    turns = [u.turn for u in chosen if u.round is None and u.turn is not None]
    rounds: dict[int, set[int]] = {}
    for u in chosen:
        if u.round is not None and u.turn is not None:
            rounds.setdefault(u.turn, set()).add(u.round)
    parts = []
    if turns:
        parts.append(("turn " if len(set(turns)) == 1 else "turns ") + _ranges(turns))
    for t, rs in sorted(rounds.items()):
        parts.append(f"{plural(len(rs), 'round')} of turn {t}")
    if not parts:
        parts.append("restored messages")
    spans = ", ".join(f"{s.payload['span'][0]}\u2013{s.payload['span'][1]}" for s in stubs)
    tokens = f"tokens: {before} → {after}"
    if plan.tokens:
        tokens += f" of {plan.tokens} ({round(100 * after / plan.tokens)}%)"
    return f"{' · '.join(parts)} (seq {spans}) · {tokens}"


# -- by hand -----------------------------------------------------------------------------


def by_hand(
    app: Any,
    sid: str,
    words: list[str] | str | tuple[float | None, int | None] | None,
    summarize: Summarize | None = None,
) -> str:
    """``/evict WORDS`` as `nodecode evict` and :NodecodeEvict run it (``words``
    read, or as ``parse_words`` read them), with the summary ``evict_summary`` asks
    for (``summarize``: another summarizer, e.g. one a stop ends): ``manual``'s receipt."""
    percent, through = words if isinstance(words, tuple) else parse_words(words)
    summarize = summarize or summaries_of.summarizer(app, app.config)
    return manual(
        app.workspace, app.config, sid, percent=percent, through=through, summarize=summarize
    )


def manual(
    ws: Workspace,
    config: Config,
    sid: str,
    *,
    percent: float | None = None,
    through: int | None = None,
    summarize: Summarize | None = None,
) -> str:
    """``/evict [PERCENT | through TURN]``: at once, with a receipt. The newest
    turn always stays. Returns the receipt, or why nothing went, after a line for
    each saved edit of the context pending: those are taken (or refused) first,
    as a request would, so an eviction never leaves one stale."""
    store = ws.store
    with Lease(store, sid):
        plan = budgets.of(ws, config)
        edits = takes.said(takes.take(ws, sid, None, room=meters.Meter(config).room(plan.tokens)))
        r = derived.read(store, sid)
        meter = meters.Meter(config, views=r.views)
        st = r.state
        head = st.running
        protect = set(st.newest) | {
            m.id
            for m, t in zip(st.messages, owners(st.messages), strict=True)
            if t is not None and t == head
        }
        ratio = meter.ratio()
        explain: Callable[[int], str | None] | None = None
        why: list[str] = []
        if through is not None:
            only, target = _turns_through(store, sid, through, head), None
        else:
            share = 50.0 if percent is None else percent
            if not 0 <= share <= 100:
                raise UserError(f"evict: PERCENT must be between 0 and 100 (got {share:g})")
            if plan.tokens is None:
                raise UserError(
                    f"evict: no known window for {plan.provider}/{plan.model}, so "
                    "no percentage of it: set one (nodecode budget set N) or evict "
                    "through TURN"
                )
            only, target = None, plan.tokens * share / 100

            def explain(fill: int) -> str | None:
                return _out_of_reach(meter, plan, st, protect, ratio, share, fill)

        done = evict(
            Evicting(ws, r, head, meter, plan, summarize),
            target=target,
            protect=protect,
            ratio=ratio,
            reason="manual",
            only=only,
            explain=explain,
            why=why,
        )
        said = done.receipt if done is not None else _nothing(meter, plan, st, ratio, explain)
        if done is None and why:
            said = f"{said}; {why[0]}"
        return "\n".join([*edits, said])


def take_room(ws: Workspace, config: Config) -> takes.Room | None:
    """What one block an edit writes may hold in this config's requests (``take.Room``;
    None when the window is unknown), for a take outside a request (a move's)."""
    return meters.Meter(config).room(budgets.of(ws, config).tokens)


def _nothing(
    meter: meters.Meter,
    plan: budgets.Budget,
    st: State,
    ratio: float,
    explain: Callable[[int], str | None] | None = None,
) -> str:
    """What an eviction by hand that found nothing to evict says."""
    fill = round(meter.total(st.messages) * ratio)
    pct = f" ({plan.percent(fill)}% of {plan.tokens})" if plan.tokens else ""
    said = f"nothing to evict: the fill is {fill} tokens{pct}; the newest turn stays"
    why = explain(fill) if explain is not None else None
    return f"{said}; {why}" if why else said


def _out_of_reach(
    meter: meters.Meter,
    plan: budgets.Budget,
    st: State,
    protect: set[int],
    ratio: float,
    target: float | None,
    fill: int,
) -> str | None:
    """Why an eviction to ``target`` percent ended above it: what no eviction
    removes (the system prompt and tools, the newest turn). None when it got there."""
    if target is None or not plan.tokens or fill <= plan.tokens * target / 100:
        return None
    fixed = round((meter.system + meter.tools) * ratio)
    kept = round(sum(meter.message(m) for m in st.messages if m.id in protect) * ratio)
    return (
        f"{target:g}% is out of reach: the system prompt and tools alone are "
        f"{plan.percent(fixed)}% ({fixed} tokens), the newest turn, which stays, "
        f"{plan.percent(kept)}% ({kept})"
    )


def _turns_through(store: Store, sid: str, through: int, head: int | None) -> set[int | None]:
    path = [t.number for t in turn_tree.path(store, sid)]
    if through not in path:
        shown = _ranges(path) if path else "none"
        raise UserError(
            f"evict through {through}: turn {through} is not on this session's "
            f"path (turns on it: {shown})"
        )
    return {None, *path[: path.index(through) + 1]} - {head}


def parse_words(words: list[str] | str | None) -> tuple[float | None, int | None]:
    """``[PERCENT | through TURN]`` as (percent, through)."""
    if isinstance(words, str):
        words = words.split()
    words = [w for w in words or [] if w]
    if not words:
        return None, None
    if words[0] == "through":
        if len(words) == 2 and words[1].isdigit():
            return None, int(words[1])
        raise UserError(
            f"evict: expected `through TURN` with a turn number (got {' '.join(words)!r})"
        )
    if len(words) == 1:
        try:
            return float(words[0].rstrip("%")), None
        except ValueError:
            pass
    raise UserError(f"evict: expected PERCENT or `through TURN` (got {' '.join(words)!r})")
