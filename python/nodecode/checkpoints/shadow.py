"""The shadow git object store: what a shell command changed in the workspace.

Each workspace has its own git dir under the home,
``HOME/shadow/<sha1 of the workspace's real path>/git``, with the workspace as
work tree and an index per session beside it, so the workspace's own ``.git``
and index are never read or written. A snapshot is ``git add -A`` +
``git write-tree`` (honouring .gitignore); two snapshots diffed give every
changed file with its exact bytes before and after. Git runs with a fixed
identity and no user or system config; attributes that would convert bytes
(eol, filters) are switched off so the blobs are the files byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from nodecode.cells.env import CellEnv, FileChange
from nodecode.config import schema
from nodecode.errors import NodecodeError
from nodecode.log.store import Store
from nodecode.paths import ensure_dir, write_private
from nodecode.verbs.env import SessionEnv

DEFAULT_MAX_MB: float = schema.default("shadow_max_mb")
_NULL = "0" * 40
_REGULAR = ("100644", "100755")
_GIT_CONFIG = (
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.quotepath=false",
    "-c",
    "gc.auto=0",
    "-c",
    "advice.addEmbeddedRepo=false",
)
_IDENTITY = {
    "GIT_AUTHOR_NAME": "nodecode",
    "GIT_AUTHOR_EMAIL": "nodecode@localhost",
    "GIT_COMMITTER_NAME": "nodecode",
    "GIT_COMMITTER_EMAIL": "nodecode@localhost",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}
# Highest-precedence attributes: no eol conversion, no filters, so blobs are the bytes.
_ATTRIBUTES = "* -text -eol -crlf -filter -ident -working-tree-encoding\n"


class ShadowError(NodecodeError):
    """Shell changes cannot be tracked (no git, too big, git failed); caught by the hook."""


class Shadow:
    """One workspace's shadow store, snapshotting through one session's index."""

    def __init__(
        self, home: Path, workspace: Path, *, key: str = "", max_mb: float = DEFAULT_MAX_MB
    ):
        self.workspace = Path(os.path.realpath(workspace))
        self.home = Path(os.path.realpath(home))
        digest = hashlib.sha1(str(self.workspace).encode("utf-8", "surrogateescape")).hexdigest()
        self.root = self.home / "shadow" / digest
        self.git_dir = self.root / "git"
        self.index = self.root / f"index{'.' + key if key else ''}"
        # Touched by a command's watchdog when it kills the command because nodecode died.
        self.ended_mark = self.root / f"ended{'.' + key if key else ''}"
        self.max_mb = max_mb

    # -- public ----------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why shell changes cannot be tracked here, or None when they can."""
        if shutil.which("git") is None:
            return "git is not installed (not found on PATH)"
        if not self.workspace.is_dir():
            return f"the workspace {self.workspace} is not a directory"
        try:
            self._ready()
            size = self.size()
        except ShadowError as e:
            return str(e)
        if size > self.max_mb * 2**20:
            shown = f"{size / 2**20:.1f}" if size < 10 * 2**20 else f"{size / 2**20:.0f}"
            return (
                f"the workspace holds {shown} MB of files, more than "
                f"shadow_max_mb ({self.max_mb:g} MB)"
            )
        return None

    def snapshot(self) -> str:
        """The workspace's tree now (``git add -A`` + ``git write-tree``): its hash."""
        self._ready()
        self._git("add", "-A", "--ignore-errors", ok=(0, 1))
        return self._git("write-tree").decode().strip()

    def diff(self, before: str, after: str) -> list[FileChange]:
        """Each regular file that differs between two snapshots, with its bytes."""
        if before == after:
            return []
        raw = self._git("diff-tree", "-r", "--no-renames", "-z", before, after)
        entries = _parse_diff(raw)
        wanted = {sha for _, a, b in entries for sha in (a, b) if sha is not None}
        blobs = self._blobs(sorted(wanted))
        return [
            FileChange(
                str(self.workspace / rel), blobs.get(a) if a else None, blobs.get(b) if b else None
            )
            for rel, a, b in entries
        ]

    def size(self) -> int:
        """Bytes of the files a snapshot would hold (tracked and not ignored)."""
        out = self._git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        total = 0
        for rel in set(out.split(b"\0")):
            if rel:
                try:
                    total += os.lstat(self.workspace / os.fsdecode(rel)).st_size
                except OSError:
                    pass  # listed in the index but gone since
        return total

    # -- git -------------------------------------------------------------------

    def _ready(self) -> None:
        if (self.git_dir / "HEAD").exists():
            return
        ensure_dir(self.root)
        self._git("init", "-q", "--bare", str(self.git_dir), init=True)
        info = ensure_dir(self.git_dir / "info")
        write_private(info / "attributes", _ATTRIBUTES)
        write_private(info / "exclude", self._excludes())

    def _excludes(self) -> str:
        """The home's own files are never tracked, even when it lies in the workspace."""
        if self.home == self.workspace or not self.home.is_relative_to(self.workspace):
            return ""
        return "/" + self.home.relative_to(self.workspace).as_posix() + "/\n"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(
            _IDENTITY,
            GIT_DIR=str(self.git_dir),
            GIT_WORK_TREE=str(self.workspace),
            GIT_INDEX_FILE=str(self.index),
        )
        return env

    def _git(
        self, *args: str, ok: tuple[int, ...] = (0,), init: bool = False, stdin: bytes | None = None
    ) -> bytes:
        env = self._env()
        if init:
            for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
                env.pop(name)
        try:
            done = subprocess.run(
                ["git", *_GIT_CONFIG, *args],
                cwd=self.workspace,
                env=env,
                input=stdin,
                capture_output=True,
                timeout=120,
                check=False,
                umask=0o077,
            )  # the home's files are 0600 in 0700 dirs
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ShadowError(f"git {args[0]} failed: {e}") from None
        if done.returncode not in ok:
            err = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise ShadowError(f"git {args[0]} failed: {err[-1] if err else done.returncode}")
        return done.stdout

    def _blobs(self, shas: list[str]) -> dict[str, bytes]:
        """The contents of blobs by hash, read in one ``git cat-file --batch``."""
        if not shas:
            return {}
        out = self._git("cat-file", "--batch", stdin=("\n".join(shas) + "\n").encode())
        blobs: dict[str, bytes] = {}
        at = 0
        for sha in shas:
            end = out.index(b"\n", at)
            header = out[at:end].split()
            if len(header) < 3:  # "<sha> missing": leave it out
                at = end + 1
                continue
            size = int(header[2])
            blobs[sha] = out[end + 1 : end + 1 + size]
            at = end + 1 + size + 1
        return blobs


