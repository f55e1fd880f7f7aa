"""`nodecode …`: the core without Neovim, for people, scripts and benchmarks.

Exit status: 0 success; 1 a user error (one line on stderr); 2 usage;
3 the provider failed; 130 stopped.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

from nodecode import session as sessions
from nodecode import turns as turn_tree
from nodecode.agent import TurnCallbacks, make_cell_env
from nodecode.app import App
from nodecode.cells import evaluate
from nodecode.errors import NodecodeError, ProviderError, Stopped, UserError

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_PROVIDER, EXIT_STOPPED = 0, 1, 2, 3, 130
Handler = Callable[[App, argparse.Namespace], int]
Arguments = Callable[[argparse.ArgumentParser], None]
COMMANDS: dict[str, tuple[Handler, str, Arguments | None]] = {}


def command(
    name: str, help: str, arguments: Arguments | None = None, aliases: tuple[str, ...] = ()
):
    """Register ``nodecode NAME``; feature modules add their own commands this way."""

    def register(fn: Handler) -> Handler:
        for n in (name, *aliases):
            COMMANDS[n] = (fn, help if n == name else f"alias of {name}", arguments)
        return fn

    return register


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nodecode", description=__doc__.splitlines()[0])
    p.add_argument("--home", help="the nodecode home (default $NODECODE_HOME)")
    p.add_argument("--store", default="default", help="store name (default: default)")
    p.add_argument("--session", help="session id (default $NODECODE_SESSION, else current)")
    p.add_argument("--cwd", help="the workspace (default: the current directory)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, help_text, arguments) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text)
        if arguments:
            arguments(sp)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    _load_feature_commands()
    args = parser().parse_args(argv)
    app = None
    try:
        app = App.open(args.home, args.store, args.cwd)
        return COMMANDS[args.command][0](app, args)
    except Stopped:
        return EXIT_STOPPED
    except ProviderError as e:
        _err(app, e)
        return EXIT_PROVIDER
    except (UserError, NodecodeError) as e:
        _err(app, e)
        return EXIT_USER
    except KeyboardInterrupt:
        return EXIT_STOPPED
    finally:
        if app is not None:
            app.close()


def _err(app: App | None, e: Exception) -> None:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    if app is not None:
        text = app.redactor.apply(text)
    print(f"nodecode: {text}", file=sys.stderr)


@command("new", "create a session and make it current", lambda p: p.add_argument("--title"))
def cmd_new(app: App, args: argparse.Namespace) -> int:
    print(app.new_session(args.title))
    return EXIT_OK


@command("sessions", "list sessions", lambda p: p.add_argument("--json", action="store_true"))
def cmd_sessions(app: App, args: argparse.Namespace) -> int:
    rows = []
    for info in sessions.all_sessions(app.store):
        rows.append(
            {
                "id": info.id,
                "parent": info.parent,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(info.created)),
                "turns": len(turn_tree.turns(app.store, info.id)),
                "title": info.title or "",
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


class CliCallbacks(TurnCallbacks):
    """Reply text to stdout; calls, results, retries and prompts to stderr."""

    def __init__(self, yes: bool):
        self.yes = yes
        self.mid_line = False  # stdout's last reply text did not end a line

    def on_text(self, chunk: str) -> None:
        sys.stdout.write(chunk)
        sys.stdout.flush()
        self.mid_line = not chunk.endswith("\n")

    def end_line(self) -> None:
        """Each round's reply ends its own line on stdout."""
        if self.mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False

    def on_call(self, seq: int, code: str) -> None:
        self.end_line()
        print(f"── call [seq {seq}]\n{code}", file=sys.stderr)

    def on_result(self, seq: int, text: str, error: bool) -> None:
        label = "error" if error else "result"
        print(f"── {label} [seq {seq}]\n{text}", file=sys.stderr)

    def on_retry(self, message: str) -> None:
        print(f"── {message}", file=sys.stderr)

    def on_notice(self, text: str) -> None:
        print(f"── notice: {text}", file=sys.stderr)

    def approve(self, kind: str, detail: str) -> bool:
        if self.yes:
            return True
        if not sys.stdin.isatty():
            print(f"── {kind} not approved (no terminal; use --yes): {detail}", file=sys.stderr)
            return False
        print(f"── approve {kind}? {detail}", file=sys.stderr)
        sys.stderr.write("[y/N] ")
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")


def _ask_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true", help="approve writes and shell")
    p.add_argument("text", nargs="+")


@command("ask", "run one turn", _ask_args)
def cmd_ask(app: App, args: argparse.Namespace) -> int:
    sid = app.resolve_session(args.session)
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
    try:
        callbacks = CliCallbacks(args.yes)
        result = app.agent(sid).ask(" ".join(args.text), callbacks, cancel)
    finally:
        signal.signal(signal.SIGINT, previous)
    callbacks.end_line()
    if result.status == "failed":
        print(f"nodecode: {result.error}", file=sys.stderr)
        return EXIT_USER if result.user_error else EXIT_PROVIDER
    if result.status == "stopped":
        print("nodecode: stopped", file=sys.stderr)
        return EXIT_STOPPED
    if result.status == "round-limit":
        print("nodecode: stopped at max_rounds", file=sys.stderr)
    return EXIT_OK


@command("eval", "evaluate a cell as the agent's tool would", lambda p: p.add_argument("cell"))
def cmd_eval(app: App, args: argparse.Namespace) -> int:
    sid = app.resolve_session(args.session)
    env = make_cell_env(app, sid, approve=lambda kind, detail: True)
    result = evaluate(args.cell, env)
    payload = {"code": args.cell, "output": result.output, "error": result.error}
    app.store.append(
        sid, "cell", text=app.redactor.apply(args.cell), payload=app.redactor.apply_obj(payload)
    )
    out = sys.stderr if result.error else sys.stdout
    print(result.output, file=out)
    return EXIT_USER if result.error else EXIT_OK


FEATURE_MODULES: tuple[str, ...] = ("nodecode.recall", "nodecode.checkpoints", "nodecode.status")


def _load_feature_commands() -> None:
    """Import the modules that register their own commands (recall, budget, tree…)."""
    import importlib

    for name in FEATURE_MODULES:
        importlib.import_module(name)


@command("context", "export the context to its file and print the path")
def cmd_context(app: App, args: argparse.Namespace) -> int:
    from nodecode.context import take as takes

    print(takes.export(app, app.resolve_session(args.session)))
    return EXIT_OK
