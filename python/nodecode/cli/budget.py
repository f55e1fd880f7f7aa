"""The budget's commands: ``status`` (the /context report), ``budget [set N | clear]``,
``models refresh`` and ``evict|compact [PERCENT | through TURN]``."""

from __future__ import annotations

import argparse
import json
import sys

from nodecode import budget as budgets
from nodecode.app import App
from nodecode.budget import evict as evictions
from nodecode.cli.common import EXIT_OK, Command, session_of
from nodecode.errors import UserError
from nodecode.views import status


def cmd_status(app: App, args: argparse.Namespace) -> int:
    r = status.report(app.workspace, app.basis(strict=True), session_of(app, args))
    print(json.dumps(r, ensure_ascii=False) if args.json else status.render(r))
    return EXIT_OK


def _budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=["set", "clear"])
    p.add_argument("n", nargs="?", type=int, metavar="N")


def cmd_budget(app: App, args: argparse.Namespace) -> int:
    budgets.require_model(app.config)
    if args.action == "set":
        if args.n is None:
            raise UserError("budget set: expected N, a window in tokens (got nothing)")
        plan = budgets.set_override(app.workspace, app.config, args.n)
        print(f"store override for {plan.provider}/{plan.model}: {args.n} tokens")
    elif args.action == "clear":
        override, ceiling = budgets.clear_override(app.store, app.config)
        print(
            f"cleared: store override {override if override else 'none'} · "
            f"ceiling {ceiling if ceiling else 'none'}"
        )
    print("\n".join(status.budget_lines(budgets.of(app.workspace, app.config))))
    return EXIT_OK


def cmd_models(app: App, args: argparse.Namespace) -> int:
    path, providers, models = budgets.refresh_models(app.home, app.environ)
    print(f"{path}: {providers} providers, {models} models")
    return EXIT_OK


def cmd_evict(app: App, args: argparse.Namespace) -> int:
    receipt = evictions.by_hand(app, session_of(app, args), args.words)
    sys.stdout.write(receipt + "\n")
    return EXIT_OK


COMMANDS = (
    Command(
        "status",
        "the /context report: window, budget, fill and its parts",
        cmd_status,
        lambda p: p.add_argument("--json", action="store_true"),
    ),
    Command(
        "budget",
        "the window and its source; `set N` or `clear` the store's override",
        cmd_budget,
        _budget_args,
    ),
    Command(
        "models",
        "`models refresh`: fetch models.dev's api.json into HOME/cache",
        cmd_models,
        lambda p: p.add_argument("action", choices=["refresh"]),
    ),
    Command(
        "evict",
        "evict by hand: down to PERCENT of the budget (50) or through TURN",
        cmd_evict,
        lambda p: p.add_argument("words", nargs="*", metavar="PERCENT | through TURN"),
        aliases=("compact",),
    ),
)
