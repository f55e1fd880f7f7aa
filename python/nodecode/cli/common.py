"""What every command module shares: exit statuses and the shape of one command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from nodecode.app import App

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_PROVIDER, EXIT_STOPPED = 0, 1, 2, 3, 130

Handler = Callable[[App, argparse.Namespace], int]
Arguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """``nodecode NAME``: its help line, its own arguments, and what runs it."""

    name: str
    help: str
    run: Handler
    arguments: Arguments | None = None
    aliases: tuple[str, ...] = ()


def print_lines(lines: list[str], empty: str) -> int:
    """Lines on stdout, or ``empty`` on stderr when there are none."""
    if lines:
        print("\n".join(lines))
    else:
        print(empty, file=sys.stderr)
    return EXIT_OK


def session_of(app: App, args: argparse.Namespace) -> str:
    """The session a read-only command works on (never creates one)."""
    return app.resolve_session(args.session, create=False)
