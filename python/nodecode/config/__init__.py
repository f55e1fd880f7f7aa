"""config.jsonc (json5) plus the environment: which provider, model and limits.

Every key and variable is declared once, in ``nodecode.config.schema``; reading
the file checks it there (an unknown key is a warning, a wrong value one
ConfigError line). Keys never live in the config: a provider names where its
key is, one of an environment variable (``api_key_env``), a command that prints
it (``api_key_cmd``) or a private file (``api_key_file``);
``nodecode.secrets.keys`` reads it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import json5

from nodecode.bounded import Bounded
from nodecode.config import schema
from nodecode.config.schema import APPROVAL_KINDS, KEY_SOURCES, mcp_servers_of
from nodecode.errors import ConfigError
from nodecode.providers import registry
from nodecode.providers.types import ThinkingSetting

if TYPE_CHECKING:
    from nodecode.providers.wire import WireFormat

__all__ = [
    "APPROVAL_KINDS",
    "KEY_SOURCES",
    "Config",
    "ProviderConfig",
    "load_config",
    "mcp_servers_of",
]


@dataclass
class ProviderConfig:
    """One provider: a built-in's settings with config.jsonc's over them, checked."""

    id: str
    type: str
    base_url: str | None
    api_key_env: str | None
    models_dev: str | None = None
    models: list[dict[str, Any]] = field(default_factory=list)  # each entry checked
    api_key_cmd: str | None = None  # a shell command printing the key (run once per App)
    api_key_file: str | None = None  # a file only its owner can read, holding the key
    settings: Mapping[str, Any] = field(default_factory=dict)  # as set (a built-in's too)
    origin: str = "config.jsonc"  # where its settings come from: built-in, models.dev, …

    def setting(self, name: str) -> Any:
        """Provider setting ``name``: as set, else the schema's default."""
        if name in self.settings:
            return self.settings[name]
        return schema.default(name, schema.PROVIDER)

    def model_entry(self, model: str) -> dict[str, Any]:
        """The ``models[]`` entry for ``model`` (only the settings it sets), or {}."""
        for entry in self.models:
            if entry.get("id") == model:
                return entry
        return {}


@dataclass
class Config:
    """The checked config. The fields below that share a setting's name hold its
    value (the schema's default when absent); ``setting(name)`` reads any setting,
    one added to the schema included."""

    provider: ProviderConfig | None
    model: str | None
    auto_approve: frozenset[str]
    max_rounds: int
    result_max_chars: int
    shell_timeout: float
    encoding: str
    max_retries: int
    retry_backoff: float
    timeout: float  # seconds the provider may stay silent (HTTP read timeout)
    request_timeout: float  # seconds a whole model request may take, retries included
    idle_timeout: float  # seconds a reply may bring no content (keep-alives are none)
    cache: str  # Anthropic cache entries: auto | 1h | 5m (cache.plan)
    shadow_max_mb: float
    instructions: tuple[str, ...]  # more instruction files, relative to the cwd
    mcp_servers: dict[str, dict[str, Any]]  # by name, checked
    mcp_timeout: float  # seconds an MCP call may take
    mcp_project_servers: bool  # read the project's .mcp.json too
    key_envs: tuple[str, ...] = ()  # the providers' key variables: redacted, kept from shells
    # Other key variables models.dev names that are set: redacted (a shell keeps them:
    # GITHUB_TOKEN and the like are the person's to use).
    secret_envs: tuple[str, ...] = ()
    providers: dict[str, ProviderConfig] = field(default_factory=dict)  # built in or defined
    defined: frozenset[str] = frozenset()  # the providers config.jsonc defines
    settings: Mapping[str, Any] = field(default_factory=dict)  # every top-level setting
    warnings: tuple[str, ...] = ()  # one line per unknown key

    def setting(self, name: str) -> Any:
        """Top-level setting ``name``, checked (its default when absent)."""
        return self.settings[name]

    def wire(self) -> WireFormat:
        """The wire format the provider speaks (the default's with no provider)."""
        return registry.wire(self.provider.type if self.provider else registry.DEFAULT_TYPE)

    def thinking(self) -> ThinkingSetting:
        """The model's thinking setting; a bad one is one ConfigError line naming it."""
        if self.provider is None:
            return ThinkingSetting()
        where = f"providers.{self.provider.id}.models[{self.model}]"
        raw = self.provider.model_entry(self.model or "").get("thinking")
        return self.wire().thinking(raw, where)

    def api_key(self, environ: Mapping[str, str] = os.environ) -> str | None:
        """The key in the provider's variable (a command's or a file's is read by
        ``nodecode.secrets.keys``, never here: :checkhealth must not run a password prompt)."""
        if self.provider is None or not self.provider.api_key_env:
            return None
        return environ.get(self.provider.api_key_env) or None

    def choosing(self, provider_id: str, model: str) -> Config:
        """This config with another of its providers and model (a runtime switch)."""
        if provider_id not in self.providers:
            raise ConfigError(
                f"model: no provider {provider_id!r} in config.jsonc: expected one of "
                f"{', '.join(sorted(self.providers))}"
            )
        return dataclasses.replace(self, provider=self.providers[provider_id], model=model)

    def require_provider(self, environ: Mapping[str, str] = os.environ) -> ProviderConfig:
        """The provider, checked ready to use (its key variable set when it names one)."""
        if self.provider is None or not self.model:
            raise ConfigError(
                'no provider configured: expected "provider" and "model" in config.jsonc '
                "or ANTHROPIC_API_KEY / OPENAI_API_KEY in the environment (found neither)"
            )
        env = self.provider.api_key_env
        if env and not environ.get(env):
            raise ConfigError(
                f"provider {self.provider.id!r} needs its key in ${env}, which is not set"
            )
        return self.provider


