"""Model providers: ``make_provider`` picks the class for a config ``type``."""

from __future__ import annotations

from typing import Any

from nodecode.errors import ConfigError
from nodecode.providers.anthropic import AnthropicProvider
from nodecode.providers.base import Provider
from nodecode.providers.openai import OpenAIProvider

PROVIDER_TYPES: dict[str, type[Provider]] = {
    "anthropic": AnthropicProvider,
    "openai": OpenAIProvider,
}

__all__ = ["AnthropicProvider", "OpenAIProvider", "Provider", "make_provider"]


def make_provider(type: str, *, base_url: str | None, api_key: str | None, **kw: Any) -> Provider:
    """A provider of config ``type``; ``kw`` goes to the constructor (timeout, max_retries…)."""
    cls = PROVIDER_TYPES.get(type)
    if cls is None:
        expected = " or ".join(repr(name) for name in PROVIDER_TYPES)
        raise ConfigError(f"provider type must be {expected} (got {type!r})")
    return cls(base_url, api_key, **kw)
