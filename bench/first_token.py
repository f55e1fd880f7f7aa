"""bench/README.md: time to first streamed token added by nodecode over raw httpx,
with a cold App and with a warm one.

Goal: ≤ 5 ms with 200 messages; ≤ 25 ms with 2,000 — for each.

The sessions are the ones bench/_grow.py grows through the real agent loop
(asks, tool rounds of real cells, replies), at exactly 200 and 2,000
messages. The server is bench/_sse_server.py in its own process: it reads
each body's Content-Length bytes and drops them, then streams a fixed reply,
so the body's parse is in neither path (the loopback provider's parse of a
1.2 MB body swings by tens of ms). Each repetition, in alternation (ABBA):

* nodecode: a fresh copy of the grown home (off the clock), then cold: the
  clock runs from ``App.open`` through ``Agent.ask`` to the first ``on_text``
  (nothing warmed: config, redactor, provider client, the session's state,
  the request body are all made inside; what lives per process — imports,
  the tiktoken ranks — is warm from earlier runs, as in a host opening
  another App); then warm: a second ``Agent.ask`` in the same App, from the
  call to its first ``on_text``.
  What "cold" means, then: a new App on a store this process has not opened (its
  own copy: no store-level view of the session is warm), in a process that has
  sent before. Everything the request path keeps per App — the session's state,
  the take log, the arrangement, the sent list, the cache ledger, the provider's
  client and connection — is made inside the clock; what it keeps per process
  by content — the message read from a row of the same seq, role, turn, text and
  payload (``model._ROWS``) with its digest, token counts, encoded blocks and runs
  and prefix hashes, the TLS context, the parsed config text — is warm, as in a
  host opening a second App on its store. The rows are read inside the clock.
  That first App is there too: a connection that wrote to the copy stays open
  through the measurement (``_first_app``, off the clock), so the store's WAL
  file exists, as it does when the host's second App opens the store its first
  one holds. The same cold App on a store no connection holds, whose first
  commit creates the WAL file and syncs it and its directory, is shown beside
  the bar as a row that is not one. A cold process (imports, the tiktoken
  ranks, all of those tables, and that first commit) is bench/fresh_host.py's.
* raw httpx: the very bodies nodecode sent for those two asks (recorded once
  by the same server with ``--save``), POSTed with ``json=`` as nodecode's
  provider does, read line by line to the first text delta. Cold: a new
  client (made off the clock: it is 20–60 ms of TLS context, which a cold
  App pays inside its ask as overhead) and a new connection, opened on the
  clock; warm: a second POST on that client (its kept-alive connection, as
  the warm App reuses its provider's).

Overhead = median(nodecode) − median(raw) per size and case, medians of ≥ 30
repetitions with the spread (p10–p90) of both sides; UNRESOLVED when the
overhead's run-to-run spread reaches across the goal (``_common._resolved``).

    python bench/first_token.py [--json] [--reps 30] [--sizes 200,2000] [--profile [ROWS]]
"""

from __future__ import annotations

import cProfile
import gc
import io
import json
import pstats
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, ServerProcess, arg_parser, difference_verdict  # noqa: E402
from _grow import STORE, Grown, grown  # noqa: E402
from nodecode.agent.loop import Agent, TurnCallbacks  # noqa: E402
from nodecode.log.store import Store  # noqa: E402

GOALS_MS = {200: 5.0, 2000: 25.0}
# A cold App whose store no other connection holds: its first commit creates the
# store's WAL file and syncs it and its directory (about 0.6 ms), as the first App of
# a process does; fresh_host.py measures that first App whole. Shown beside the bar.
CLOSED = "NOT A BAR (the first App of a process opens its store so: see fresh_host)"
MIN_REPS = 30
ASK = "Now make the parser accept trailing commas and add a test for it."
REPLY = (
    "Done: the parser now accepts a trailing comma after the last element of a list "
    "or object, and tests/test_parser.py covers both cases."
)
ROUNDS = [{"text": REPLY, "calls": []}]
HEADERS = {"anthropic-version": "2023-06-01", "accept": "text/event-stream"}


class _FirstText(TurnCallbacks):
    def __init__(self) -> None:
        self.at: float | None = None

    def on_text(self, chunk: str) -> None:
        if self.at is None and chunk:
            self.at = time.perf_counter()


def _first_token(g: Grown, app, t0: float) -> float:
    """Ask once in ``app``: ms from ``t0`` to the first streamed text."""
    cb = _FirstText()
    result = Agent(app, g.sid).ask(ASK, cb)
    if result.status != "done" or cb.at is None:
        raise RuntimeError(f"the ask did not stream a reply: {result}")
    return (cb.at - t0) * 1000


def _first_app(home: Path) -> Store:
    """What a host's first App on this store leaves its second one: a connection
    that wrote to the store and stays open, so the store's WAL file exists (made
    off the clock; its write is a meta key nothing reads)."""
    store = Store(home / "store" / f"{STORE}.db")
    store.set_meta("bench:first-app", "open")
    return store


def nodecode(
    g: Grown,
    n: int,
    url: str,
    dest: Path,
    profiler: cProfile.Profile | None = None,
    first_app: bool = True,
) -> tuple[float, float]:
    """(cold, warm) ms to the first token in a fresh copy of the n-message home;
    with ``first_app``, the store held open by another App's connection."""
    home = g.copy(n, dest, url)
    other = _first_app(home) if first_app else None
    gc.collect()
    if profiler is not None:
        profiler.enable()
    t0 = time.perf_counter()
    app = g.open(home)
    try:
        cold = _first_token(g, app, t0)
        gc.collect()
        warm = _first_token(g, app, time.perf_counter())
    finally:
        if profiler is not None:
            profiler.disable()
        app.close()
        if other is not None:
            other.close()
        shutil.rmtree(home, ignore_errors=True)
    return cold, warm


