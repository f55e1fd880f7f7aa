"""SPEC §11: time to first streamed token added by nodecode over raw httpx.

Goal: ≤ 5 ms with 200 messages; ≤ 25 ms with 2,000.

For each size a template home is built once through the real APIs (App,
sessions, ``turns.begin``/``finish``, ``store.append`` of asks, replies,
calls, tool results and the ``request`` events the agent logs), its config
pointing at the loopback provider (Anthropic wire format), run as
``python -m nodecode.loopback`` in its own process like a real provider, so
its work never competes for the measured process's GIL. Then, in
alternation after a warm-up:

* nodecode: a fresh copy of the template store (so every measurement sees
  exactly N messages), the App open, its config loaded and the session read
  once, as in a warm host; the clock runs from ``Agent.ask`` to the first
  ``on_text`` callback: the ask event appended, the turn opened, the context
  and body built, the provider's stream up to the first text delta.
* raw httpx: the very body nodecode sends (recorded once by an in-process
  ``LoopbackServer``: ``requests[-1].body``), POSTed by a long-lived
  ``httpx.Client`` reading lines to the first ``content_block_delta`` text.

The server's own work (token counting, the simulated cache) is in both paths;
the difference of the medians is nodecode's overhead.

    python bench/first_token.py [--json] [--reps 15] [--sizes 200,2000] [--profile [ROWS]]
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    FILES,
    WORDS,
    Report,
    arg_parser,
    log_message,
    median,  # noqa: E402
    numbered_lines,
    prose,
    spread,
    write_config,
)
from nodecode import budget as budgets
from nodecode import turns as turn_tree  # noqa: E402
from nodecode.agent import Agent, TurnCallbacks  # noqa: E402
from nodecode.app import App  # noqa: E402
from nodecode.context import model as context_model
from nodecode.context import request as request_builder
from nodecode.context import view
from nodecode.loopback import LoopbackServer  # noqa: E402
from nodecode.prompt import SYSTEM_PROMPT, TOOLS  # noqa: E402

GOALS_MS = {200: 5.0, 2000: 25.0}
STORE = "default"
ENVIRON = {"ANTHROPIC_API_KEY": "sk-ant-bench-0000-not-a-real-key-1234567890"}
ASK = "Now make the parser accept trailing commas and add a test for it."
REPLY = (
    "Done: the parser now accepts a trailing comma after the last element of a list "
    "or object, and tests/test_parser.py covers both cases."
)
HEADERS = {"anthropic-version": "2023-06-01", "accept": "text/event-stream"}

# ------------------------------------------------------------------ the template session


def _code(rng: random.Random) -> str:
    f = rng.choice(FILES)
    return rng.choice(
        [
            f'(read-file "{f}" :from {rng.randint(1, 400)} :to {rng.randint(401, 800)})',
            f'(shell "rg -n \\"{rng.choice(WORDS)}_{rng.choice(WORDS)}\\" src tests")',
            f'(edit-file "{f}" :old "return {rng.choice(WORDS)}" :new "return {rng.choice(WORDS)}'
            f'_{rng.choice(WORDS)}(value)")',
            '(shell "python -m pytest -q tests/test_parser.py")',
            f'(list-files "{f.rsplit("/", 1)[0]}")',
        ]
    )


def _output(rng: random.Random) -> str:
    chars = rng.randint(350, 1400)
    return numbered_lines(rng, rng.randint(1, 300), chars)


def _turn_plan(rng: random.Random) -> list[tuple]:
    """One turn as the agent logs it: ('request',) marks a round's request event."""
    plan: list[tuple] = [("user", prose(rng, rng.randint(120, 600)))]
    for _ in range(rng.randint(1, 4)):
        plan.append(("request",))
        if rng.random() < 0.4:
            plan.append(("assistant", prose(rng, rng.randint(80, 400))))
        calls = rng.choice([1, 1, 1, 2])
        plan += [("call", _code(rng)) for _ in range(calls)]
        plan += [("tool", _output(rng)) for _ in range(calls)]
    plan += [("request",), ("assistant", prose(rng, rng.randint(400, 1500)))]
    return plan


def _fit(plan: list[tuple], room: int) -> list[tuple]:
    """The plan cut to ``room`` messages, never ending on a call without its result."""
    out: list[tuple] = []
    count = 0
    for item in plan:
        if item[0] != "request":
            if count == room:
                break
            count += 1
        out.append(item)
    while out[-1][0] == "request":
        out.pop()
    if out[-1][0] == "call":
        out[-1] = ("assistant", "Stopping here for now.")
    return out