def _parse_diff(raw: bytes) -> list[tuple[str, str | None, str | None]]:
    """``diff-tree -z`` records → (path, blob before, blob after); regular files only."""
    parts = raw.split(b"\0")
    out = []
    for meta, path in zip(parts[0::2], parts[1::2], strict=False):
        if not meta.startswith(b":"):
            continue
        old_mode, new_mode, old, new, _ = meta[1:].decode().split(" ")
        if any(m not in _REGULAR and m != "000000" for m in (old_mode, new_mode)):
            continue  # symlinks and nested repositories are not restored
        a, b = (None if old == _NULL else old), (None if new == _NULL else new)
        if a != b:
            out.append((os.fsdecode(path), a, b))
    return out


# -- the shell hook ---------------------------------------------------------------


class ShellWatch:
    """The ``on_shell`` hook of one cell: a snapshot before and after each command,
    the difference appended to ``env.changes``. When tracking is impossible the
    reason goes to ``env.shell_untracked`` and the command runs anyway."""

    def __init__(self, shadow: Shadow):
        self.shadow = shadow
        self.before: str | None = None

    def __call__(self, env: CellEnv, phase: str) -> None:
        if phase == "before":
            self.before = None
            reason = self.shadow.unavailable()
            if reason is None:
                reason = self._snap()
            if reason is not None:
                env.shell_untracked = reason
            self._journal(env, reason)
            return
        if self.before is None:
            return
        before, self.before = self.before, None
        try:
            env.changes.extend(self.shadow.diff(before, self.shadow.snapshot()))
        except ShadowError as e:
            env.shell_untracked = str(e)

    def _snap(self) -> str | None:
        try:
            self.before = self.shadow.snapshot()
        except ShadowError as e:
            return str(e)
        return None

    def _journal(self, env: CellEnv, reason: str | None) -> None:
        """Remember the snapshot before the turn's first unlogged command, so a turn
        killed during it can still be undone (``settle``), and arm the death mark."""
        if not isinstance(env, SessionEnv) or env.turn is None:
            return
        if self.before is not None:
            self.shadow.ended_mark.unlink(missing_ok=True)
            env.shell_ended = self.shadow.ended_mark
        with env.ws.store.atomic() as db:
            db.execute(
                "INSERT OR IGNORE INTO shell_runs (session, turn, workspace, tree, untracked) "
                "VALUES (?, ?, ?, ?, ?)",
                (env.session, env.turn, str(self.shadow.workspace), self.before, reason),
            )


