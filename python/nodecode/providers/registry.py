"""The wire formats nodecode speaks, by config ``type``, and the providers every
home knows without configuration.

A format is one module of ``providers/`` (its ``WIRE``); adding one is a line
here. The modules are imported at first use, so reading the config costs none
of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nodecode.bounded import Bounded
from nodecode.errors import ConfigError

if TYPE_CHECKING:
    from nodecode.providers.wire import WireFormat

# type → the module whose ``WIRE`` speaks it
FORMATS: dict[str, str] = {
    "anthropic": "nodecode.providers.anthropic",
    "openai": "nodecode.providers.openai",
    "openai-responses": "nodecode.providers.openai_responses",
    "google": "nodecode.providers.google",
}
TYPES = tuple(FORMATS)
DEFAULT_TYPE = "anthropic"  # what an unconfigured meter counts as

# Providers every home knows without configuration, the first whose key variable is
# set being the default provider.
BUILTIN_PROVIDERS: dict[str, dict[str, Any]] = {
    "anthropic": {
        "type": "anthropic",
        "base_url": "https://api.anthropic.com",
        "api_key_env": "ANTHROPIC_API_KEY",
        "models_dev": "anthropic",
    },
    "openai": {
        "type": "openai-responses",
        "base_url": "https://api.openai.com/v1",
        "api_key_env": "OPENAI_API_KEY",
        "models_dev": "openai",
    },
}
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}
BUILTIN_KEY_ENVS = tuple(str(p["api_key_env"]) for p in BUILTIN_PROVIDERS.values())

_LOADED = Bounded(len(FORMATS))  # type → its format, once imported


def wire(type: str) -> WireFormat:
    """The wire format of config ``type``; an unknown type is one ConfigError line."""
    found = _LOADED.get(type)
    if found is not None:
        return found
    module = FORMATS.get(type)
    if module is None:
        expected = ", ".join(repr(name) for name in TYPES)
        raise ConfigError(f"provider type must be one of {expected} (got {type!r})")
    return _LOADED.keep(type, importlib.import_module(module).WIRE)


def default_provider(environ: Mapping[str, str]) -> str | None:
    """The built-in provider whose key variable is set (in the table's order)."""
    for pid, spec in BUILTIN_PROVIDERS.items():
        if environ.get(spec["api_key_env"]):
            return pid
    return None


def default_model(provider_id: str, type: str) -> str | None:
    return DEFAULT_MODELS.get(provider_id) or DEFAULT_MODELS.get(type)
