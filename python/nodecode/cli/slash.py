"""Slash commands in ``nodecode ask`` (the table is ``nodecode.slash``): each runs
the ``nodecode`` command it names, its words parsed by that command's own
parser, so its output, usage errors and exit status are that command's. It
takes no lease and sends nothing: no turn is recorded."""

from __future__ import annotations

import argparse

from nodecode import slash
from nodecode.app import App
from nodecode.budget import models
from nodecode.cli import budget, checkpoints, recall
from nodecode.cli.common import EXIT_OK, Command, Parser
from nodecode.errors import UserError

# The commands a slash command may name (the groups holding them).
_COMMANDS: dict[str, Command] = {
    c.name: c for group in (budget.COMMANDS, checkpoints.COMMANDS, recall.COMMANDS) for c in group
}


def run(app: App, args: argparse.Namespace, call: slash.Call) -> int:
    """Run ``call`` as ``nodecode ask`` met it; returns the exit status."""
    c = call.command
    if c.cli is None:
        words = _words(Parser(prog="nodecode ask"), call)
        return _model(app, words) if c.name == "model" else _help(words)
    command = _COMMANDS[c.cli]
    parser = Parser(prog=f"nodecode {command.name}")  # as `nodecode --help` names it
    if command.arguments:
        command.arguments(parser)
    words = c.cli_words(_words(parser, call))
    parsed, extra = parser.parse_known_args(words, argparse.Namespace(**vars(args)))
    if extra:  # as `nodecode NAME WORDS` says it: the words left over reach the top parser
        Parser(prog="nodecode").error(f"unrecognized arguments: {' '.join(extra)}")
    return command.run(app, parsed)


def _words(parser: Parser, call: slash.Call) -> list[str]:
    """The words after the name; an unclosed quote is the parser's usage error."""
    try:
        return call.words()
    except ValueError as e:
        parser.error(f"{call.command.usage}: {e} (got {call.rest!r})")


def _help(words: list[str]) -> int:
    if words:
        Parser(prog="nodecode ask").error(f"/help takes no arguments (got {' '.join(words)!r})")
    print("\n".join(slash.help_lines()))
    return EXIT_OK


def _model(app: App, words: list[str]) -> int:
    """``/model``: the models to switch to, as :NodecodeModel lists them. A switch
    holds for the process that makes it, so here a name is only checked."""
    if len(words) > 1:
        Parser(prog="nodecode ask").error(
            f"/model expects one PROVIDER/MODEL (got {' '.join(words)!r})"
        )
    config = app.config
    if not words:
        for r in models.available(app.workspace, config):
            mark = "*" if r["current"] else " "
            print(f"{mark} {r['name']}  {_window(r['window'])} · {r['source']}")
        return EXIT_OK
    pid, model = models.parse(app.workspace, config, words[0])
    raise UserError(
        f"/model: a switch holds in the Neovim that makes it; for one command here: "
        f"NODECODE_PROVIDER={pid} NODECODE_MODEL={model} nodecode ask …"
    )


def _window(n: int | None) -> str:
    """A model's window as the model picker shows it: ``200k window``, ``1.0M window``."""
    if n is None:
        return "window unknown"
    return f"{n / 1e6:.1f}M window" if n >= 1e6 else f"{int(n / 1e3 + 0.5)}k window"
