"""The shell verb: run a command in the workspace and report its output and exit code.

The command runs in its own session and process group so a timeout, or the
turn being stopped, can kill everything it started; the provider keys are
taken out of its environment so it cannot print them.

A process may leave that group (``setsid``, a daemon's double fork), so each
command's environment also carries a mark of its own (``NODECODE_SHELL_MARK``),
which every process it starts inherits whatever session it moves to. Ending
a command kills its group, then every process whose environment holds the
mark (found through Linux's ``/proc``), until none is left; the result names
any that survived, and says so where there is no ``/proc`` to look in. A
process that empties its environment (``env -i``) before starting another
drops the mark: that one is beyond reach.

A command never outlives the nodecode process that started it, even one
killed with SIGKILL: a watchdog (``/bin/sh``, in a session of its own) reads a
pipe from us and kills the command's process group, and the marked
processes, when the pipe closes without the all-clear. The command waits on
a gate until the watchdog knows its group, so it never runs unwatched. Where
no watchdog can start, commands run unwatched.
"""

from __future__ import annotations

import os
import secrets
import selectors
import shutil
import signal
import subprocess
import threading
import time

from nodecode.cells import approval
from nodecode.cells.env import MAX_OUTPUT, CellEnv
from nodecode.cells.registry import Family, verb
from nodecode.errors import CellError

MARK_VARIABLE = "NODECODE_SHELL_MARK"
# The watchdog: the command's group and mark on the first line, then "done"
# (the all-clear) or end of file (we died): kill the group and each process
# holding the mark, touch the file (the time of the kill), then look again a
# few times for marked processes forked meanwhile.
_WATCHDOG = (
    'read -r group mark || exit 0; read -r _ && exit 0; kill -s KILL -- "-$group" 2>/dev/null; '
    f'marked() {{ grep -lsxzF "{MARK_VARIABLE}=$mark" /proc/[0-9]*/environ 2>/dev/null '
    "| sed 's|^/proc/||; s|/environ$||'; }; "
    'pids=$(marked); [ -z "$pids" ] || kill -s KILL $pids 2>/dev/null; '
    '[ -z "$1" ] || : > "$1"; '
    'for _ in 1 2 3 4; do sleep 1; pids=$(marked); [ -n "$pids" ] || break; '
    "kill -s KILL $pids 2>/dev/null; done"
)
# The command's gate: wait for one line, then become the command itself (same pid).
_GATE = 'read -r _ || exit 125; exec "$0" -c "$1" </dev/null'
# How long to keep reading after the command exits, for output still in the pipe;
# background jobs that keep the pipe open longer are not waited for.
_GRACE = 0.3
# How often the wait looks at the turn's stop: a stop ends the command within this.
_POLL = 0.1
# How long marked processes are given to die once killed before they count as survivors.
_MARKED_GRACE = 1.0


class _Capped:
    """The first MAX_OUTPUT bytes of the output, and how many more there were."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = MAX_OUTPUT - self.size
        self.chunks.append(chunk[:room])
        self.size += min(room, len(chunk))
        self.dropped += max(0, len(chunk) - room)


@verb("shell", args=["cmd"], keywords={"timeout": float}, metavars={"timeout": "S"})
def shell(env: CellEnv, cmd: str, *, timeout: float | None = None) -> str:
    """Run a shell command in the workspace; output and exit code.

    CMD runs with bash; stdout and stderr together, then the exit code."""
    limit = env.shell_timeout if timeout is None else timeout
    if limit <= 0:
        raise CellError(f"shell: :timeout must be more than 0 seconds (got {limit:g})")
    if "\0" in cmd:
        raise CellError("shell: CMD contains a NUL character")
    approval.ask(env, approval.Approval("shell", cmd, cwd=str(env.workspace)), "shell not approved")
    # Checkpoints snapshot the workspace around the command (see nodecode.checkpoints.shadow).
    hook = env.on_shell
    if hook is not None:
        hook(env, "before")
    watchdog = _Watchdog(env.shell_ended)
    mark = secrets.token_hex(16)
    try:
        proc = _spawn(env, cmd, mark)
        assert proc.stdout is not None  # _spawn opens it as a pipe
        watchdog.watch(proc.pid, mark)
        _open_gate(proc)
        try:
            out, status = _run(proc, limit, env.cancel, mark)
        finally:
            proc.stdout.close()
    finally:
        watchdog.release()
        if hook is not None:
            hook(env, "after")
    return _report(out, status)


class _Watchdog:
    """Kills a command's process group if this process dies before ``release``."""

    def __init__(self, mark: os.PathLike | None):
        program = "/bin/sh" if os.path.exists("/bin/sh") else shutil.which("sh")
        self.proc: subprocess.Popen[bytes] | None = None
        if program is None:
            return
        try:
            self.proc = subprocess.Popen(
                [program, "-c", _WATCHDOG, "sh", os.fspath(mark) if mark else ""],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # no terminal: Ctrl-C and hang-ups leave it alone
            )
        except OSError:
            self.proc = None  # degrade: the command runs unwatched

    def watch(self, group: int, mark: str) -> None:
        self._send(f"{group} {mark}\n")

    def release(self) -> None:
        """The all-clear: the command is over (or was killed by us)."""
        if self.proc is None:
            return
        self._send("done\n")
        assert self.proc.stdin is not None  # opened as a pipe
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        _reap(self.proc)

    def _send(self, line: str) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None  # opened as a pipe
        try:
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except OSError:
            pass  # it died: the command is unwatched, not stopped


