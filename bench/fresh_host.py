"""The first ask in a fresh Neovim host process: a figure shown, not a bar.

first_token.py's cold App is a new App in a process that has asked before.
A person's first ask after starting Neovim runs in a host process that has
not: nothing is imported or loaded yet but the host itself. Each repetition
starts a new Python process that makes the real ``nodecode.host.Host``, makes
its first call (listing the sessions, as the chat does when it opens: the
place is opened, and ``warm.py`` starts), waits a second (the person
typing), then asks; the clock runs from ``Host.ask`` to the first streamed
text the host hands to Neovim's side. The anchor is a new process that
imports httpx, makes its client, waits the same second, then POSTs the very
body the host sent (recorded once by the server) and reads to its first text
delta. Both through bench/_sse_server.py, plain http (no TLS).

Issue 12 sets no goal for a fresh process, so each row is NOT A BAR; it is
here so that what the cold-App bars leave out is measured too.

    python bench/fresh_host.py [--json] [--reps 7] [--sizes 200,2000]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Report, ServerProcess, arg_parser, band, median  # noqa: E402
from _grow import Grown, grown  # noqa: E402

ASK = "Now make the parser accept trailing commas and add a test for it."
ROUNDS = [{"text": "Done: the parser accepts a trailing comma, with a test.", "calls": []}]
TYPING = 1.0  # seconds between the first call and the ask
NOT_A_BAR = "NOT A BAR (issue 12 sets no goal for a fresh process)"

HOST = """
import json, os, sys, threading, time
from pathlib import Path
from nodecode.host import Host

home, cwd, sid, ask, typing = sys.argv[1:6]
first, at = threading.Event(), []

class Port:
    def emit(self, event):
        if event.get("kind") == "text" and not at:
            at.append(time.perf_counter())
            first.set()

host = Host(Port(), flush_interval=0.0)
host._pins.pin((Path(home), "default"), None, sid)  # the session the grown home holds
host.sessions({"home": home, "cwd": cwd})
time.sleep(float(typing))
t0 = time.perf_counter()
host.ask({"home": home, "cwd": cwd}, ask)
if not first.wait(60):
    sys.exit("no text was streamed")
print(json.dumps({"ms": (at[0] - t0) * 1000}), flush=True)
time.sleep(0.5)  # the turn ends; nothing of it is measured
os._exit(0)
"""

RAW = """
import json, sys, time
import httpx

url, body_path, typing = sys.argv[1:4]
body = json.loads(open(body_path, encoding="utf-8").read())
headers = {"anthropic-version": "2023-06-01", "accept": "text/event-stream"}
client = httpx.Client(timeout=httpx.Timeout(120.0, connect=10.0))
time.sleep(float(typing))
t0 = time.perf_counter()
with client.stream("POST", url + "/v1/messages", json=body, headers=headers) as response:
    for line in response.iter_lines():
        if line.startswith("data: ") and '"text_delta"' in line:
            if json.loads(line[6:]).get("delta", {}).get("text"):
                print(json.dumps({"ms": (time.perf_counter() - t0) * 1000}), flush=True)
                break
"""


def _child(script: str, *args: str) -> float:
    """ms one fresh process printed, or a one-line error naming what it said."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        said = (done.stderr.strip().splitlines() or ["nothing"])[-1]
        raise RuntimeError(f"a fresh process ended {done.returncode} without a figure: {said}")
    return float(json.loads(lines[-1])["ms"])


def host_first_ask(g: Grown, n: int, url: str, dest: Path) -> float:
    home = g.copy(n, dest, url)
    try:
        return _child(HOST, str(home), str(g.workspace), g.sid, ASK, str(TYPING))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def measure(report: Report, g: Grown, root: Path, n: int, reps: int) -> None:
    saved = root / f"bodies-{n}"
    with ServerProcess(root / f"capture-{n}", ROUNDS, save=saved) as server:
        host_first_ask(g, n, server.url, root / f"capture-home-{n}")
    bodies = sorted(saved.glob("*.json"), key=lambda p: int(p.stem))
    if len(bodies) != 1:
        raise RuntimeError(f"expected 1 recorded request, found {len(bodies)}")
    ours: list[float] = []
    raw: list[float] = []
    with ServerProcess(root / f"server-{n}", ROUNDS) as server:
        for i in range(reps):  # ABBA, so drift hits both alike
            for side in ("host", "raw") if i % 2 == 0 else ("raw", "host"):
                if side == "host":
                    ours.append(host_first_ask(g, n, server.url, root / f"home-{n}-{i}"))
                else:
                    raw.append(_child(RAW, server.url, str(bodies[0]), str(TYPING)))
    over = median(ours) - median(raw)
    report.row(
        f"first token overhead, fresh host process, {n} messages",
        round(over, 1),
        None,
        False,
        unit="ms",
        result=NOT_A_BAR,
        figures=f"host {band(ours)} ms vs raw httpx {band(raw)} ms, each a new process",
        reps=reps,
    )


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7, help="fresh processes per side (7)")
    parser.add_argument("--sizes", default="200,2000", help="message counts (200,2000)")
    args = parser.parse_args(argv)
    report = Report(args.json)
    with tempfile.TemporaryDirectory(prefix="nodecode-fresh-host-") as tmp:
        try:
            g = grown(note=report.note)
            for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
                try:
                    measure(report, g, Path(tmp), n, args.reps)
                except Exception as exc:  # noqa: BLE001 - a benchmark reports; it never fails the build
                    traceback.print_exc(file=sys.stderr)
                    report.error(
                        f"first token overhead, fresh host process, {n} messages",
                        None,
                        exc,
                        unit="ms",
                    )
        except Exception as exc:  # noqa: BLE001 - a boundary: report, never crash
            traceback.print_exc(file=sys.stderr)
            report.error("first token overhead, fresh host process", None, exc, unit="ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
