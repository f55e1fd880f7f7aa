"""``nodecode new`` and ``nodecode sessions``."""

from __future__ import annotations

import argparse
import json
import time

from nodecode.app import App
from nodecode.cli.common import EXIT_OK, Command
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.views.titles import session_title


def cmd_new(app: App, args: argparse.Namespace) -> int:
    print(app.new_session(args.title))
    return EXIT_OK


def cmd_sessions(app: App, args: argparse.Namespace) -> int:
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
    if args.json:
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


COMMANDS = (
    Command(
        "new",
        "create a session and make it current",
        cmd_new,
        lambda p: p.add_argument("--title"),
    ),
    Command(
        "sessions",
        "list sessions",
        cmd_sessions,
        lambda p: p.add_argument("--json", action="store_true"),
    ),
)
