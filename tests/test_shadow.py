"""The shadow git object store: exact bytes, .gitignore, and hands off the workspace's git."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from nodecode.cells.env import CellEnv
from nodecode.checkpoints.shadow import Shadow, ShellWatch

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git on PATH")


def git(ws: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=ws,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def ws(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "crlf.txt").write_bytes(b"a\r\nb\n")
    (ws / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (ws / ".gitignore").write_text("ignored/\n")
    return ws


def test_snapshots_diff_to_exact_bytes_and_honour_gitignore(tmp_path, ws):
    shadow = Shadow(tmp_path / "home", ws, key="s1")
    before = shadow.snapshot()
    (ws / "crlf.txt").write_bytes(b"x\r\ny\n")
    (ws / "new.bin").write_bytes(bytes(range(256)))
    (ws / "ignored").mkdir()
    (ws / "ignored" / "f").write_text("not tracked")
    got = {Path(c.path).name: (c.before, c.after) for c in shadow.diff(before, shadow.snapshot())}
    assert got == {"crlf.txt": (b"a\r\nb\n", b"x\r\ny\n"), "new.bin": (None, bytes(range(256)))}


def test_the_workspaces_own_git_and_index_are_untouched(tmp_path, ws):
    git(ws, "init", "-q")
    git(ws, "add", "crlf.txt")
    git(ws, "commit", "-qm", "one")
    (ws / "staged.txt").write_text("s")
    git(ws, "add", "staged.txt")
    index = (ws / ".git" / "index").read_bytes()
    status = git(ws, "status", "--porcelain")
    shadow = Shadow(tmp_path / "home", ws)
    before = shadow.snapshot()
    (ws / "later.txt").write_text("l")
    changes = shadow.diff(before, shadow.snapshot())
    assert [Path(c.path).name for c in changes] == ["later.txt"]
    assert (ws / ".git" / "index").read_bytes() == index
    assert git(ws, "status", "--porcelain") == status + "?? later.txt\n"


def test_the_users_git_config_is_not_read(tmp_path, ws, monkeypatch):
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "ignore").write_text("*.txt\n")
    (tmp_path / "user" / ".gitconfig").write_text(
        f"[core]\n\texcludesFile = {tmp_path / 'user' / 'ignore'}\n\tautocrlf = true\n"
    )
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    shadow = Shadow(tmp_path / "home", ws)
    before = shadow.snapshot()
    (ws / "more.txt").write_bytes(b"1\n2\n")
    [change] = shadow.diff(before, shadow.snapshot())
    assert (Path(change.path).name, change.after) == ("more.txt", b"1\n2\n")


def test_a_home_inside_the_workspace_is_never_tracked(ws):
    shadow = Shadow(ws / ".nodecode", ws)
    before = shadow.snapshot()
    (ws / ".nodecode" / "context").mkdir(parents=True)
    (ws / ".nodecode" / "context" / "context.txt").write_text("export")
    (ws / "real.txt").write_text("r")
    assert [Path(c.path).name for c in shadow.diff(before, shadow.snapshot())] == ["real.txt"]


def test_a_workspace_past_the_size_limit_is_not_tracked(tmp_path, ws):
    (ws / "big.bin").write_bytes(b"\0" * 300_000)
    env = CellEnv(workspace=ws, verbs={})
    hook = ShellWatch(Shadow(tmp_path / "home", ws, max_mb=0.25))
    hook(env, "before")
    (ws / "x.txt").write_text("x")
    hook(env, "after")
    assert env.changes == []
    assert env.shell_untracked == (
        "the workspace holds 0.3 MB of files, more than shadow_max_mb (0.25 MB)"
    )
