"""The shell verb: run a command in the workspace and report its output and exit code.

The command runs in its own process group so a timeout or a stop can kill
everything it started; the provider keys are taken out of its environment so
it cannot print them.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import time

from ..errors import CellError
from .env import MAX_OUTPUT, CellEnv
from .registry import verb

# How long to keep reading after the command exits, for output still in the pipe;
# background jobs that keep the pipe open longer are not waited for.
_GRACE = 0.3
# How often the wait looks at the turn's stop: a stop ends the command within this.
_POLL = 0.1


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
    """Run CMD with bash in the workspace; stdout and stderr together, then the exit code."""
    limit = env.shell_timeout if timeout is None else timeout
    if limit <= 0:
        raise CellError(f"shell: :timeout must be more than 0 seconds (got {limit:g})")
    if "\0" in cmd:
        raise CellError("shell: CMD contains a NUL character")
    if not env.approve("shell", cmd):
        raise CellError("shell not approved")
    # Checkpoints snapshot the workspace around the command (see nodecode.shadow).
    hook = env.on_shell
    if hook is not None:
        hook(env, "before")
    proc = _spawn(env, cmd)
    try:
        out, status = _run(proc, limit, env)
    finally:
        proc.stdout.close()  # type: ignore[union-attr]
        if hook is not None:
            hook(env, "after")
    return _report(out, status)


def _spawn(env: CellEnv, cmd: str) -> subprocess.Popen[bytes]:
    program = shutil.which("bash") or "/bin/sh"
    environ = {k: v for k, v in os.environ.items() if k not in env.env_remove}
    return subprocess.Popen(
        [program, "-c", cmd],
        cwd=env.workspace,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _run(proc: subprocess.Popen[bytes], limit: float, env: CellEnv) -> tuple[_Capped, str]:
    """Read until the command ends, the time is up or the turn is stopped; the
    status line says which."""
    out = _Capped()
    deadline = time.monotonic() + limit
    ended = _read(proc, out, deadline, env)
    if ended not in ("deadline", "stopped"):
        code, ended = _wait(proc, deadline, env, ended)  # it may close its output and go on
    if ended in ("deadline", "stopped"):
        _kill_group(proc)
        _read(proc, out, time.monotonic() + 1.0, None)  # what it wrote before it died
        _reap(proc)
        if ended == "stopped":
            return out, "[stopped by the person]"
        return out, f"[timed out after {limit:g} s]"
    if ended == "exited":
        return out, f"[exit {_exit_code(code)}; background processes still hold its output]"
    return out, f"[exit {_exit_code(code)}]"


def _wait(
    proc: subprocess.Popen[bytes], deadline: float, env: CellEnv, ended: str
) -> tuple[int, str]:
    """Wait for the command to exit: (its code, ``ended``), or (0, "deadline" / "stopped")."""
    while True:
        if env.cancel.is_set():
            return 0, "stopped"
        left = deadline - time.monotonic()
        if left <= 0:
            return 0, "deadline"
        try:
            return proc.wait(timeout=min(left, _POLL)), ended
        except subprocess.TimeoutExpired:
            continue


def _read(proc: subprocess.Popen[bytes], out: _Capped, deadline: float, env: CellEnv | None) -> str:
    """Read the output pipe: "eof", "exited" (a background job holds it), "deadline"
    or "stopped" (the turn's stop, when ``env`` is given)."""
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "deadline"
            if env is not None and env.cancel.is_set():
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


VERBS = (shell,)
