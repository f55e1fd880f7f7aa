"""Providers from models.dev: ``"provider": "deepseek"`` works with no ``providers``
block, for every provider models.dev lists whose API nodecode speaks.

A preset is made of the provider's models.dev entry (``catalog``): its wire
format from its SDK package (``npm``: ``@ai-sdk/anthropic`` → anthropic,
``@ai-sdk/openai`` → openai-responses, ``@ai-sdk/google`` → google,
``@ai-sdk/openai-compatible`` and the SDKs of OpenAI-compatible services →
openai), its base URL from its ``api`` field (else the table below of the
documented URLs of those listed with their own SDK and no ``api``), its key
from the first of its ``env`` variables that is set (else the first, so an
unset key names the variable), and its models from its model list. A
``providers.ID`` block in config.jsonc overrides any of these.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nodecode.errors import ConfigError
from nodecode.providers import catalog, registry

# The wire format of each SDK package models.dev names.
WIRES = {
    "@ai-sdk/anthropic": "anthropic",
    "@ai-sdk/openai": "openai-responses",
    "@ai-sdk/google": "google",
    "@ai-sdk/openai-compatible": "openai",
    # Services with an SDK of their own and an OpenAI-compatible chat completions API:
    "@ai-sdk/groq": "openai",
    "@ai-sdk/mistral": "openai",
    "@ai-sdk/xai": "openai",
    "@ai-sdk/cerebras": "openai",
    "@ai-sdk/deepinfra": "openai",
    "@ai-sdk/togetherai": "openai",
    "@ai-sdk/perplexity": "openai",
    "@ai-sdk/cohere": "openai",
    "@openrouter/ai-sdk-provider": "openai",
    "venice-ai-sdk-provider": "openai",
    "@aihubmix/ai-sdk-provider": "openai",
}

# Base URLs of the providers models.dev lists with no ``api`` field, from each
# one's own documentation (an OpenAI-compatible URL includes its /v1 or the like).
BASE_URLS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "google": "https://generativelanguage.googleapis.com/v1beta",
    "groq": "https://api.groq.com/openai/v1",
    "mistral": "https://api.mistral.ai/v1",
    "xai": "https://api.x.ai/v1",
    "cerebras": "https://api.cerebras.ai/v1",
    "deepinfra": "https://api.deepinfra.com/v1/openai",
    "togetherai": "https://api.together.xyz/v1",
    "perplexity": "https://api.perplexity.ai",
    "cohere": "https://api.cohere.ai/compatibility/v1",
    "venice": "https://api.venice.ai/api/v1",
    "aihubmix": "https://aihubmix.com/v1",
}


def preset(home: Path | None, pid: str, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The provider settings models.dev gives ``pid`` (as a ``providers.ID`` block
    would hold them), None when it lists no such provider; a provider whose SDK
    nodecode does not speak is one ConfigError line naming it."""
    entry = catalog.provider(home, pid)
    if entry is None:
        return None
    npm = str(entry.get("npm") or "")
    ptype = WIRES.get(npm)
    base = _base_url(pid, entry, ptype)
    if ptype is None or base is None:
        name = entry.get("name") or pid
        raise ConfigError(
            f"provider {pid!r} ({name}) speaks through {npm or 'an SDK models.dev does not name'}"
            ", which nodecode does not: give providers."
            f'{pid} a "type" ({", ".join(registry.TYPES)}) and a "base_url" in config.jsonc'
        )
    envs = [e for e in entry.get("env") or [] if isinstance(e, str) and e]
    key = next((e for e in envs if environ.get(e)), envs[0] if envs else None)
    return {"type": ptype, "base_url": base, "api_key_env": key, "models_dev": pid}


def keyed(home: Path | None, environ: Mapping[str, str]) -> list[str]:
    """The providers models.dev lists whose key variable is set and whose API
    nodecode speaks: what the model picker offers beside the configured ones."""
    out = []
    for pid, entry in catalog.providers(home).items():
        ptype = WIRES.get(str(entry.get("npm") or ""))
        key_set = any(isinstance(e, str) and environ.get(e) for e in entry.get("env") or [])
        if ptype is not None and key_set and _base_url(pid, entry, ptype) is not None:
            out.append(pid)
    return sorted(out)


def key_variables(home: Path | None) -> list[str]:
    """Every variable models.dev names for a key (whose values nodecode redacts):
    those named for a key, token or secret, not a region or a resource's name."""
    found = {
        e
        for entry in catalog.providers(home).values()
        for e in entry.get("env") or []
        if isinstance(e, str) and any(word in e for word in ("KEY", "TOKEN", "SECRET"))
    }
    return sorted(found)


def _base_url(pid: str, entry: Mapping[str, Any], ptype: str | None) -> str | None:
    api = entry.get("api")
    if not isinstance(api, str) or not api.startswith(("http://", "https://")):
        return BASE_URLS.get(pid)
    api = api.rstrip("/")
    if ptype == "anthropic" and api.endswith("/v1"):
        api = api[: -len("/v1")]  # the SDK's base includes /v1; this wire adds /v1/messages
    return api