def _stream(client: httpx.Client, url: str, body: dict, t0: float) -> float:
    """POST ``body``: ms from ``t0`` to the first text delta (the rest read off the clock)."""
    first = None
    with client.stream("POST", url + "/v1/messages", json=body, headers=HEADERS) as response:
        lines = response.iter_lines()
        for line in lines:
            text = line.startswith("data: ") and '"text_delta"' in line
            if text and json.loads(line[6:]).get("delta", {}).get("text"):
                first = time.perf_counter()
                break
        for _ in lines:
            pass
    if first is None:
        raise RuntimeError("the raw stream carried no text delta")
    return (first - t0) * 1000


def raw(url: str, bodies: tuple[dict, dict]) -> tuple[float, float]:
    """(cold, warm) ms to the first text delta with plain httpx. The client is made
    off the clock (it takes 20–60 ms, mostly its TLS context): the anchor is the
    streaming; a cold App that makes its provider's client inside the ask pays
    that as overhead."""
    client = httpx.Client(timeout=httpx.Timeout(120.0, connect=10.0))
    gc.collect()
    try:
        cold = _stream(client, url, bodies[0], time.perf_counter())
        gc.collect()
        warm = _stream(client, url, bodies[1], time.perf_counter())
    finally:
        client.close()
    return cold, warm


def capture(g: Grown, n: int, root: Path) -> tuple[dict, dict]:
    """The two bodies nodecode sends for a cold and a warm ask, as the server got them."""
    saved = root / f"bodies-{n}"
    with ServerProcess(root / "capture", ROUNDS, save=saved) as server:
        nodecode(g, n, server.url, root / f"capture-{n}")
    files = sorted(saved.glob("*.json"), key=lambda p: int(p.stem))
    if len(files) != 2:
        raise RuntimeError(f"expected 2 recorded requests, found {len(files)}")
    return json.loads(files[0].read_bytes()), json.loads(files[1].read_bytes())


def measure(
    report: Report, g: Grown, url: str, root: Path, n: int, reps: int, warmup: int, profile: int
) -> None:
    bodies = capture(g, n, root)
    report.note(
        f"  {n} messages: request bodies {len(json.dumps(bodies[0])) / 1000:.0f} kB "
        f"(cold) and {len(json.dumps(bodies[1])) / 1000:.0f} kB (warm)"
    )
    for i in range(warmup):
        nodecode(g, n, url, root / f"warm-{n}-{i}")
        raw(url, bodies)
    ours: tuple[list[float], list[float]] = ([], [])
    base: tuple[list[float], list[float]] = ([], [])
    closed: list[float] = []  # cold, on a store no other connection holds open

    def one(side: str, i: int) -> None:
        if side == "closed":
            closed.append(nodecode(g, n, url, root / f"closed-{n}-{i}", first_app=False)[0])
            return
        got = nodecode(g, n, url, root / f"run-{n}-{i}") if side == "nodecode" else raw(url, bodies)
        for k in (0, 1):
            (ours if side == "nodecode" else base)[k].append(got[k])

    for i in range(reps):  # ABBA, so drift hits both paths alike
        for side in ("nodecode", "raw", "closed") if i % 2 == 0 else ("closed", "raw", "nodecode"):
            one(side, i)
    goal = GOALS_MS.get(n, 25.0)
    for k, case in enumerate(("cold App", "warm App")):
        v = difference_verdict(ours[k], base[k], goal, ("nodecode", "raw httpx"))
        report.verdict(f"first token overhead, {n} messages, {case}", v, goal, unit="ms", reps=reps)
    v = difference_verdict(closed, base[0], goal, ("nodecode", "raw httpx"))
    report.verdict(
        f"first token overhead, {n} messages, cold App on a store no App holds open",
        replace(v, result=CLOSED),
        goal,
        unit="ms",
        reps=reps,
    )
    if profile:
        profiler = cProfile.Profile()
        for i in range(5):
            nodecode(g, n, url, root / f"profile-{n}-{i}", profiler)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
        report.note(f"  cProfile of 5 nodecode runs (cold + warm), {n} messages:\n{out.getvalue()}")


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=MIN_REPS, help="measurements per path (30)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs per path (2)")
    parser.add_argument("--sizes", default="200,2000", help="message counts (200,2000)")
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=15,
        default=0,
        metavar="ROWS",
        help="cProfile the nodecode path of the largest size (top 15 rows)",
    )
    args = parser.parse_args(argv)
    report = Report(args.json)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.reps < MIN_REPS:
        report.note(f"  note: {args.reps} repetitions; the bar asks for a median of ≥ {MIN_REPS}")
    with tempfile.TemporaryDirectory(prefix="nodecode-first-token-") as tmp:
        root = Path(tmp)
        try:
            g = grown(note=report.note)
            with ServerProcess(root / "server", ROUNDS) as server:
                for n in sizes:
                    try:
                        measure(
                            report,
                            g,
                            server.url,
                            root,
                            n,
                            args.reps,
                            args.warmup,
                            args.profile if n == max(sizes) else 0,
                        )
                    except Exception as exc:  # noqa: BLE001 - a benchmark reports; it never fails the build
                        traceback.print_exc(file=sys.stderr)
                        for case in ("cold App", "warm App"):
                            report.error(
                                f"first token overhead, {n} messages, {case}",
                                GOALS_MS.get(n, 25.0),
                                exc,
                                unit="ms",
                            )
        except Exception as exc:  # noqa: BLE001 - a boundary: report, never crash
            traceback.print_exc(file=sys.stderr)
            report.error("first token overhead", 25.0, exc, unit="ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
