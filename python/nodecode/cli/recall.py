"""Recall's commands: ``recall-log``, ``recall-entry N``, ``recall-search WORDS…``
and ``recall-cost``."""

from __future__ import annotations

import argparse
import json
import sys

from nodecode import recall
from nodecode.app import App
from nodecode.cli.common import EXIT_OK, Command, print_lines, session_of


def _log_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--match", help="SQL LIKE pattern (with %%) or text matched literally")
    p.add_argument("--before", type=int, help="only events before this seq")
    p.add_argument("--limit", type=int, default=recall.DEFAULT_LIMIT, help="how many (default 20)")


def cmd_recall_log(app: App, args: argparse.Namespace) -> int:
    lines = recall.recall_log(
        app.store, session_of(app, args), match=args.match, before=args.before, limit=args.limit
    )
    return print_lines(lines, recall.NO_MATCHES)


def cmd_recall_entry(app: App, args: argparse.Namespace) -> int:
    text = recall.recall_entry(app.store, session_of(app, args), args.n)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("words", nargs="+", metavar="WORDS")
    p.add_argument("--limit", type=int, default=recall.DEFAULT_LIMIT, help="how many (default 20)")


def cmd_recall_search(app: App, args: argparse.Namespace) -> int:
    lines = recall.recall_search(app.store, " ".join(args.words), limit=args.limit)
    return print_lines(lines, recall.NO_MATCHES)


def cmd_recall_cost(app: App, args: argparse.Namespace) -> int:
    sid = session_of(app, args)
    if args.json:
        spending = recall.spent(app.store, sid)
        turns = {str(n): t.as_dict() for n, t in sorted(spending.turns.items())}
        print(json.dumps({"session": sid, **spending.total.as_dict(), "turns": turns}))
        return EXIT_OK
    return print_lines(recall.cost_lines(app.store, sid), recall.NO_MATCHES)


COMMANDS = (
    Command(
        "recall-log",
        "this session's log, oldest first (--match, --before, --limit)",
        cmd_recall_log,
        _log_args,
    ),
    Command(
        "recall-entry",
        "the one event at seq N, whole",
        cmd_recall_entry,
        lambda p: p.add_argument("n", type=int, metavar="N"),
    ),
    Command(
        "recall-search",
        "search every session of the store, newest first",
        cmd_recall_search,
        _search_args,
    ),
    Command(
        "recall-cost",
        "what this session's requests cost, per turn and in all (--json)",
        cmd_recall_cost,
        lambda p: p.add_argument("--json", action="store_true", help="as JSON"),
    ),
)