def build_template(root: Path, n: int, url: str) -> tuple[Path, str, int, int]:
    """A home whose one session holds exactly ``n`` messages, its provider at ``url``;
    returns (home, sid, messages, characters)."""
    home = root / f"template-{n}"
    write_config(home, url)
    app = App.open(home=home, store=STORE, cwd=root, environ=ENVIRON)
    store = app.store
    sid = app.new_session(title=f"bench {n}")
    rng = random.Random(n)
    sent: list[tuple[int, str]] = []  # what each request carried: the whole context so far
    pending: list[int] = []  # call seqs awaiting their result, in order
    count = 0
    while count < n:
        plan = _fit(_turn_plan(rng), n - count)
        number = turn_tree.begin(store, sid, store.last_seq(sid) + 1).number
        for item in plan:
            kind = item[0]
            if kind == "request":
                store.append(
                    sid,
                    "request",
                    turn=number,
                    payload={
                        "provider": "loopback",
                        "model": "loopback-model",
                        "sent": [list(p) for p in sent],
                        "breakpoints": [sent[-1][0]],
                        "retries": 0,
                        "usage": {
                            "input": 40 * len(sent),
                            "output": 120,
                            "cache_read": 38 * len(sent),
                            "cache_write": 90,
                        },
                        "stop_reason": "end_turn",
                    },
                )
                continue
            event = log_message(store, sid, number, kind, item[1], pending)
            sent.append((event.seq, context_model.message_of(event).digest))
            count += 1
        turn_tree.finish(store, sid, number, store.last_seq(sid), "done")
    messages = len(context_model.build(store, sid))
    chars = sum(len(m.text) for m in context_model.build(store, sid))
    app.close()  # checkpoints the WAL: the template is the one .db file
    return home, sid, messages if messages == n else -messages, chars


# ------------------------------------------------------------------ the two paths


class ServerProcess:
    """``python -m nodecode.loopback`` in its own process, as a provider would be: its
    work never holds the measured process's GIL. Every round replies with a text."""

    def __init__(self, root: Path, rounds: int = 5000) -> None:
        script = root / "script.jsonl"
        script.write_text("\n".join(json.dumps({"text": REPLY}) for _ in range(rounds)))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodecode.loopback", "--script", str(script)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the loopback server did not start (printed {self.url!r})")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _FirstText(TurnCallbacks):
    def __init__(self, profiler: cProfile.Profile | None = None) -> None:
        self.at: float | None = None
        self.profiler = profiler

    def on_text(self, chunk: str) -> None:
        if self.at is None:
            self.at = time.perf_counter()
            if self.profiler is not None:
                self.profiler.disable()


class Bench:
    def __init__(self, root: Path, template: Path, sid: str, url: str):
        self.root, self.template, self.sid, self.url = root, template, sid, url
        self.runs = 0
        self.body: dict | None = None

    def fresh_app(self, url: str | None = None) -> App:
        """A copy of the template home, opened and warm as in a running host."""
        self.runs += 1
        home = self.root / f"run-{self.runs}"
        shutil.copytree(self.template, home)
        if url is not None:
            write_config(home, url)
        app = App.open(home=home, store=STORE, cwd=self.root, environ=ENVIRON)
        app.config, app.redactor  # noqa: B018 - loaded once per host, not per ask
        view.path_messages(app.store, self.sid)  # the host has shown the chat: store read once
        app.provider()  # the host keeps one HTTP client for its life
        # The host sent this session's previous request: its messages' digests,
        # wire blocks and token counts are already made (cached per message).
        request_builder.build(
            "anthropic",
            context_model.build(app.store, self.sid),
            model="loopback-model",
            system=SYSTEM_PROMPT,
            tools=TOOLS,
            max_tokens=8192,
        )
        budgets.fill_of(app.store, self.sid, app.config)
        return app

    def ask(self, app: App, profiler: cProfile.Profile | None = None) -> float:
        """One ``Agent.ask``: ms from the call to the first ``on_text``."""
        try:
            agent = Agent(app, self.sid)
            cb = _FirstText(profiler)
            t0 = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            result = agent.ask(ASK, cb)
            if profiler is not None:
                profiler.disable()
            if result.status != "done" or cb.at is None:
                raise RuntimeError(f"the ask did not stream a reply: {result}")
            return (cb.at - t0) * 1000
        finally:
            app.close()
            shutil.rmtree(app.home, ignore_errors=True)

    def capture(self) -> None:
        """The body nodecode sends for this session, as a recording LoopbackServer saw it."""
        recorder = LoopbackServer([{"text": REPLY}]).start()
        try:
            self.ask(self.fresh_app(recorder.url))
            self.body = recorder.model_requests[-1].body
        finally:
            recorder.stop()

    def nodecode(self, profiler: cProfile.Profile | None = None) -> float:
        return self.ask(self.fresh_app(), profiler)

    def raw(self) -> float:
        """The captured body POSTed with plain httpx: ms to the first text delta.

        The client is made before the clock starts, its connection opened within it:
        nodecode opens a new connection per ask too, and a kept-alive connection to
        the loopback server waits ~40 ms per request on Nagle + delayed ACK."""
        assert self.body is not None, "capture() first"
        first = None
        with httpx.Client(timeout=httpx.Timeout(120.0, connect=10.0)) as client:
            t0 = time.perf_counter()
            with client.stream(
                "POST", self.url + "/v1/messages", json=self.body, headers=HEADERS
            ) as response:
                lines = response.iter_lines()
                for line in lines:
                    if line.startswith("data: ") and "content_block_delta" in line:
                        delta = json.loads(line[6:]).get("delta", {})
                        if delta.get("type") == "text_delta" and delta.get("text"):
                            first = time.perf_counter()
                            break
                for _ in lines:  # read to the end, off the clock
                    pass
        if first is None:
            raise RuntimeError("the raw stream carried no text delta")
        return (first - t0) * 1000


