"""The composition root: one home + one store + its config, built by the CLI and the host.

Only ``nodecode.cli`` and ``nodecode.host`` build an App (and the agent loop,
which they hand it to, reads it). Domain code takes what it uses instead: the
store, a ``Workspace``, or the ``Config``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodecode.cache import ledger
from nodecode.cache.ledger import Scope
from nodecode.checkpoints import shadow
from nodecode.config import Config, load_config, mcp_servers_of, schema
from nodecode.errors import ConfigError, NodecodeError, SessionError, UserError
from nodecode.log import delete as deletion
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.log.store import Store, open_store
from nodecode.paths import ensure_dir, home_dir
from nodecode.providers import registry
from nodecode.secrets import keys
from nodecode.secrets.redact import Redactor
from nodecode.verbs.env import SessionEnv
from nodecode.verbs.table import VERBS
from nodecode.workspace import Workspace

if TYPE_CHECKING:
    from nodecode.budget.meter import Basis
    from nodecode.cells.registry import Table
    from nodecode.context.message import Message
    from nodecode.providers.http import Provider
    from nodecode.servers.mcp import Hub, ServerSpec
    from nodecode.verbs.prompt import Prompt

DEFAULT_KEY_ENVS = registry.BUILTIN_KEY_ENVS
DEFAULT_ENCODING: str = schema.default("encoding")  # what a broken config falls back to
DEFAULT_SHELL_TIMEOUT: float = schema.default("shell_timeout")


class App:
    def __init__(self, home: Path, store_name: str, cwd: Path, environ: Mapping[str, str]):
        self.home = ensure_dir(home)
        self.store_name = store_name
        self.cwd = cwd
        self.environ = environ
        self.store: Store = open_store(home, store_name)
        self._config_path = os.fspath(self.home / "config.jsonc")  # stat at every read
        self._key: tuple[str | None, str | None] | None = None
        self._key_lock = threading.Lock()
        # ((the file's stamp, the runtime choice), the config they gave)
        self._config: (
            tuple[tuple[tuple[int, ...] | None, tuple[str, str] | None], Config] | None
        ) = None
        self._config_lock = threading.Lock()
        self._choice: tuple[str, str] | None = None  # use_model's (provider, model)
        # Told each of config.jsonc's warnings (unknown keys) once, when a read finds it:
        # the CLI prints them on stderr, the host sends them to Neovim.
        self.on_warning: Callable[[str], None] | None = None
        self._warned: set[str] = set()
        self.workspace = Workspace(
            self.store, store_name, self.home, cwd, environ, redact=self._redact_written
        )
        # Wall-clock seconds for what lives in time (the provider's cache entries); the
        # cache benchmark runs a session on a simulated clock shared with its server.
        self.clock = time.time
        offset = schema.env(environ, "NODECODE_CLOCK_OFFSET")
        if offset:  # tests: a pause of hours, as the loopback's advanced Clock sees it
            self.clock = lambda: time.time() + offset
        turn_tree.recover(self.store, settle=self._settle)

    def _settle(self, sid: str, number: int) -> dict:
        """What a killed turn's unlogged shell commands changed (see ``shadow.settle``)."""
        return shadow.settle(self.home, self.store, sid, number)

    @classmethod
    def open(
        cls,
        home: str | os.PathLike | None = None,
        store: str = "default",
        cwd: str | os.PathLike | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> App:
        env = os.environ if environ is None else environ
        root = Path(cwd).absolute() if cwd else Path.cwd()
        return cls(home_dir(home, env), store or "default", root, env)

    def close(self) -> None:
        provider = getattr(self, "_provider", None)
        if provider is not None:
            provider.close()
        hub = self.__dict__.get("_mcp")
        if hub is not None:
            hub.close()
        self.store.close()

    @property
    def config(self) -> Config:
        """config.jsonc as it is now: read again whenever the file's mtime, size or
        inode changed, so a long-lived host (Neovim's) never shows a stale source."""
        stamp = self._config_stamp()
        changed = False
        tell = self.on_warning
        new: list[str] = []
        with self._config_lock:
            if self._config is None or self._config[0] != (stamp, self._choice):
                config = load_config(self.home, self.environ)  # a broken file raises, each time
                config = self._chosen(config)
                changed = self._config is not None
                self._config = ((stamp, self._choice), config)
                if tell is not None:
                    new = [w for w in config.warnings if w not in self._warned]
                    self._warned.update(new)
            config = self._config[1]
        if changed:
            self._config_changed(config)
        if tell is not None:
            for line in new:
                tell(line)
        return config

    def _config_stamp(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self._config_path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _config_changed(self, config: Config) -> None:
        """A new config may name another key: it is resolved again at its next use,
        and the keys it names are redacted too (those known before stay redacted)."""
        with self._key_lock:
            self._key = None
        known = self.__dict__.get("_known_keys")
        if known is not None:
            self._add_config_keys(known, config)

    def _chosen(self, config: Config) -> Config:
        """``config`` with the model chosen at runtime, while the file still
        names its provider (a provider removed from the file ends the choice)."""
        if self._choice is None:
            return config
        if self._choice[0] not in config.providers:
            self._choice = None
            return config
        return config.choosing(*self._choice)

    def use_model(self, provider_id: str, model: str) -> Config:
        """Work with ``provider_id``/``model`` from now on, in this App only
        (config.jsonc is not changed, and a change to it keeps the choice); its
        key is resolved again at the next use."""
        chosen = self.config.choosing(provider_id, model)
        chosen.require_provider(self.environ)
        with self._config_lock:
            self._choice = (provider_id, model)
        return self.config

    def config_or_none(self) -> Config | None:
        """The config, or None when it is broken (views that still work without it)."""
        try:
            return self.config
        except NodecodeError:
            return None

    def encoding_name(self) -> str:
        """The tiktoken encoding counts use; the default when the config is broken."""
        config = self.config_or_none()
        return config.encoding if config is not None else DEFAULT_ENCODING

    @cached_property
    def _known_keys(self) -> Redactor:
        """A redactor of the keys in variables and files, and the command's once it ran."""
        # A broken config must not stop redaction of the defaults.
        return known_keys(self.home, self.environ, self.config_or_none())

    def _add_config_keys(self, redactor: Redactor, config: Config) -> None:
        add_config_keys(redactor, config, self.home, self.environ)

    @property
    def redactor(self) -> Redactor:
        """Every key blanked, the key command's included (it runs once per App, here
        if not yet: text from outside, a cell's output say, may hold that key)."""
        config = self.config_or_none()
        if config is not None and config.provider is not None and config.provider.api_key_cmd:
            self._key_outcome()  # adds the key to the redactor; a failure is raised at use
        return self._known_keys

    def redact_known(self, text: str) -> str:
        """``text`` without the keys known so far, never running the key command
        (an error line must not wait on a password manager)."""
        return self._known_keys.apply(text)

    def _redact_written(self, obj: object) -> object:
        return self.redactor.apply_obj(obj)

    def _key_outcome(self) -> tuple[str | None, str | None]:
        """The provider's key, or why it cannot be had: resolved once per App (the
        host's threads share one App, so under a lock)."""
        with self._key_lock:
            if self._key is None:
                self._key = self._resolve_key()
            return self._key

    def _resolve_key(self) -> tuple[str | None, str | None]:
        provider = self.config.provider
        if provider is None:
            return None, None
        try:
            key = keys.resolve(provider, self.home, self.environ)
        except ConfigError as e:
            return None, str(e)
        self._known_keys.add(keys.source_name(provider) or provider.id, key)
        return key, None

    def _api_key(self) -> str | None:
        key, error = self._key_outcome()
        if error is not None:
            raise ConfigError(error)
        return key

    # -- sessions -------------------------------------------------------------

    def new_session(self, title: str | None = None) -> str:
        return sessions.create(self.store, title=self.redactor.apply(title) if title else title)

    def current_session(self) -> str | None:
        return sessions.current(self.store)

    def resume_session(self, pinned: str | None) -> str:
        """``pinned`` while it exists (another process may delete it: then, as
        with none pinned, ``resolve_session``'s choice)."""
        if pinned is not None:
            try:
                return self.resolve_session(pinned)
            except SessionError:
                pass
        return self.resolve_session(None)

    def rename_session(self, sid: str, title: str) -> str:
        """Give ``sid`` the title ``title`` (one line; it wins over an automatic one)."""
        words = " ".join(self.redactor.apply(str(title)).split())
        if not words:
            raise UserError(f"rename {sid}: expected a title (got {title!r})")
        sessions.add_title(self.store, sid, words, "user")
        return words

    def delete_session(self, sid: str) -> deletion.Deleted:
        """Delete ``sid`` from the store (``log.delete``) and its context folder."""
        done = deletion.delete(self.store, sid)
        shutil.rmtree(self.context_dir(sid), ignore_errors=True)
        return done

    def resolve_session(self, explicit: str | None = None, *, create: bool = True) -> str:
        return sessions.resolve(self.store, explicit, self.environ, create_missing=create)

    def context_dir(self, sid: str) -> Path:
        return self.workspace.context_dir(sid)

    def provider(self) -> Provider:
        """The configured provider; one HTTP client per App, reused across turns."""
        from nodecode.providers import make_provider

        config = self.config
        cfg = config.require_provider(self.environ)
        key = (
            cfg.type,
            cfg.id,
            cfg.base_url,
            self._api_key(),
            config.max_retries,
            config.retry_backoff,
            config.timeout,
            config.request_timeout,
            config.idle_timeout,
        )
        if getattr(self, "_provider_key", None) != key:
            self._provider = make_provider(
                cfg.type,
                name=cfg.id,
                base_url=cfg.base_url,
                api_key=key[3],
                max_retries=key[4],
                backoff_base=key[5],
                timeout=key[6],
                request_timeout=key[7],
                idle_timeout=key[8],
                redact=self.redactor.apply,
            )
            self._provider_key = key
        return self._provider

    def verbs(self) -> Table:
        """The verbs this App's cells may call: the MCP family too when servers are
        configured (the system prompt then names them)."""
        hub = self.mcp()
        if hub is None:
            return VERBS
        return _with_mcp(tuple(hub.names()))

    def mcp(self) -> Hub | None:
        """This App's MCP servers (None when none is configured). Made when first
        asked for; made anew when config.jsonc names other servers. A server starts
        at its first use and ends with the App."""
        config = self.config_or_none()
        named = config is not None and (config.mcp_servers or config.mcp_project_servers)
        # The SDK (about 60 ms of imports) is imported only where a server may be.
        specs = self._mcp_specs(config) if named and config is not None else {}
        timeout = config.mcp_timeout if config is not None else schema.default("mcp_timeout")
        with self._config_lock:
            hub = self.__dict__.get("_mcp")
            if hub is not None and (hub.specs, hub.timeout) == (specs, timeout):
                return hub
            if hub is not None:
                hub.close()
            hub = None
            if specs:
                from nodecode.servers import mcp

                hub = mcp.Hub(specs, timeout=timeout, logs=self.home / "mcp")
            self.__dict__["_mcp"] = hub
            return hub

    def _mcp_specs(self, config: Config) -> dict[str, ServerSpec]:
        """config.jsonc's servers, and the project's .mcp.json's when the config
        says ``mcp_project_servers`` (the config's win on a name both use)."""
        from nodecode.servers import mcp

        servers = dict(config.mcp_servers)
        found = mcp.project_file(self.cwd) if config.mcp_project_servers else None
        if found is not None:
            try:
                data = json.loads(found.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise ConfigError(f"{found}: not a readable JSON file ({e})") from None
            listed = data.get("mcpServers", {}) if isinstance(data, dict) else data
            project = mcp_servers_of(listed, f"{found}: mcpServers")
            servers = {**project, **servers}
        return mcp.specs_of(servers, self.cwd)

    def prompt(self) -> Prompt:
        """What the next request starts with: the verbs' system prompt and the
        project's instructions as their files hold them now (each file is read
        again only when it changed), redacted."""
        from nodecode.context import instructions
        from nodecode.verbs.prompt import prompt

        config = self.config_or_none()
        listed = config.instructions if config is not None else ()
        paths = instructions.files(self.cwd, self.home, listed)
        found = instructions.read(paths, self.cwd, self.redactor.apply)
        return prompt(self.verbs(), found)

    def basis(self, *, strict: bool = False) -> Basis:
        """What the next request is counted and cached by (the config, the prompt,
        the cache scope): the views of /context and the context buffer use it.
        ``strict``: a broken config raises its error (else it counts by defaults)."""
        from nodecode.budget.meter import Basis

        config = self.config if strict else self.config_or_none()
        prompt = self.prompt()
        return Basis(config, prompt, self.cache_scope(prompt), self.clock)

    def cache_scope(self, prompt: Prompt | None = None) -> Scope | None:
        """Whose prompt cache the next request reads (None with no usable provider):
        the provider, the model, and what ``prompt`` (else this App's) starts with."""
        config = self.config_or_none()
        if config is None or config.provider is None:
            return None
        prompt = prompt or self.prompt()
        p = config.provider
        minimum = p.model_entry(config.model or "").get("cache_min_tokens")
        minimum = minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else None
        return ledger.scope_of(p.type, p.id, config.model, prompt.system, prompt.tools, minimum)

    def cell_env(
        self,
        sid: str,
        *,
        approve: Callable[[str, str], bool],
        review: Callable[[Any], Any] | None = None,
        turn: int | None = None,
        track_shell: bool = False,
        cancel: threading.Event | None = None,
    ) -> SessionEnv:
        """The environment cells of this session run in; ``track_shell`` records
        shell changes in the shadow store (a turn's calls do, the person's evals not);
        ``review`` sees a write's diff and a command's directory (``CellEnv.review``);
        ``cancel`` stops a running command when set."""
        config = self.config_or_none()
        timeout = config.shell_timeout if config is not None else DEFAULT_SHELL_TIMEOUT
        removed = set(config.key_envs) if config is not None else set()
        removed.update(DEFAULT_KEY_ENVS)
        on_shell = None
        if track_shell:
            limit = config.shadow_max_mb if config is not None else shadow.DEFAULT_MAX_MB
            on_shell = shadow.watch(self.home, self.cwd, sid, limit)
        return SessionEnv(
            workspace=self.cwd,
            verbs=self.verbs(),
            context_dir=self.context_dir(sid),
            approve=approve,
            review=review,
            redact=self.redactor.apply,
            shell_timeout=timeout,
            env_remove=removed,
            ws=self.workspace,
            session=sid,
            turn=turn,
            mcp=self.mcp(),
            foresee=lambda before, after: self.foresee(sid, before, after),
            on_shell=on_shell,
            cancel=cancel if cancel is not None else threading.Event(),
        )

    def foresee(self, sid: str, before: list[Message], after: list[Message]) -> str | None:
        """What an edit making ``before`` into ``after`` does to the next request's
        cache and cost, in a line (None with no provider to reckon it by)."""
        from nodecode.context import derived
        from nodecode.views import cost as cost_view

        basis = self.basis()
        rates = cost_view.config_rates(self.home, basis.config)
        found = cost_view.edit_cost(derived.read(self.store, sid), basis, before, after, rates)
        return found["line"] if found is not None else None


def known_keys(home: Path, environ: Mapping[str, str], config: Config | None) -> Redactor:
    """A redactor of the keys in the default variables and those ``config`` names
    (what an App knows before its key command runs; also what a usage error,
    which opens no App, is redacted with)."""
    redactor = Redactor.from_env(DEFAULT_KEY_ENVS, environ)
    if config is not None:
        add_config_keys(redactor, config, home, environ)
    return redactor


def add_config_keys(
    redactor: Redactor, config: Config, home: Path, environ: Mapping[str, str]
) -> None:
    """Blank the keys ``config`` names: its variables' values, its files' keys,
    and what its MCP servers are given in their environment and headers."""
    for name in (*config.key_envs, *config.secret_envs):
        redactor.add(name, environ.get(name))
    for name, value in keys.file_keys(config, home).items():
        redactor.add(name, value)
    for server, spec in config.mcp_servers.items():
        for part in ("env", "headers"):
            for key, value in (spec.get(part) or {}).items():
                redactor.add(f"mcp_servers.{server}.{part}.{key}", value)


@functools.lru_cache(maxsize=8)
def _with_mcp(names: tuple[str, ...]) -> Table:
    """The verb table with the MCP family naming ``names`` (one table per set of
    servers, so the prompt made of it is the same object request after request)."""
    from nodecode.cells.registry import table
    from nodecode.verbs import mcp

    return table(*VERBS.families, mcp.family(list(names)))
