"""``/context``: the report ``nodecode status`` and ``:NodecodeStatus`` show.

The report shows what the next request would cost and why: the window and
its source, the reply reserve and the budget, the fill and its parts (per
role and per turn), the cached prefix of the last request, the 85% and 50%
marks, and any pending edit.
"""

from __future__ import annotations

import time
from typing import Any

from nodecode import budget as budgets
from nodecode import recall
from nodecode.budget import evict as evictions
from nodecode.budget.meter import Basis
from nodecode.cache import miss as cache_miss
from nodecode.config import Config
from nodecode.context import derived
from nodecode.context import take as takes
from nodecode.context.derived import Read
from nodecode.providers import pricing
from nodecode.providers.types import Usage
from nodecode.providers.wire import WireFormat
from nodecode.views import context as view
from nodecode.views import cost as cost_view
from nodecode.words import plural
from nodecode.workspace import Workspace

PARTS = {
    "user": "asks",
    "assistant": "replies",
    "call": "calls",
    "tool": "results",
    "note": "notes",
    "stub": "stubs",
    "notice": "notices",
    "thinking": "thinking",
}
PART_ORDER = (
    "system",
    "instructions",
    "tools",
    "stubs",
    "notes",
    "asks",
    "thinking",
    "replies",
    "calls",
    "results",
    "notices",
)


def report(ws: Workspace, basis: Basis, sid: str) -> dict[str, Any]:
    """The /context report as plain values (the JSON of ``nodecode status --json``)."""
    store = ws.store
    r = derived.read(store, sid)
    if takes.record_file_edit(ws, r) is not None:  # a saved, unrecorded file is pending too
        r = derived.read(store, sid)
    config = basis.config
    if config is None:  # the callers ask for a strict basis: a broken config says so
        raise ValueError("the /context report needs a config")
    plan = budgets.of(ws, config)
    meter = basis.meter(r.views)
    ratio = meter.ratio()
    count = meter.count(r.state.messages)
    fill = round(count.total * ratio)

    def cal(n: float) -> int:
        return round(n * ratio)

    parts = dict.fromkeys(PART_ORDER, 0)
    parts["system"] = cal(count.system - meter.instructions)
    parts["instructions"], parts["tools"] = cal(meter.instructions), cal(count.tools)
    per_turn: dict[str, int] = {}
    arranged = [m for m, _ in count.messages]
    for (m, n), turn in zip(count.messages, evictions.owners(arranged), strict=True):
        parts[PARTS.get(m.role, "asks")] += cal(n)
        key = "stubs" if m.role == "stub" else str(turn) if turn is not None else "none"
        per_turn[key] = per_turn.get(key, 0) + cal(n)
    return {
        "session": sid,
        **plan.as_dict(),
        "fill": fill,
        "percent": plan.percent(fill),
        "counted": count.total,
        "calibration": round(ratio, 4),
        "parts": parts,
        "per_turn": per_turn,
        "messages": len(arranged),
        "resolved": _resolved(config),
        "last_request": _last_request(r, meter.wire),
        "instructions": [
            {"path": i.shown, "tokens": cal(meter.text(i.text))} for i in basis.prompt.instructions
        ],
        **_cache(ws, r, basis),
        "pending": [_pending(e) for e in r.takes.pending],
        **_spent(recall.spent(store, sid).total),
    }


def _spent(total: pricing.Total) -> dict[str, Any]:
    """The session's cost (``cost``), and as the statusline shows it (``spent``)."""
    return {
        "cost": total.as_dict(),
        "spent": pricing.money(total.dollars) if total.priced else None,
    }


def _cache(ws: Workspace, r: Read, basis: Basis) -> dict[str, Any]:
    """Where the next request can read from cache, pending edits counted: the
    same figures the context buffer's mark shows (``view.cache_view``); and
    what its input costs as it stands, before its new messages (``next``)."""
    order = takes.next_order(r)
    cache = view.cache_view(r, basis, order)
    del cache["prefix"], cache["cached"]
    rates = cost_view.config_rates(ws.home, basis.config)
    ahead = cost_view.reckon(r, basis, order, rates, time.time())
    return {
        "cached_through": cache["through"],
        "cache": cache,
        "next": ahead.as_dict() if ahead is not None else None,
    }


def _resolved(config: Config) -> dict[str, Any] | None:
    """The provider as resolved: its type, base URL, where its settings came from
    (built-in, a models.dev preset, config.jsonc) and where its key is read from
    (a variable's name, a command, a file: never the key)."""
    p = config.provider
    if p is None:
        return None
    key: dict[str, str] | None = None
    if p.api_key_env:
        key = {"env": p.api_key_env}
    elif p.api_key_cmd:
        key = {"command": p.api_key_cmd}
    elif p.api_key_file:
        key = {"file": p.api_key_file}
    return {
        "id": p.id,
        "type": p.type,
        "base_url": p.base_url or config.wire().default_base_url,
        "from": p.origin,
        "key": key,
    }


def _last_request(r: Read, wire: WireFormat) -> dict[str, Any] | None:
    last = r.requests.last
    if last is None:
        return None
    seq, p = last
    usage = Usage.of(p.get("usage"))
    return {
        "seq": seq,
        "provider": p.get("provider"),
        "model": p.get("model"),
        "cache_read": usage.cache_read,
        "cache_write": usage.cache_write,
        "prompt": wire.prompt_tokens(usage),
        "breakpoints": list(p.get("breakpoints") or []),
        "ttls": list(p.get("ttls") or []),
        "fill": p.get("fill"),
        "counted": p.get("counted"),
        **_miss_of(p),
        "cost": p.get("cost"),
    }


