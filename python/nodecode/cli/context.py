"""``nodecode context``: export the context file and print its path."""

from __future__ import annotations

import argparse

from nodecode.app import App
from nodecode.cli.common import EXIT_OK, Command
from nodecode.context import take as takes


def cmd_context(app: App, args: argparse.Namespace) -> int:
    print(takes.export(app.workspace, app.resolve_session(args.session)))
    return EXIT_OK


COMMANDS = (Command("context", "export the context to its file and print the path", cmd_context),)