def _spawn(env: CellEnv, cmd: str, mark: str) -> subprocess.Popen[bytes]:
    program = shutil.which("bash") or "/bin/sh"
    environ = {k: v for k, v in os.environ.items() if k not in env.env_remove}
    environ[MARK_VARIABLE] = mark
    return subprocess.Popen(
        [program, "-c", _GATE, program, cmd],
        cwd=env.workspace,
        env=environ,
        stdin=subprocess.PIPE,  # the gate; the command itself reads /dev/null
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _open_gate(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None  # _spawn opens it as a pipe
    try:
        proc.stdin.write(b"\n")
        proc.stdin.close()
    except OSError:
        pass  # it is already gone; _run reports how it ended


def _run(
    proc: subprocess.Popen[bytes],
    limit: float,
    cancel: threading.Event | None = None,
    mark: str | None = None,
) -> tuple[_Capped, str]:
    """Read until the command ends, the time is up or the turn is stopped; the
    status line says which (and names what survived the kill)."""
    out = _Capped()
    deadline = time.monotonic() + limit
    ended = _read(proc, out, deadline, cancel)
    if ended in ("eof", "exited"):
        ended, code = _wait(proc, deadline, cancel, ended)
    if ended in ("deadline", "stopped"):
        _kill_group(proc)
        left = _end_marked(mark) if mark is not None else []
        _read(proc, out, time.monotonic() + 1.0, None)  # what it wrote before it died
        _reap(proc)
        why = "[stopped by the person]" if ended == "stopped" else f"[timed out after {limit:g} s]"
        return out, why + _survivors(left)
    if ended == "exited":
        return out, f"[exit {_exit_code(code)}; background processes still hold its output]"
    return out, f"[exit {_exit_code(code)}]"


def _wait(
    proc: subprocess.Popen[bytes], deadline: float, cancel: threading.Event | None, ended: str
) -> tuple[str, int]:
    """Wait for the exit once the output is closed: (how it ended, its code)."""
    while True:
        try:
            return ended, proc.wait(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                return "deadline", 0  # it closed its output but kept running
            if cancel is not None and cancel.is_set():
                return "stopped", 0


def _read(
    proc: subprocess.Popen[bytes],
    out: _Capped,
    deadline: float,
    cancel: threading.Event | None = None,
) -> str:
    """Read the output pipe: "eof", "exited" (a background job holds it),
    "deadline" or "stopped"."""
    assert proc.stdout is not None  # _spawn opens it as a pipe
    fd = proc.stdout.fileno()
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "deadline"
            if cancel is not None and cancel.is_set():
                return "stopped"
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= _GRACE:
                return "exited"
            if sel.select(min(deadline - now, _POLL)):
                chunk = os.read(fd, 65536)
                if not chunk:
                    return "eof"
                out.add(chunk)


def _end_marked(mark: str) -> list[int] | None:
    """Kill every process whose environment holds ``mark``, in rounds (one may fork
    while we look); the pids still there after _MARKED_GRACE, or None when there
    is no /proc to look in."""
    if not os.path.isdir("/proc/self"):
        return None
    deadline = time.monotonic() + _MARKED_GRACE
    while True:
        pids = _marked(mark)
        if not pids or time.monotonic() >= deadline:
            return pids
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # gone, or not ours to kill: a survivor if still there at the end
        time.sleep(0.02)


def _marked(mark: str) -> list[int]:
    """The live processes whose environment holds ``MARK_VARIABLE=mark`` (a zombie's
    environment reads empty: it is dead for our purpose)."""
    entry = f"{MARK_VARIABLE}={mark}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if entry in f.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                continue  # gone meanwhile, or another user's
    return found


def _survivors(pids: list[int] | None) -> str:
    """What the result says of processes the command started that are still running."""
    if pids is None:
        return " [processes it moved out of its group could not be looked for: no /proc]"
    if not pids:
        return ""
    named = ", ".join(f"{pid} ({_command_name(pid)})" for pid in sorted(pids))
    return f" [still running, could not be killed: {named}]"


def _command_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return "gone"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass  # stuck in the kernel; the OS reaps it once SIGKILL lands


def _exit_code(code: int) -> int:
    # A command killed by a signal reports 128 + the signal, as shells do.
    return 128 - code if code < 0 else code


def _report(out: _Capped, status: str) -> str:
    text = b"".join(out.chunks).decode("utf-8", errors="replace")
    if text and not text.endswith("\n"):
        text += "\n"
    if out.dropped:
        text += f"[output cut at {MAX_OUTPUT // 2**20} MiB; {out.dropped} more bytes not shown]\n"
    return text + status


FAMILY = Family("shell", (shell,), guidance="Shell commands may need the person's approval.")
