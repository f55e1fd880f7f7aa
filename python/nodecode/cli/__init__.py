"""`nodecode …`: the core without Neovim, for people, scripts and benchmarks.

Exit status: 0 success; 1 a user error (one line on stderr); 2 usage;
3 the provider failed; 130 stopped.

One module per family of commands; ``COMMANDS`` below is the whole dispatch
table: sessions (``new``, ``sessions``), ask (``ask``, ``eval``), context
(``context``), budget (``status``, ``budget``, ``evict``, ``models``),
recall (``recall-*``), checkpoints (``tree``, ``undo``, ``redo``, …), MCP servers
(``mcp``) and the settings (``config``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TextIO

from nodecode.app import App, known_keys
from nodecode.cli import ask, budget, checkpoints, config, context, mcp, recall, sessions
from nodecode.cli.common import (
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_STOPPED,
    EXIT_USAGE,
    EXIT_USER,
    Command,
    Parser,
)
from nodecode.config import load_config
from nodecode.errors import NodecodeError, ProviderError, Stopped, UserError
from nodecode.paths import home_dir
from nodecode.secrets.redact import Redactor

__all__ = [
    "COMMANDS",
    "EXIT_OK",
    "EXIT_PROVIDER",
    "EXIT_STOPPED",
    "EXIT_USAGE",
    "EXIT_USER",
    "main",
    "parser",
]


def _table(*groups: Iterable[Command]) -> dict[str, Command]:
    out: dict[str, Command] = {}
    for group in groups:
        for c in group:
            for name in (c.name, *c.aliases):
                if name in out:
                    raise ValueError(f"nodecode {name} is defined twice")
                out[name] = c
    return out


COMMANDS: dict[str, Command] = _table(
    sessions.COMMANDS,
    ask.COMMANDS,
    context.COMMANDS,
    budget.COMMANDS,
    recall.COMMANDS,
    checkpoints.COMMANDS,
    mcp.COMMANDS,
    config.COMMANDS,
)


def parser(redact: Callable[[str], str] | None = None) -> argparse.ArgumentParser:
    """The parser; ``redact`` blanks keys in its usage errors (which echo arguments)."""
    p = Parser(prog="nodecode", description=__doc__.splitlines()[0], redact=redact)
    p.add_argument("--home", help="the nodecode home (default $NODECODE_HOME)")
    p.add_argument("--store", default="default", help="store name (default: default)")
    p.add_argument("--session", help="session id (default $NODECODE_SESSION, else current)")
    p.add_argument("--cwd", help="the workspace (default: the current directory)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, c in COMMANDS.items():
        sp = sub.add_parser(
            name, help=c.help if name == c.name else f"alias of {c.name}", redact=redact
        )
        if c.arguments:
            c.arguments(sp)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    before_app = _KeysBeforeApp(argv)
    args = parser(before_app.apply).parse_args(argv)
    if args.store != "default" and before_app.apply(args.store) != args.store:
        # The store's file would be named after the key (HOME/store/KEY.db).
        print(
            f"nodecode: --store: expected a store name, not a key "
            f"(got {before_app.apply(args.store)})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    app = None
    try:
        app = App.open(args.home, args.store, args.cwd)
        app.on_warning = functools.partial(_warn, app)
        with _redacted_output(app.redact_known):
            return COMMANDS[args.command].run(app, args)
    except Stopped:
        return EXIT_STOPPED
    except ProviderError as e:
        _err(app, e, before_app)
        return EXIT_PROVIDER
    except (UserError, NodecodeError) as e:
        _err(app, e, before_app)
        return EXIT_USER
    except KeyboardInterrupt:
        return EXIT_STOPPED
    finally:
        if app is not None:
            app.close()


def _warn(app: App, line: str) -> None:
    """config.jsonc's warnings (unknown keys), each once, when the config is first read."""
    print(f"nodecode: warning: {app.redact_known(line)}", file=sys.stderr)


def _err(app: App | None, e: Exception, before_app: _KeysBeforeApp) -> None:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    text = app.redact_known(text) if app is not None else before_app.apply(text)
    print(f"nodecode: {text}", file=sys.stderr)


class _KeysBeforeApp:
    """The keys known without an App (variables, config.jsonc's variables and key
    files; never the key command's), read only when a message needs them."""

    def __init__(self, argv: list[str]):
        self._argv = argv
        self._redactor: Redactor | None = None

    def apply(self, text: str) -> str:
        if self._redactor is None:
            home = home_dir(_home_argument(self._argv))
            try:
                config = load_config(home)
            except (NodecodeError, OSError):
                config = None  # the defaults' keys are still blanked
            self._redactor = known_keys(home, os.environ, config)
        return self._redactor.apply(text)


def _home_argument(argv: list[str]) -> str | None:
    """``--home DIR`` read without the parser (which may be what failed)."""
    for at, arg in enumerate(argv):
        if arg == "--home" and at + 1 < len(argv):
            return argv[at + 1]
        if arg.startswith("--home="):
            return arg.removeprefix("--home=")
    return None


class _Redacting:
    """A text stream whose every write passes through the redactor first: each
    line the CLI prints (results, retries, approvals, notices), not only the reply."""

    def __init__(self, stream: TextIO, redact: Callable[[str], str]):
        self._stream = stream
        self._redact = redact

    def write(self, text: str) -> int:
        self._stream.write(self._redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _redacted_output(redact: Callable[[str], str]) -> Iterator[None]:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(out, redact), _Redacting(err, redact)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