def _miss_of(p: dict[str, Any]) -> dict[str, Any]:
    """``cache_miss``: what the request read short of what was expected, and why
    (``cache.miss``); ``diagnostics``: the provider's own reason, when asked for it."""
    out: dict[str, Any] = {}
    if isinstance(p.get("cache_miss"), dict):
        out["cache_miss"] = p["cache_miss"]
    if isinstance(p.get("diagnostics"), dict):
        out["diagnostics"] = p["diagnostics"]
    return out


def _points(last: dict[str, Any]) -> str:
    """``system 1h, 12 1h, 40 5m``: where the last request's entries were placed."""
    ttls = last.get("ttls") or []
    words = []
    for i, at in enumerate(last["breakpoints"]):
        name = "system" if at == 0 else str(at)
        ttl = ttls[i] if i < len(ttls) else None
        words.append(name + (" 1h" if ttl and ttl >= 3600 else " 5m" if ttl else ""))
    return ", ".join(words) or "none"


def _pending(e: Any) -> dict[str, Any]:
    what = (
        f"file edit of export {e.payload.get('export')}"
        if e.payload.get("source") == "file"
        else "(context …) form"
    )
    return {"seq": e.seq, "what": what, "base": e.payload.get("base")}


def render(r: dict[str, Any]) -> str:
    lines = [f"session {r['session']} · {r['provider']}/{r['model']}"]
    if r["window"] is None:
        lines.append("window: unknown (no source knows this model): never evicted ahead of time")
        lines.append(f"reply reserve: {r['reply']}")
    else:
        lines.append(
            f"window: {r['window']} tokens ({r['source']})"
            + (f" · ceiling {r['ceiling']}" if r["ceiling"] else "")
        )
        lines.append(f"reply reserve: {r['reply']} · budget: {r['budget']}")
    pct = f" ({r['percent']}% of the budget)" if r["percent"] is not None else ""
    lines.append(
        f"fill: {plural(r['fill'], 'token')}{pct} · {plural(r['messages'], 'message')} · "
        f"calibration ×{r['calibration']:.3f}"
    )
    lines.append("  " + " · ".join(f"{k} {v}" for k, v in r["parts"].items()))
    lines.append(
        "  per turn: " + (" · ".join(f"{k}: {v}" for k, v in r["per_turn"].items()) or "none")
    )
    if r.get("instructions"):
        lines.append(
            "  instructions: "
            + " · ".join(f"{i['path']} {plural(i['tokens'], 'token')}" for i in r["instructions"])
        )
    if r["budget"] is not None:
        lines.append(f"marks: warn at 85% = {r['warn_at']} · evict to 50% = {r['evict_to']}")
    last = r["last_request"]
    if last is None:
        lines.append("last request: none yet")
    else:
        by = f", {last['provider']}/{last['model']}" if last.get("model") else ""
        lines.append(
            f"last request (seq {last['seq']}{by}): read {last['cache_read']} of "
            f"{last['prompt']} prompt tokens from cache · wrote {last['cache_write']} · "
            f"breakpoints {_points(last)}"
            + (f" · {pricing.money(last['cost'])}" if last.get("cost") is not None else "")
        )
        if last.get("cache_miss"):
            lines.append("  " + cache_miss.line(last["cache_miss"]))
    if r.get("cost") is not None:
        lines.append("spent: " + pricing.total_words(pricing.Total(**r["cost"])))
    ahead = r.get("next") or {}
    priced = ahead.get("dollars")
    lines.append(
        "next request: "
        + cache_words(r.get("cache") or {})
        + (f" · {pricing.money(priced)} of input as it stands" if priced is not None else "")
    )
    pending = r["pending"]
    lines.append(
        "pending edits: "
        + ("; ".join(f"seq {p['seq']} {p['what']}" for p in pending) if pending else "none")
    )
    return "\n".join(lines)


def cache_words(cache: dict[str, Any]) -> str:
    """``cached through message 4 · 744 tokens`` (the context buffer's mark says the same)."""
    if cache.get("through") is not None:
        return f"cached through message {cache['through']} · {plural(cache['tokens'], 'token')}"
    if cache.get("system"):
        return f"cached through the system prompt and tools · {plural(cache['tokens'], 'token')}"
    return "nothing cached yet"


def budget_lines(plan: budgets.Budget) -> list[str]:
    """The window, its source, and what shadows an override (``nodecode budget``)."""
    if plan.window is None:
        lines = [
            (
                f"window: unknown for {plan.provider}/{plan.model} (no source knows it): "
                "never evicted ahead of time"
            )
        ]
    else:
        lines = [
            f"window: {plan.window} tokens ({plan.source}) for {plan.provider}/{plan.model}",
            f"reply reserve: {plan.reply} · budget: {plan.tokens}",
        ]
    known = dict(plan.sources)
    lines.append(
        "sources: " + " · ".join(f"{s} {n if n is not None else '-'}" for s, n in plan.sources)
    )
    override = known.get(budgets.SOURCE_OVERRIDE)
    if override is not None:
        higher = [(s, n) for s, n in plan.sources[:2] if n is not None]
        if higher:
            lines.append(
                f"the store override ({override}) is shadowed by {higher[0][0]} ({higher[0][1]})"
            )
    if plan.ceiling is not None:
        lines.append(
            f"ceiling: {plan.ceiling} (learned from a rejection; `nodecode budget "
            "clear` forgets it)"
        )
    return lines
