"""The models a session may switch to at runtime (``:NodecodeModel``).

The configured providers are the one in use, those config.jsonc defines and
the built-ins whose key variable is set; each offers its config ``models``
and the models.dev entries of its ``models_dev`` key. A choice is
``PROVIDER/MODEL``; a provider that lists no model at all takes any name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodecode.budget import window as budgets
from nodecode.config import Config, ProviderConfig
from nodecode.errors import UserError
from nodecode.workspace import Workspace


def providers(config: Config, environ: Mapping[str, str]) -> list[ProviderConfig]:
    """The configured providers, the one in use first."""
    out = [config.provider] if config.provider is not None else []
    for pid, p in sorted(config.providers.items()):
        keyed = bool(p.api_key_env and environ.get(p.api_key_env))
        if p not in out and (pid in config.defined or keyed):
            out.append(p)
    return out


def model_ids(ws: Workspace, config: Config, provider: ProviderConfig) -> list[tuple[str, str]]:
    """(model, source) of one provider: config.jsonc's models, then models.dev's."""
    out: list[tuple[str, str]] = []
    if provider is config.provider and config.model:
        out.append((config.model, "config"))
    out += [(str(m["id"]), "config") for m in provider.models if m.get("id")]
    out += [
        (m, "models.dev") for m in budgets.dev_models(ws.home, provider.models_dev or provider.id)
    ]
    first: dict[str, str] = {}  # each model once, with the source it came first from
    for m, s in out:
        first.setdefault(m, s)
    return list(first.items())


def available(ws: Workspace, config: Config) -> list[dict[str, Any]]:
    """Picker rows: {name, provider, model, source, window, current}, by provider."""
    rows = []
    for p in providers(config, ws.environ):
        for model, source in model_ids(ws, config, p):
            window = budgets.of(ws, config.choosing(p.id, model)).window
            rows.append(
                {
                    "name": f"{p.id}/{model}",
                    "provider": p.id,
                    "model": model,
                    "source": source,
                    "window": window,
                    "current": p is config.provider and model == config.model,
                }
            )
    return rows


def parse(ws: Workspace, config: Config, name: str) -> tuple[str, str]:
    """(provider, model) of ``PROVIDER/MODEL``, or one UserError saying what is wrong."""
    text = str(name or "").strip()
    pid, sep, model = text.partition("/")
    if not sep or not pid or not model:
        raise UserError(
            f"model: expected PROVIDER/MODEL, like anthropic/claude-sonnet-4-5 (got {text!r})"
        )
    provider = config.providers.get(pid)
    if provider is None:
        names = ", ".join(p.id for p in providers(config, ws.environ))
        raise UserError(f"model: no provider {pid!r} is configured (expected one of {names})")
    known = [m for m, _ in model_ids(ws, config, provider)]
    if known and model not in known:
        raise UserError(
            f"model: {pid} has no model {model!r} (its config.jsonc models and models.dev list "
            f"{len(known)}: :NodecodeModel shows them; add others to providers.{pid}.models)"
        )
    return pid, model
