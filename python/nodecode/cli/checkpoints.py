"""Checkpoints' commands: ``tree``, ``undo``, ``redo``, ``continue``, ``rewind``, ``fork``
and ``blob`` (a file version kept by ``undo --force``)."""

from __future__ import annotations

import argparse
import json
import sys

from nodecode.app import App
from nodecode.budget import evict as evictions
from nodecode.checkpoints import moves as checkpoints
from nodecode.cli.common import EXIT_OK, Command, session_of
from nodecode.context import take as takes
from nodecode.errors import UserError
from nodecode.views import tree as trees
from nodecode.words import plural

_FORCE = {"undo": "nodecode undo --force", "redo": "nodecode redo --force"}


def _report(moved: checkpoints.Moved) -> None:
    """The file lines, then, when files were left, the one command that finishes them."""
    for line in moved.lines:
        print(line, file=sys.stderr)
    hint = moved.finish_hint(_FORCE.get(moved.op, f"nodecode rewind {moved.turn} --force"))
    if hint:
        print(hint, file=sys.stderr)


def _summary(moved: checkpoints.Moved, done: str) -> str:
    """``undid turn 2 except 1 file`` / ``finished undoing turn 2``: what the move did."""
    if moved.finished:
        return f"finished {moved.doing()}"
    left = len(moved.left)  # pending or not: a file left as it is was not undone
    untracked = "shell changes that were not tracked" if moved.untracked else ""
    files = plural(left, "file") if left else ""
    excepted = " and ".join(part for part in (files, untracked) if part)
    return done + (f" except {excepted}" if excepted else "")


def _room(app: App) -> takes.Room | None:
    """What a block a pending edit writes may hold (see ``take.Room``), for the take
    a move makes; None when the config gives no window."""
    try:
        return evictions.take_room(app.workspace, app.config)
    except UserError:
        return None


def _force_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite files changed since (keeping a copy); right after a move that "
        "skipped files, finish that move instead",
    )


def cmd_undo(app: App, args: argparse.Namespace) -> int:
    moved = checkpoints.undo(
        app.workspace, session_of(app, args), force=args.force, room=_room(app)
    )
    _report(moved)
    done = _summary(moved, f"undid {checkpoints.name(moved.source)}")
    print(f"{done}; the head is {checkpoints.name(moved.target)}")
    if moved.ask:
        print(moved.ask)
    return EXIT_OK


def cmd_redo(app: App, args: argparse.Namespace) -> int:
    moved = checkpoints.redo(
        app.workspace, session_of(app, args), force=args.force, room=_room(app)
    )
    _report(moved)
    print(_summary(moved, f"redid {checkpoints.name(moved.target)}"))
    return EXIT_OK


def cmd_tree(app: App, args: argparse.Namespace) -> int:
    nodes = trees.nodes(app.store, session_of(app, args))
    if args.json:
        print(json.dumps([n.as_dict() for n in nodes], ensure_ascii=False))
    elif nodes:
        print(trees.render(nodes))
    else:
        print("(no turns yet)", file=sys.stderr)
    return EXIT_OK


def cmd_continue(app: App, args: argparse.Namespace) -> int:
    moved = checkpoints.continue_(app.workspace, session_of(app, args), args.turn, _room(app))
    _report(moved)
    print(f"the head is {checkpoints.name(moved.target)} (files unchanged)")
    return EXIT_OK


def _rewind_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("turn", type=int, metavar="TURN")
    _force_arg(p)


def cmd_rewind(app: App, args: argparse.Namespace) -> int:
    moved = checkpoints.rewind(
        app.workspace, session_of(app, args), args.turn, force=args.force, room=_room(app)
    )
    _report(moved)
    print(_summary(moved, f"rewound to {checkpoints.name(moved.target)}"))
    return EXIT_OK


def cmd_fork(app: App, args: argparse.Namespace) -> int:
    print(checkpoints.fork(app.store, session_of(app, args), args.at))
    return EXIT_OK


def cmd_blob(app: App, args: argparse.Namespace) -> int:
    sys.stdout.buffer.write(checkpoints.find_blob(app.store, args.hash.lower()))
    sys.stdout.flush()
    return EXIT_OK


COMMANDS = (
    Command(
        "undo",
        "undo the head turn and its file changes; prints the undone ask",
        cmd_undo,
        _force_arg,
    ),
    Command(
        "redo",
        "redo the turn the last undo left, re-applying its file changes",
        cmd_redo,
        _force_arg,
    ),
    Command(
        "tree",
        "the session's turn tree",
        cmd_tree,
        lambda p: p.add_argument("--json", action="store_true"),
    ),
    Command(
        "continue",
        "move the head to TURN; files stay",
        cmd_continue,
        lambda p: p.add_argument("turn", type=int, metavar="TURN"),
    ),
    Command(
        "rewind",
        "move the head to TURN and return files to their state after it",
        cmd_rewind,
        _rewind_args,
    ),
    Command(
        "fork",
        "fork a child session here (or at TURN); prints its id",
        cmd_fork,
        lambda p: p.add_argument("--at", type=int, metavar="TURN"),
    ),
    Command(
        "blob",
        "print a stored blob (a file version kept by undo --force)",
        cmd_blob,
        lambda p: p.add_argument("hash", metavar="HASH"),
    ),
)
