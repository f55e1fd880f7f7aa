"""One home + one store + its config: the entry point the CLI and the host share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodecode import session as sessions
from nodecode import turns as turn_tree
from nodecode.config import Config, load_config
from nodecode.context import model as context_model
from nodecode.paths import ensure_dir, home_dir
from nodecode.redact import Redactor
from nodecode.store import Store, open_store

if TYPE_CHECKING:
    from nodecode.agent import Agent
    from nodecode.providers.base import Provider

DEFAULT_KEY_ENVS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")


class App:
    def __init__(self, home: Path, store_name: str, cwd: Path, environ: Mapping[str, str]):
        self.home = ensure_dir(home)
        self.store_name = store_name
        self.cwd = cwd
        self.environ = environ
        self.store: Store = open_store(home, store_name)
        turn_tree.recover(self.store)

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
        self.store.close()

    @cached_property
    def config(self) -> Config:
        return load_config(self.home, self.environ)

    @cached_property
    def redactor(self) -> Redactor:
        names = set(DEFAULT_KEY_ENVS)
        try:
            names.update(self.config.key_envs)
        except Exception:  # noqa: BLE001 — a broken config must not stop redaction of the defaults
            pass
        return Redactor.from_env(sorted(names), self.environ)

    # -- sessions -------------------------------------------------------------

    def new_session(self, title: str | None = None) -> str:
        return sessions.create(self.store, title=title)

    def current_session(self) -> str | None:
        return sessions.current(self.store)

    def resolve_session(self, explicit: str | None = None, *, create: bool = True) -> str:
        return sessions.resolve(self.store, explicit, self.environ, create_missing=create)

    def context_dir(self, sid: str) -> Path:
        return self.home / "context" / self.store_name / sid

    def session_path_messages(self, sid: str) -> list[dict[str, Any]]:
        """The head path's messages, for the chat view."""
        return [
            {"seq": m.id, "role": m.role, "text": m.text, "turn": m.turn}
            for m in context_model.build(self.store, sid)
        ]

    def provider(self) -> Provider:
        """The configured provider; one HTTP client per App, reused across turns."""
        from nodecode.providers import make_provider

        cfg = self.config.require_provider(self.environ)
        key = (
            cfg.type,
            cfg.base_url,
            self.config.api_key(self.environ),
            self.config.max_retries,
            self.config.retry_backoff,
            self.config.timeout,
        )
        if getattr(self, "_provider_key", None) != key:
            self._provider = make_provider(
                cfg.type,
                base_url=cfg.base_url,
                api_key=key[2],
                max_retries=key[3],
                backoff_base=key[4],
                timeout=key[5],
            )
            self._provider_key = key
        return self._provider

    def agent(self, sid: str) -> Agent:
        from nodecode.agent import Agent

        return Agent(self, sid)
