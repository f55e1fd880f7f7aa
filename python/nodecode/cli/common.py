"""What every command module shares: exit statuses, the shape of one command,
and the parser that turns bad arguments into one line (doc/design.md "Rules the tests enforce")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from nodecode.app import App

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_PROVIDER, EXIT_STOPPED = 0, 1, 2, 3, 130

INTEGER_MAX = 2**63 - 1  # SQLite's (and the log's msgpack) integers are 64-bit

Handler = Callable[[App, argparse.Namespace], int]
# What it returns is ignored: a one-argument command's is a lambda returning add_argument's Action.
Arguments = Callable[[argparse.ArgumentParser], object]


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


def integer(value: str) -> int:
    """An integer argument the store can hold: a 64-bit signed whole number."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number (got {value!r})") from None
    if not -INTEGER_MAX - 1 <= n <= INTEGER_MAX:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from {-INTEGER_MAX - 1} to {INTEGER_MAX} (got {value})"
        )
    return n


def text(value: str) -> str:
    """A text argument, which must be UTF-8: argv's undecodable bytes arrive as
    lone surrogates (surrogateescape) that nothing downstream can store."""
    bad = next((i for i, ch in enumerate(value) if "\udc80" <= ch <= "\udcff"), None)
    if bad is None:
        return value
    byte = ord(value[bad]) - 0xDC00
    shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    raise argparse.ArgumentTypeError(
        f"expected UTF-8 text (found the byte 0x{byte:02x} at character {bad} of '{shown}')"
    )


class Parser(argparse.ArgumentParser):
    """argparse, with every text argument checked as UTF-8, every integer
    argument range-checked, and a usage error as one line on stderr, without
    the keys ``redact`` blanks (the line echoes arguments: a pasted key too)."""

    def __init__(self, *args: Any, redact: Callable[[str], str] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self._redact = redact

    def add_argument(self, *names: Any, **kw: Any) -> argparse.Action:
        if kw.get("type") is int:
            kw["type"] = integer
        elif "type" not in kw and kw.get("action", "store") in ("store", "append"):
            kw["type"] = text
        return super().add_argument(*names, **kw)

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("nodecode").strip()
        where = f"{command}: " if command else ""
        line = f"nodecode: {where}{message} (see {self.prog} --help)\n"
        self.exit(EXIT_USAGE, self._redact(line) if self._redact is not None else line)