def forget_runs(store: Store, sid: str, turn: int) -> None:
    """A call's result is logged with its changes: no command of it needs settling.
    Only this turn's: an earlier turn's rows are what its end could not record,
    kept for ``turns.recover`` to settle."""
    with store.atomic() as db:
        db.execute("DELETE FROM shell_runs WHERE session = ? AND turn = ?", (sid, turn))


# A file changed later than this after its command was killed was changed by someone else.
_AFTER_KILL = 1.0


def settle(home: Path, store: Store, sid: str, turn: int) -> dict[str, Any]:
    """What turn ``turn``, killed while its shell commands' result was unlogged,
    changed: the snapshot before the first of them against the workspace now, as
    the payload of its ``stopped`` event (``changes``, like a tool event; and in
    ``shell_untracked`` what cannot be told apart from later edits)."""
    rows = store.read(
        "SELECT workspace, tree, untracked FROM shell_runs WHERE session = ? AND turn = ?",
        (sid, turn),
    )
    if not rows:
        return {}
    workspace, before, untracked = rows[0]
    if before is None:
        return {"shell_untracked": untracked or "no snapshot was taken before the command"}
    shadow = Shadow(home, Path(workspace), key=sid)
    try:
        changes = shadow.diff(before, shadow.snapshot())
    except ShadowError as e:
        return {"shell_untracked": f"read after its turn ended without its result: {e}"}
    late = _changed_after_kill(shadow, changes)
    payload: dict[str, Any] = {
        "workspace": workspace,
        "changes": [_stored(store, c) for c in changes if c.path not in late],
    }
    if late:
        shown = ", ".join(os.path.relpath(p, workspace) for p in sorted(late))
        payload["shell_untracked"] = (
            f"{shown} changed again after the turn was killed; left as "
            f"{'they are' if len(late) > 1 else 'it is'}"
        )
    return payload


def _changed_after_kill(shadow: Shadow, changes: list[FileChange]) -> set[str]:
    """Paths written after the watchdog killed the command (when it did)."""
    try:
        ended = shadow.ended_mark.stat().st_mtime
    except OSError:
        return set()  # no mark: nothing tells the command's writes from later ones
    late = set()
    for c in changes:
        try:
            if os.lstat(c.path).st_mtime > ended + _AFTER_KILL:
                late.add(c.path)
        except OSError:
            pass  # deleted: by the command, as far as anyone can tell
    return late


def _stored(store: Store, change: FileChange) -> dict[str, Any]:
    put = store.put_blob
    return {
        "path": change.path,
        "before": put(change.before) if change.before is not None else None,
        "after": put(change.after) if change.after is not None else None,
    }


def watch(home: Path, cwd: Path, sid: str, limit_mb: float = DEFAULT_MAX_MB) -> ShellWatch:
    """The hook a turn's cells run shell commands with."""
    return ShellWatch(Shadow(home, cwd, key=sid, max_mb=limit_mb))
