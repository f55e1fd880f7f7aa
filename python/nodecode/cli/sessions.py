"""``nodecode new`` and ``nodecode sessions [rename ID TITLE | delete ID]``."""

from __future__ import annotations

import argparse
import json
import sys
import time

from nodecode.app import App
from nodecode.cli.common import EXIT_OK, EXIT_USER, Command
from nodecode.errors import UserError
from nodecode.log import delete as deletion
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.views.titles import session_title
from nodecode.words import plural


def cmd_new(app: App, args: argparse.Namespace) -> int:
    print(app.new_session(args.title))
    return EXIT_OK


def _sessions_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=["rename", "delete"])
    p.add_argument("id", nargs="?", metavar="ID")
    p.add_argument("words", nargs="*", metavar="TITLE", help="rename: the new title")
    p.add_argument("--json", action="store_true")
    p.add_argument("--yes", action="store_true", help="delete without asking")


def cmd_sessions(app: App, args: argparse.Namespace) -> int:
    if args.action is not None and not args.id:
        raise UserError(f"sessions {args.action}: expected a session ID (got nothing)")
    if args.action == "rename":
        title = app.rename_session(args.id, " ".join(args.words))
        print(f"{args.id}  {title}")
        return EXIT_OK
    if args.words:
        raise UserError(f"sessions: unexpected words {' '.join(args.words)!r}")
    if args.action == "delete":
        return _delete(app, args.id, args.yes)
    return _list(app, args.json)


def _list(app: App, as_json: bool) -> int:
    rows = []
    for info in sessions.all_sessions(app.store):
        rows.append(
            {
                "id": info.id,
                "parent": info.parent,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(info.created)),
                "turns": len(turn_tree.turns(app.store, info.id)),
                "title": session_title(app.store, info),
            }
        )
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    current = app.current_session()
    for r in rows:
        mark = "*" if r["id"] == current else " "
        print(
            f"{mark} {r['id']}  parent={r['parent'] or '-'}  {r['created']}  "
            f"turns={r['turns']}  {r['title']}"
        )
    return EXIT_OK


def _delete(app: App, sid: str, yes: bool) -> int:
    """Delete ``sid`` once the person confirms it on the terminal (or ``--yes``)."""
    refused = deletion.refusal(app.store, sid)  # (an unknown sid raises here)
    if refused is not None:
        raise UserError(str(refused))
    title = session_title(app.store, sessions.get(app.store, sid)) or "untitled"
    if not yes:
        if not sys.stdin.isatty():
            print(
                f"nodecode: sessions delete: not deleted: {sid} ({title}) needs a yes on a "
                "terminal, or --yes",
                file=sys.stderr,
            )
            return EXIT_USER
        turns = len(turn_tree.turns(app.store, sid))
        sys.stderr.write(
            f"delete session {sid} ({title}, {plural(turns, 'turn')})? "
            "Its log leaves the store and recall for good. [y/N] "
        )
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("not deleted", file=sys.stderr)
            return EXIT_USER
    done = app.delete_session(sid)
    print(f"deleted {sid} ({title}): {done.events} events, {done.blobs} blobs")
    return EXIT_OK


COMMANDS = (
    Command(
        "new",
        "create a session and make it current",
        cmd_new,
        lambda p: p.add_argument("--title"),
    ),
    Command(
        "sessions",
        "list sessions; rename ID TITLE; delete ID [--yes]",
        cmd_sessions,
        _sessions_args,
    ),
)
