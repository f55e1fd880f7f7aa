"""The window and where it comes from, the reply reserve and the budget
(doc/design.md "Budget and eviction").

Window sources, the first with a number wins: ``NODECODE_CONTEXT_TOKENS``;
``providers.<id>.models[].context_window`` in config.jsonc; an override in the
store (``nodecode budget set N``); the models.dev cache
(``HOME/cache/models.dev.json``, written by ``nodecode models refresh``); the
snapshot shipped in the package (``data/models_dev.json``). A ceiling
learned from a rejection caps it: window = min(source, ceiling). Overrides and
ceilings live in the store's ``meta`` table per provider and model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodecode.config import schema
from nodecode.config.kinds import MAX_TOKENS
from nodecode.errors import UserError
from nodecode.log.store import Store
from nodecode.providers import catalog
from nodecode.providers.catalog import Limits
from nodecode.workspace import Workspace

if TYPE_CHECKING:
    from nodecode.config import Config

ENV_WINDOW = "NODECODE_CONTEXT_TOKENS"
ENV_MODELS_URL = "NODECODE_MODELS_URL"
MODELS_URL = "https://models.dev/api.json"
MAX_REPLY = 8192
WARN_AT, EVICT_TO = 0.85, 0.50

SOURCE_ENV = ENV_WINDOW
SOURCE_CONFIG = "config.jsonc"
SOURCE_OVERRIDE = "store override"
SOURCE_CACHE = "models.dev cache"
SOURCE_SNAPSHOT = "models.dev snapshot"
SOURCE_CEILING = "ceiling"


# -- where the window comes from ---------------------------------------------


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
    """Where ``nodecode models refresh`` keeps models.dev's table (a folder)."""
    return catalog.cache_dir(home)


def _positive(value: Any, what: str) -> int:
    """A window the person typed (``budget set N``), as the store can hold it."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TOKENS:
        raise UserError(
            f"{what} must be a positive whole number of tokens, at most {MAX_TOKENS} "
            f"(found {value!r})"
        )
    return value


def _meta_int(store: Store, key: str) -> int | None:
    value = store.get_meta(key)
    return int(value) if value and value.isascii() and value.isdigit() else None


def of(ws: Workspace, config: Config) -> Budget:
    """The budget of the configured provider and model, from every source."""
    provider = config.provider.id if config.provider else None
    model = config.model
    entry = config.provider.model_entry(model or "") if config.provider else {}
    dev_key = (config.provider.models_dev or provider) if config.provider else None
    cached = catalog.limits(catalog.model_in(catalog.cache_dir(ws.home), dev_key, model))
    shipped = catalog.limits(catalog.model_in(catalog.SNAPSHOT, dev_key, model))
    limits = cached or shipped or Limits()
    sources: list[tuple[str, int | None]] = [
        (SOURCE_ENV, schema.env(ws.environ, ENV_WINDOW)),  # checked: ASCII digits only
        (SOURCE_CONFIG, entry.get("context_window")),  # checked when config.jsonc was read
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
    reply = _reply(entry, limits, window)
    tokens = None
    if window is not None:
        tokens = window - reply
        if limits.input is not None and limits.input < tokens:
            tokens = limits.input
    return Budget(provider, model, window, source, reply, tokens, ceiling, limits, sources)


def _reply(entry: dict[str, Any], limits: Limits, window: int | None) -> int:
    """The reply's max_tokens: the config's, else min(models.dev output, 8192, window/4)."""
    if "max_tokens" in entry:
        return entry["max_tokens"]  # checked when config.jsonc was read
    candidates = [MAX_REPLY]
    if limits.output:
        candidates.append(limits.output)
    if window is not None:
        candidates.append(window // 4)
    return max(1, min(candidates))


def dev_models(home: Path, dev_key: str | None) -> list[str]:
    """The model ids models.dev knows for provider ``dev_key`` (the cache, else
    the snapshot), sorted."""
    return catalog.models(home, dev_key)


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

    url = schema.env(environ, ENV_MODELS_URL) or MODELS_URL
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
    catalog.write_split(path, table)  # the whole of it: it is what models.dev says now
    models = sum(len(v.get("models") or {}) for v in table.values())
    return path, len(table), models