# The Config fields load_config fills from the settings of the same name (provider
# and model are resolved: a provider's settings, the environment's choice).
_FROM_SETTINGS = {f.name for f in dataclasses.fields(Config)} & (
    {s.name for s in schema.SETTINGS.settings} - {"provider", "model", "providers"}
)


def load_config(home: Path, environ: Mapping[str, str] = os.environ) -> Config:
    """Read HOME/config.jsonc (absent = empty), check it and the environment against
    the schema, and resolve the provider. A wrong value raises one ConfigError line;
    an unknown key is one of ``Config.warnings``."""
    raw = _read(home / "config.jsonc")
    schema.check_environment(environ)
    chosen = schema.env(environ, "NODECODE_PROVIDER") or _text(raw.get("provider"))
    given = raw.get("providers")
    blocks = given if isinstance(given, dict) else {}
    named = {*blocks, *([chosen] if chosen else [])}
    presets = _presets(home, named, environ)
    if chosen and chosen not in presets and chosen not in blocks:
        _preset(home, chosen, environ)  # a provider models.dev lists whose SDK nodecode lacks
    values, warnings = schema.check_file(raw, presets)
    keyed = {p: presets.get(p) or _preset(home, p, environ) for p in _keyed(home, environ)}
    providers = _providers(values["providers"], {**keyed, **presets})
    pid = (
        schema.env(environ, "NODECODE_PROVIDER")
        or values["provider"]
        or registry.default_provider(environ)
    )
    provider = None
    if pid is not None:
        if pid not in providers:
            raise ConfigError(
                f"config.jsonc: provider {pid!r} is not defined and models.dev lists no "
                f"such provider: expected one of {', '.join(sorted(providers))}, or a "
                f"providers.{pid} block with a type and a base_url"
            )
        provider = providers[pid]
    model = schema.env(environ, "NODECODE_MODEL") or values["model"]
    if model is None and provider is not None:
        model = registry.default_model(provider.id, provider.type)
    return Config(
        provider=provider,
        model=model,
        **{k: v for k, v in values.items() if k in _FROM_SETTINGS},
        key_envs=tuple(sorted({p.api_key_env for p in providers.values() if p.api_key_env})),
        secret_envs=_secret_envs(home, environ),
        providers=providers,
        defined=frozenset(values["providers"]),
        settings=values,
        warnings=tuple(warnings),
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    data = _parse(path, text)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an object at the top (found {type(data).__name__})")
    return data


# JSONC's additions to JSON, found outside strings: comments, and a comma before a
# closing bracket. A string is matched whole first, so nothing inside one is touched.
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_COMMENT = re.compile(rf"({_STRING})|//[^\n]*|/\*[\s\S]*?\*/")
_TRAILING_COMMA = re.compile(rf"({_STRING})|,(\s*[}}\]])")
_PARSED = Bounded(64)  # a config text json5 had to read → its value, as JSON
_PARSED_LOCK = threading.Lock()


def _parse(path: Path, text: str) -> Any:
    """The value of a config text. JSON with comments and trailing commas (what a
    config.jsonc holds) is read by ``json`` once those are blanked, in well under a
    millisecond; only other JSON5 needs ``json5``, which takes 5-15 ms a file, so
    its result is kept per text for the process (a changed file is another text)."""
    plain = _TRAILING_COMMA.sub(
        lambda m: m.group(1) or m.group(2), _COMMENT.sub(lambda m: m.group(1) or " ", text)
    )
    try:
        return json.loads(plain)
    except ValueError:
        pass
    with _PARSED_LOCK:
        known = _PARSED.get(text)
    if known is not None:
        return json.loads(known)  # a fresh copy: callers own what they get
    try:
        data = json5.loads(text)
    except ValueError as e:
        raise ConfigError(f"{path}: not valid JSONC: {e}") from None
    with _PARSED_LOCK:
        _PARSED.keep(text, json.dumps(data))
    return data


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _presets(home: Path, names: set[str], environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """What models.dev gives each provider config.jsonc names that is no built-in."""
    out = {}
    for pid in sorted(names):
        if pid in registry.BUILTIN_PROVIDERS or not isinstance(pid, str):
            continue
        found = _preset(home, pid, environ, quiet=True)
        if found is not None:
            out[pid] = found
    return out


def _preset(
    home: Path, pid: str, environ: Mapping[str, str], quiet: bool = False
) -> dict[str, Any] | None:
    """A provider's preset; a block of config.jsonc gives it a type when models.dev's
    SDK is one nodecode does not speak, so ``quiet`` leaves that to the schema."""
    from nodecode.providers import presets

    try:
        return presets.preset(home, pid, environ)
    except ConfigError:
        if quiet:
            return None
        raise


def _keyed(home: Path, environ: Mapping[str, str]) -> list[str]:
    from nodecode.providers import presets

    return [p for p in presets.keyed(home, environ) if p not in registry.BUILTIN_PROVIDERS]


def _providers(
    given: dict[str, dict[str, Any]], presets: Mapping[str, Mapping[str, Any] | None]
) -> dict[str, ProviderConfig]:
    """Every provider: the built-ins and models.dev's presets (those the file names
    and those whose key is set), with config.jsonc's (checked) settings over them."""
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in registry.BUILTIN_PROVIDERS.items()}
    origins = dict.fromkeys(merged, "built-in")
    for pid, spec in presets.items():
        if spec is not None and pid not in merged:
            merged[pid], origins[pid] = dict(spec), "models.dev"
    for pid, spec in given.items():
        base = dict(merged.get(pid, {}))
        if "api_key_env" not in spec and any(k in spec for k in KEY_SOURCES):
            base.pop("api_key_env", None)  # a built-in's variable gives way to the named source
        merged[pid] = {**base, **spec}
        origin = origins.get(pid)
        origins[pid] = f"{origin}, with config.jsonc's settings" if origin else "config.jsonc"
    return {pid: _provider(pid, spec, origins[pid]) for pid, spec in merged.items()}


def _secret_envs(home: Path, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The key variables models.dev names that are set (their values are redacted)."""
    from nodecode.providers import presets

    return tuple(v for v in presets.key_variables(home) if environ.get(v))


def _provider(pid: str, spec: dict[str, Any], origin: str) -> ProviderConfig:
    return ProviderConfig(
        id=pid,
        type=spec["type"],
        base_url=spec.get("base_url"),
        api_key_env=spec.get("api_key_env"),
        models_dev=spec.get("models_dev"),
        models=spec.get("models", []),
        api_key_cmd=spec.get("api_key_cmd"),
        api_key_file=spec.get("api_key_file"),
        settings=spec,
        origin=origin,
    )
