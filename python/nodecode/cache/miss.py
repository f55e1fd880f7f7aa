"""Why a cache missed (doc/design.md "The cache"): after each request, what the
ledger expected it to read from the provider's cache against what the provider
reported (usage ``cache_read``), and the reason when it is known.

The expectation is made when the request before ends: the highest prefix of
that request the ledger believes live (the context buffer's cache mark), in the
provider's own count (its prompt total, when the mark is at the request's end;
else our count scaled to it), with its entry's expiry. A request reading less
than that, by more than ``SLACK``, is a shortfall. nodecode names the causes it
can see itself, in prefix order: the model changed, an instructions file
changed, the system prompt or the tools changed, the context changed above the
mark (an edit, an eviction, a restore), or the entry expired. Otherwise the
provider held less than believed, and its cache diagnostics, when asked for
(``"cache_diagnostics": true``), give its reason.

A format with an automatic prefix cache (OpenAI, Gemini: ``WireFormat.auto_cache``)
places no marks; the next request is expected to read the prompt the request before
sent, as its documented rules cache it (from its minimum, in its steps, for its
lifetime), once the provider has shown in the session that it caches at all (a
compatible server that never reports a cache read is never judged). Such a cache
promises nothing, so a shortfall nodecode cannot explain says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nodecode.cache import plan as cache_plan
from nodecode.cache.auto import AutoCache
from nodecode.cache.ledger import Scope, load
from nodecode.context.message import Message
from nodecode.log.store import Store
from nodecode.words import plural

# A shortfall this small is the provider's count of the same prefix moving by a few
# tokens, not a miss: at most this share of the expectation, or ``SLACK_TOKENS``.
SLACK = 0.02
SLACK_TOKENS = 8

# The provider's reasons (Anthropic's cache diagnostics), as the person reads them.
PROVIDER_WORDS = {
    "model_changed": "the model changed",
    "system_changed": "the system prompt changed",
    "tools_changed": "the tools changed",
    "messages_changed": "the messages changed",
    "previous_message_not_found": "the previous response is not known to it",
    "unavailable": "it could not compare the requests",
}


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def expectation(
    store: Store,
    scope: Scope,
    prefix: Sequence[str],
    ours: Sequence[int],
    arranged: Sequence[Message],
    reported: int,
    now: float,
) -> dict[str, Any] | None:
    """What the next request should read from cache, as the ledger stands after this
    one (``prefix``/``ours``: its prefix hashes and cumulative counts; ``reported``:
    its prompt in the provider's count). None: nothing cached, or no count to give."""
    ledger = load(store, scope, now)
    at = ledger.highest_live(prefix, now)
    if at < 0 or reported <= 0 or not ours or ours[-1] <= 0:
        return None
    entries = [e for m in ledger.models if (e := m.live(prefix[at], now)) is not None]
    tokens = reported if at == len(prefix) - 1 else round(ours[at] * reported / ours[-1])
    return {
        "at": at,
        "through": arranged[at - 1].id if at > 0 else 0,
        "key": prefix[at],
        "tokens": tokens,
        "expires": min(e.expires for e in entries),
        "ttl": max(e.ttl for e in entries),
        "system": short_hash(scope.system),
        "tools": short_hash(scope.tools),
    }


def next_expectation(
    store: Store,
    scope: Scope,
    sent: tuple[Sequence[str], Sequence[int], Sequence[Message]],
    reported: int,
    now: float,
    *,
    placed: bool,
    rule: AutoCache | None,
    seen: bool,
) -> dict[str, Any] | None:
    """What the next request should read from cache after this one (``sent``: its
    prefix hashes, cumulative counts and arranged messages; ``reported``: its prompt
    in the provider's count). Its marks ``placed`` by the ledger: the ledger's live
    prefix. Else, with an automatic cache ``rule``: its documented rules, once the
    provider has shown in the session that it caches (``seen``)."""
    prefix, ours, arranged = sent
    if placed:
        return expectation(store, scope, prefix, ours, arranged, reported, now)
    if rule is None or not seen:
        return None
    return automatic_expectation(rule, scope, prefix, arranged, reported, now)


def automatic_expectation(
    rule: AutoCache,
    scope: Scope,
    prefix: Sequence[str],
    arranged: Sequence[Message],
    reported: int,
    now: float,
) -> dict[str, Any] | None:
    """What the next request should read from an automatic cache after this one
    (``reported``: its prompt in the provider's count): the prompt as the rule caches
    it, for the rule's lifetime. None: below the minimum, or nothing to key it by."""
    tokens = rule.cached(reported, scope.model, scope.minimum)
    if tokens <= 0 or not prefix:
        return None
    return {
        "at": len(prefix) - 1,
        "through": arranged[-1].id if arranged else 0,
        "key": prefix[-1],
        "tokens": tokens,
        "expires": now + rule.lifetime,
        "ttl": rule.lifetime,
        "auto": rule.name,
        "system": short_hash(scope.system),
        "tools": short_hash(scope.tools),
    }


@dataclass(frozen=True)
class Now:
    """The request just answered, as the judgement needs it."""

    provider: str
    model: str | None
    instructions: list[list[str]]
    scope: Scope
    prefix: Sequence[str]
    sent: Sequence[tuple[int, str]]
    at: float  # when it was sent (the App's clock)
    read: int  # usage cache_read
    diagnostics: dict[str, Any] | None


def judge(
    before: dict[str, Any] | None, now: Now, sent_before: Any = None
) -> dict[str, Any] | None:
    """The shortfall of the request ``now`` against what the request ``before``
    (its payload) left expected, with its cause; or the provider's own reason when
    it gave one and nothing was expected. None: no shortfall, nothing said.
    ``sent_before()`` gives the earlier request's (id, digest) list when needed."""
    expect = (before or {}).get("expect")
    provider = _provider_reason(now.diagnostics)
    if not isinstance(expect, dict):
        if provider is None:
            return None
        return _miss(now, None, provider, ("unknown", _provider_words(provider)))
    expected = int(expect.get("tokens") or 0)
    missed = expected - now.read
    if missed <= max(SLACK_TOKENS, SLACK * expected):
        return None
    cause = _cause(before or {}, expect, now, sent_before)
    if cause is None:
        if provider is not None:
            words = _provider_words(provider)
        elif expect.get("auto"):
            words = (
                f"{expect['auto']} held less than the request before sent (it is best "
                "effort: another server, or its own eviction)"
            )
        else:
            words = (
                "the provider held less than the ledger believed (another API key, or "
                "its own eviction)"
            )
        cause = ("unknown", words)
    return _miss(now, expect, provider, cause)


def _miss(
    now: Now,
    expect: dict[str, Any] | None,
    provider: dict[str, Any] | None,
    cause: tuple[str, str],
) -> dict[str, Any]:
    expected = int(expect["tokens"]) if expect is not None else None
    return {
        "expected": expected,
        "read": now.read,
        "missed": expected - now.read if expected is not None else None,
        "through": expect.get("through") if expect is not None else None,
        "cause": cause[0],
        "reason": cause[1],
        "provider": provider,
    }


def _provider_reason(diagnostics: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(diagnostics, dict) or not isinstance(diagnostics.get("type"), str):
        return None
    return {"type": diagnostics["type"], "missed": diagnostics.get("missed")}


def _provider_words(provider: dict[str, Any]) -> str:
    kind = provider["type"]
    return f"the provider says {PROVIDER_WORDS.get(kind, kind)} ({kind})"


def _cause(
    before: dict[str, Any], expect: dict[str, Any], now: Now, sent_before: Any
) -> tuple[str, str] | None:
    """The first cause nodecode sees itself, in the order of the prompt."""
    was = (before.get("provider"), before.get("model"))
    if was != (now.provider, now.model):
        return "model", f"the model changed from {was[0]}/{was[1]} to {now.provider}/{now.model}"
    changed = _instructions_changed(before.get("instructions") or [], now.instructions)
    if changed:
        return "instructions", changed
    if expect.get("tools") != short_hash(now.scope.tools):
        return "tools", "the tools changed"
    if expect.get("system") != short_hash(now.scope.system):
        return "system", "the system prompt changed"
    if expect.get("key") not in set(now.prefix):
        return "edit", _edit_words(expect, now, sent_before)
    expires = expect.get("expires")
    if isinstance(expires, int | float) and now.at + cache_plan.MARGIN >= expires:
        late = max(0, round(now.at - expires))
        if expect.get("auto"):
            unused = round(now.at - expires + float(expect.get("ttl") or 0))
            return "expired", (
                f"{expect['auto']} keeps an entry about "
                f"{plural(round(float(expect.get('ttl') or 0) / 60), 'minute')} unused; this "
                f"request came {plural(unused, 'second')} after the one before"
            )
        ttl = "1-hour" if (expect.get("ttl") or 0) >= cache_plan.LONG else "5-minute"
        where = _mark_name(expect)
        return "expired", (
            f"the {ttl} cache entry {where} expired {plural(late, 'second')} before this request"
        )
    return None


def _mark_name(expect: dict[str, Any]) -> str:
    through = expect.get("through")
    return f"through message {through}" if through else "of the system prompt and tools"


def _instructions_changed(before: list[Any], now: list[list[str]]) -> str:
    """``AGENTS.md changed`` (or added, removed): the first instruction file that differs."""
    was = {str(p[0]): p[1] for p in before if isinstance(p, list | tuple) and len(p) == 2}
    now_map = {str(p[0]): p[1] for p in now}
    for path, digest in now_map.items():
        if path not in was:
            return f"the instructions file {path} was added"
        if was[path] != digest:
            return f"the instructions file {path} changed"
    for path in was:
        if path not in now_map:
            return f"the instructions file {path} was removed"
    return ""


def _edit_words(expect: dict[str, Any], now: Now, sent_before: Any) -> str:
    """Which message above the mark changed: the first where the two requests differ."""
    head = f"the context changed above the cache mark (message {expect.get('through')})"
    old = list(sent_before() or []) if callable(sent_before) else []
    at = int(expect.get("at") or 0)
    new = list(now.sent)
    for k, pair in enumerate(old[:at]):
        if k < len(new) and tuple(new[k]) == tuple(pair):
            continue
        mid = pair[0]
        if not any(p[0] == mid for p in new):
            return f"{head}: message {mid} is no longer in the context"
        if any(p[0] == mid and p[1] != pair[1] for p in new):
            return f"{head}: message {mid} was rewritten"
        return f"{head}: the context changed before message {mid}"
    return head


def line(miss: dict[str, Any]) -> str:
    """The miss as one line: the log's text, /context's and the cache mark's."""
    if miss.get("expected") is None:
        head = "cache: no read was expected"
    else:
        head = (
            f"cache miss: expected {plural(miss['expected'], 'token')} from cache, "
            f"read {miss['read']}"
        )
    provider = miss.get("provider")
    tail = ""
    if provider is not None and miss.get("cause") != "unknown":
        tail = f" · the provider says {provider['type']}"
    if provider is not None and provider.get("missed") is not None:
        tail += f" ({plural(provider['missed'], 'token')} missed)"
    return f"{head}: {miss['reason']}{tail}"
