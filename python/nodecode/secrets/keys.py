"""A provider's key, from where config.jsonc says it is: an environment variable,
a command that prints it (``api_key_cmd``, e.g. ``pass show anthropic``) or a
file only its owner can read (``api_key_file``).

A command or a file keeps the key out of every process's environment, where
any command running as the same user can read it (``/proc/PID/environ``).
Each key is also a secret the redactor blanks, named after its source.

Whatever the source, the key is its core: a stray carriage return, space, BOM
or zero-width character around it (a file saved on Windows, a paste) is
dropped, as the redactor drops it; a key still holding a character no HTTP
header can carry is refused in one line that never shows the key.
"""

from __future__ import annotations

import os
import stat
import subprocess
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from nodecode.config import Config, ProviderConfig
from nodecode.errors import ConfigError
from nodecode.secrets.redact import core

KEY_CMD_TIMEOUT = 60.0  # seconds a key command may take (a password prompt included)


def source_name(provider: ProviderConfig) -> str | None:
    """What a redacted key of this provider is called: its variable, or where it came from."""
    if provider.api_key_cmd:
        return f"providers.{provider.id}.api_key_cmd"
    if provider.api_key_file:
        return f"providers.{provider.id}.api_key_file"
    return provider.api_key_env


def resolve(provider: ProviderConfig, home: Path, environ: Mapping[str, str]) -> str | None:
    """The provider's key (None when it needs none); a ConfigError says why it cannot be had."""
    if provider.api_key_cmd:
        key = from_command(provider, provider.api_key_cmd, home, environ)
    elif provider.api_key_file:
        key = from_file(provider, key_path(provider.api_key_file, home))
    elif provider.api_key_env:
        key = core(environ.get(provider.api_key_env) or "")
    else:
        return None
    return sendable(provider, key) if key else None


def sendable(provider: ProviderConfig, key: str) -> str:
    """The key, when an HTTP header can carry it (printable ASCII and spaces)."""
    bad = next((i for i, ch in enumerate(key) if not " " <= ch <= "~"), None)
    if bad is None:
        return key
    raise ConfigError(
        f"provider {provider.id!r}: the key from {source_name(provider)} holds "
        f"U+{ord(key[bad]):04X} ({_char_name(key[bad])}) at character {bad + 1} of "
        f"{len(key)}: expected printable ASCII, which is all an HTTP header carries"
    )


def _char_name(ch: str) -> str:
    return unicodedata.name(ch, "a control character").lower()


def from_command(provider: ProviderConfig, cmd: str, home: Path, environ: Mapping[str, str]) -> str:
    """The first line the command prints, stripped. It runs with sh in the home,
    with no stdin (the Neovim host's stdin is its RPC channel)."""
    what = f"provider {provider.id!r}: api_key_cmd {cmd!r}"
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", cmd],
            cwd=home,
            env=dict(environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=KEY_CMD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{what} did not finish within {KEY_CMD_TIMEOUT:g} s") from None
    except OSError as e:
        raise ConfigError(f"{what} could not start: {e.strerror}") from None
    if done.returncode != 0:
        said = _first_line(done.stderr.decode("utf-8", "replace"))
        raise ConfigError(
            f"{what} failed (exit status {done.returncode})" + (f": {said}" if said else "")
        )
    key = _first_line(done.stdout.decode("utf-8", "replace"))
    if not key:
        raise ConfigError(f"{what} printed no key")
    return key


def key_path(name: str, home: Path) -> Path:
    """``~`` expanded; a relative path is relative to the home (where config.jsonc is)."""
    return home / Path(name).expanduser()


def from_file(provider: ProviderConfig, path: Path) -> str:
    """The file's first line, stripped; the file must be readable by its owner only."""
    what = f"provider {provider.id!r}: api_key_file {path}"
    try:
        with open(path, "rb") as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            if mode & 0o077:
                raise ConfigError(
                    f"{what} is readable by group or others (mode {mode:o}): "
                    "expected mode 600 or stricter"
                )
            text = f.read(64 * 1024).decode("utf-8", "replace")
    except OSError as e:
        raise ConfigError(f"{what} cannot be read: {e.strerror}") from None
    key = _first_line(text)
    if not key:
        raise ConfigError(f"{what} holds no key")
    return key


def file_keys(config: Config, home: Path) -> dict[str, str]:
    """The keys in every provider's api_key_file that can be read, by source name:
    secrets to redact even when another provider is in use."""
    found: dict[str, str] = {}
    for provider in config.providers.values():
        name = source_name(provider)  # never None for a provider with a key file
        if provider.api_key_file and name is not None:
            try:
                found[name] = from_file(provider, key_path(provider.api_key_file, home))
            except ConfigError:
                continue  # only the provider in use must have a readable key
    return found


def _first_line(text: str) -> str:
    stripped = core(text)
    return core(stripped.split("\n", 1)[0]) if stripped else ""
