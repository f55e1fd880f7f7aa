"""``nodecode config``: every setting of config.jsonc and the environment (made from
the schema), and ``config check``: the home's config.jsonc read as every command
reads it."""

from __future__ import annotations

import argparse

from nodecode.app import App
from nodecode.cli.common import EXIT_OK, Command
from nodecode.words import plural


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=["check"],
        help="none: list every setting, its kind, default and meaning; "
        "check: read HOME/config.jsonc and the environment, say what is wrong",
    )


def cmd_config(app: App, args: argparse.Namespace) -> int:
    if args.action != "check":
        from nodecode.config import reference  # textwrap and the layout: only here

        print(reference.text(), end="")
        return EXIT_OK
    path = app.home / "config.jsonc"
    config = app.config  # a wrong value raises (exit 1); each warning is on stderr
    where = str(path) if path.exists() else f"{path} (absent: every setting its default)"
    found = len(config.warnings)
    print(f"{where}: {plural(found, 'warning') + ' (above)' if found else 'ok'}")
    return EXIT_OK


COMMANDS = (
    Command(
        "config",
        "every setting of config.jsonc and the environment; `config check` checks them",
        cmd_config,
        _args,
    ),
)