def measure(
    report: Report, root: Path, url: str, n: int, reps: int, warmup: int, profile: int
) -> None:
    t = time.perf_counter()
    template, sid, got, chars = build_template(root, n, url)
    if got != n:
        raise RuntimeError(f"the template session has {abs(got)} messages, not {n}")
    size = (template / "store" / f"{STORE}.db").stat().st_size
    bench = Bench(root, template, sid, url)
    bench.capture()
    body_kb = len(json.dumps(bench.body)) / 1000
    report.note(
        f"  {n} messages: {chars // n} characters each on average, store "
        f"{size / 1e6:.1f} MB, request body {body_kb:.0f} kB, built in "
        f"{time.perf_counter() - t:.1f} s"
    )
    for _ in range(warmup):
        bench.nodecode()
        bench.raw()
    ours: list[float] = []
    raws: list[float] = []
    for i in range(reps):  # alternating, ABBA, so drift hits both paths alike
        if i % 2 == 0:
            ours.append(bench.nodecode())
            raws.append(bench.raw())
        else:
            raws.append(bench.raw())
            ours.append(bench.nodecode())
    mine, base = median(ours), median(raws)
    over, goal = mine - base, GOALS_MS.get(n, 25.0)
    ok = over <= goal
    report.row(
        f"first token overhead, {n} messages",
        round(over, 2),
        goal,
        ok,
        line=(
            f"first token, {n} messages: nodecode {mine:.1f} ms, raw httpx "
            f"{base:.1f} ms → overhead {over:.1f} ms (goal ≤ {goal:g} ms) "
            f"{'PASS' if ok else 'FAIL'}"
        ),
        nodecode_ms=round(mine, 2),
        raw_ms=round(base, 2),
        messages=n,
        reps=reps,
    )
    report.note(f"  nodecode runs (ms): {spread(ours)}")
    report.note(f"  raw runs (ms):      {spread(raws)}")
    if profile:
        profiler = cProfile.Profile()
        for _ in range(5):
            bench.nodecode(profiler)
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(profile)
        report.note(
            f"  cProfile of the nodecode path, {n} messages, 5 asks, each "
            f"from the ask to its first token:\n{out.getvalue()}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="measurements per path (15)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured runs per path (3)")
    parser.add_argument("--sizes", default="200,2000", help="message counts (200,2000)")
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=10,
        default=0,
        metavar="ROWS",
        help="cProfile the nodecode path of the largest size (top 10 rows)",
    )
    args = parser.parse_args(argv)
    report = Report(args.json)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="nodecode-bench-") as tmp:
        server = None
        try:
            server = ServerProcess(Path(tmp))
            for n in sizes:
                try:
                    measure(
                        report,
                        Path(tmp),
                        server.url,
                        n,
                        args.reps,
                        args.warmup,
                        args.profile if n == max(sizes) else 0,
                    )
                except Exception as exc:  # noqa: BLE001 — a benchmark reports; it never fails the build
                    traceback.print_exc(file=sys.stderr)
                    report.row(
                        f"first token overhead, {n} messages",
                        None,
                        GOALS_MS.get(n, 25.0),
                        False,
                        error=str(exc),
                        line=f"first token, {n} messages: ERROR {exc} → FAIL",
                    )
        except Exception as exc:  # noqa: BLE001 — a boundary: report, never crash
            traceback.print_exc(file=sys.stderr)
            report.row(
                "first token overhead",
                None,
                None,
                False,
                error=str(exc),
                line=f"first token: ERROR {exc} → FAIL",
            )
        finally:
            if server is not None:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
