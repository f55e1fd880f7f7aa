"""``nodecode ask`` (one turn, streamed) and ``nodecode eval`` (one cell, as the agent's tool)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from nodecode import slash
from nodecode.agent import title
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.cells.approval import Approval, Refused
from nodecode.cells.evaluate import evaluate
from nodecode.cli import slash as slash_commands
from nodecode.cli.common import EXIT_OK, EXIT_PROVIDER, EXIT_STOPPED, EXIT_USER, Command

DIM, RESET = "\x1b[2m", "\x1b[0m"


DROPPED = "── (dropped: the attempt above was discarded)"


class CliCallbacks(TurnCallbacks):
    """Reply text to stdout; calls, results, retries, prompts (and, with
    ``--show-thinking``, the model's thinking, dimmed) to stderr.

    On a terminal the reply streams as it comes, and text of an attempt that
    then fails is marked where it stands. Elsewhere (a pipe, a file) stdout holds
    exactly the replies the log keeps: each request's text is written when the
    request ends, and a failed attempt's text never."""

    def __init__(self, yes: bool, show_thinking: bool = False):
        self.yes = yes
        self.mid_line = False  # stdout's last reply text did not end a line
        self.show_thinking = show_thinking
        self.thinking = False  # stderr is inside a thinking block
        self.dim = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
        self.live = sys.stdout.isatty()
        self.held: list[str] | None = []  # not live: the request's text so far (None: dropped)

    def on_thinking(self, chunk: str) -> None:
        if not self.show_thinking:
            return
        if not self.thinking:
            self.end_line()
            print("── thinking", file=sys.stderr)
            self.thinking = True
        sys.stderr.write(f"{DIM}{chunk}{RESET}" if self.dim else chunk)
        sys.stderr.flush()

    def end_thinking(self) -> None:
        """Whatever follows thinking on stderr starts on a line of its own."""
        if self.thinking:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.thinking = False

    def on_request(self, info: dict) -> None:
        self.held = []

    def on_text(self, chunk: str) -> None:
        self.end_thinking()
        if self.live:
            self.write(chunk)
        elif self.held is not None:
            self.held.append(chunk)

    def on_request_done(self, info: dict) -> None:
        """Not live: the request's text is the round's reply unless it failed."""
        held, self.held = self.held, None
        if held and info.get("status") != "failed":
            self.write("".join(held))

    def write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()
        self.mid_line = not text.endswith("\n")

    def end_line(self) -> None:
        """Each round's reply ends its own line on stdout."""
        self.end_thinking()
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
        self.end_line()
        print(f"── {message}", file=sys.stderr)

    def on_discard(self, text: str) -> None:
        if self.live:  # a terminal cannot take back what it showed: mark it there
            self.end_line()
            print(DROPPED, flush=True)
        else:
            self.held = []
            print("── (dropped: the failed attempt's text, not printed)", file=sys.stderr)

    def on_notice(self, text: str) -> None:
        self.end_thinking()
        print(f"── notice: {text}", file=sys.stderr)

    def review(self, request: Approval) -> bool:
        """Ask on the terminal, showing a write's diff and a command's directory:
        y approves, n or nothing refuses, any other answer refuses with it as the reason."""
        self.end_thinking()
        kind, detail = request.kind, request.detail
        if self.yes:
            return True
        if not sys.stdin.isatty():
            print(f"── {kind} not approved (no terminal; use --yes): {detail}", file=sys.stderr)
            return False
        where = f" (in {request.cwd})" if request.cwd else ""
        print(f"── approve {kind}? {detail}{where}", file=sys.stderr)
        if request.diff:
            print(request.diff, file=sys.stderr)
        sys.stderr.write("[y/N, or a reason to refuse] ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip()
        if answer.lower() in ("y", "yes"):
            return True
        if answer.lower() in ("", "n", "no"):
            return False
        raise Refused(answer)


def _ask_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true", help="approve writes and shell")
    p.add_argument(
        "--show-thinking", action="store_true", help="print the model's thinking to stderr, dimmed"
    )
    p.add_argument(
        "text", nargs="+", metavar="TEXT", help="the ask; /help lists the slash commands"
    )


def cmd_ask(app: App, args: argparse.Namespace) -> int:
    text = slash.read(" ".join(args.text))  # a slash command runs here, and sends nothing
    if isinstance(text, slash.Call):
        return slash_commands.run(app, args, text)
    sid = app.resolve_session(args.session)
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
    try:
        callbacks = CliCallbacks(args.yes, args.show_thinking)
        result = Agent(app, sid).ask(text, callbacks, cancel)
    finally:
        signal.signal(signal.SIGINT, previous)
    callbacks.end_line()
    _title(app, sid)
    if result.status == "failed":
        print(f"nodecode: {result.error}", file=sys.stderr)
        return EXIT_USER if result.user_error else EXIT_PROVIDER
    if result.status == "stopped":
        print("nodecode: stopped", file=sys.stderr)
        return EXIT_STOPPED
    if result.status == "round-limit":
        print("nodecode: stopped at max_rounds", file=sys.stderr)
    return EXIT_OK


def _title(app: App, sid: str) -> None:
    """The automatic title after a session's first reply (``agent.title``): asked
    once the turn ended and its reply is out, waited for before the process ends
    (it has its own time limit); a failure is one line on stderr."""
    thread = title.start(app, sid, _said)
    if thread is not None:
        thread.join()


def _said(outcome: title.Titled) -> None:
    lead = "── " if outcome.title is not None else "nodecode: "
    print(lead + outcome.line(), file=sys.stderr)


def cmd_eval(app: App, args: argparse.Namespace) -> int:
    sid = app.resolve_session(args.session)
    env = app.cell_env(sid, approve=lambda kind, detail: True)
    result = evaluate(args.cell, env)
    payload = {"code": args.cell, "output": result.output, "error": result.error}
    app.store.append(
        sid, "cell", text=app.redactor.apply(args.cell), payload=app.redactor.apply_obj(payload)
    )
    out = sys.stderr if result.error else sys.stdout
    print(result.output, file=out)
    return EXIT_USER if result.error else EXIT_OK


COMMANDS = (
    Command("ask", "run one turn, or a slash command (/help)", cmd_ask, _ask_args),
    Command(
        "eval",
        "evaluate a cell as the agent's tool would",
        cmd_eval,
        lambda p: p.add_argument("cell", metavar="CELL"),
    ),
)
