"""A home on a full disk (issue "Trust, third round" 3): a turn that cannot write
its log stops with one line, records the files its shell changed (or leaves
them for the next open to settle), and undo never claims a restore it did not
make.

The full disk is a real one where this process may mount: a 16 MB tmpfs
mounted over the home, filled to a few hundred KB from full. Elsewhere (no
root) the CLI runs with RLIMIT_FSIZE a few hundred KB above the store's
largest file: SQLite meets the short write at the limit exactly as it meets
one at the end of a full disk, and answers "database or disk is full".
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write_config

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git on PATH")
ROOM = 400_000  # bytes left: the turn's small events fit, its 2 MB output does not
BIG_OUTPUT = "head -c 2000000 /dev/zero | tr '\\\\0' x"


class SmallDisk:
    """A home whose disk fills up: a tmpfs when this process may mount, else a file
    size limit for the CLI processes run on it."""

    def __init__(self, tmp_path: Path):
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.mounted = False
        self.limit: int | None = None
        if os.geteuid() == 0 and shutil.which("mount"):
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(self.home)],
                capture_output=True,
            )
            self.mounted = done.returncode == 0

    def fill(self) -> None:
        """Leave ROOM bytes: of the disk, or above the store's largest file."""
        if self.mounted:
            st = os.statvfs(self.home)
            with open(self.home / "filler", "wb") as f:
                f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - ROOM))
            return
        store = self.home / "store"
        self.limit = max(p.stat().st_size for p in store.iterdir()) + ROOM

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess:
        limit = self.limit

        def limited() -> None:
            if limit is not None:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a short write, not a kill
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        env = {k: v for k, v in os.environ.items() if k != "NODECODE_SESSION"}
        cmd = [sys.executable, "-m", "nodecode", "--home", str(self.home), "--cwd", str(cwd)]
        return subprocess.run(
            cmd + list(args),
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            preexec_fn=limited,
        )

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.home)], capture_output=True)


@pytest.fixture
def disk(tmp_path):
    d = SmallDisk(tmp_path)
    yield d
    d.close()


@needs_git
def test_a_turn_on_a_full_disk_stops_in_one_line_and_undo_restores_its_shell_changes(
    disk, loopback, tmp_path
):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("before\n")
    cell = f'(shell "echo after > f.txt; {BIG_OUTPUT}")'
    srv = loopback(
        [
            {"text": "Hello."},
            {"text": "Changing.", "calls": [{"code": cell}, {"code": '(shell "touch later")'}]},
            {"text": "never sent"},
        ]
    )
    write_config(disk.home, srv, auto_approve=["shell"])
    assert disk.run("new", cwd=ws).returncode == 0
    first = disk.run("ask", "hello", cwd=ws)
    assert first.returncode == 0, first.stderr
    disk.fill()

    out = disk.run("ask", "change f", cwd=ws)
    assert "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 1 and last.startswith("nodecode: store ")
    assert "cannot write" in last and ("full" in last or "I/O" in last), last
    assert (ws / "f.txt").read_text() == "after\n"
    assert not (ws / "later").exists()  # nothing ran that the log could not record
    assert len(srv.model_requests) == 2

    undo = disk.run("undo", cwd=ws)
    assert undo.returncode == 0, undo.stderr
    assert undo.stdout.startswith("undid turn 2; the head is turn 1"), undo.stdout
    assert (ws / "f.txt").read_text() == "before\n"


@needs_git
def test_undo_never_claims_a_restore_the_full_disk_kept_it_from_recording(disk, loopback, tmp_path):
    # The changed file itself is too big to keep: neither the result nor its
    # changes fit, so the turn's shell changes are not recorded at its end.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("before\n")
    cell = f'(shell "{BIG_OUTPUT.replace("x", "y")} > f.txt")'
    srv = loopback([{"text": "Hello."}, {"text": "Changing.", "calls": [{"code": cell}]}])
    write_config(disk.home, srv, auto_approve=["shell"])
    assert disk.run("new", cwd=ws).returncode == 0
    assert disk.run("ask", "hello", cwd=ws).returncode == 0
    disk.fill()

    out = disk.run("ask", "change f", cwd=ws)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "cannot write" in out.stderr.strip().splitlines()[-1]

    undo = disk.run("undo", cwd=ws)
    assert "Traceback" not in undo.stderr, undo.stderr
    if undo.returncode != 0:  # the store cannot settle the turn: it says so, moves nothing
        assert "cannot write" in undo.stderr.strip().splitlines()[-1]
        return
    summary = undo.stdout.splitlines()[0]
    assert summary.startswith("undid turn 2")
    restored = (ws / "f.txt").read_text() == "before\n"
    assert restored or " except " in summary, (summary, undo.stderr)
