"""Keep file verbs inside the workspace and the session's context folder.

Paths are compared after ``os.path.realpath``, so ``..`` and symlinks that
lead out are refused, while a workspace that is itself a symlink still works.
A checked path holds no symlink below its root, so the verbs then open it
beneath that root without following any (``nodecode.paths.open_beneath``): a
folder swapped for a symlink after the check (while the person reads the
approval, say) makes the open fail rather than leave the workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

from nodecode.cells.env import CellEnv
from nodecode.errors import CellError, WorkspaceEscape


def roots(env: CellEnv) -> list[Path]:
    """The real directories file verbs may touch: the workspace, then the context folder."""
    found = [Path(os.path.realpath(env.workspace))]
    if env.context_dir is not None:
        found.append(Path(os.path.realpath(env.context_dir)))
    return found


def inside(env: CellEnv, real: Path) -> bool:
    """True when an already-real path lies in one of the roots."""
    return any(real == root or real.is_relative_to(root) for root in roots(env))


def beneath(env: CellEnv, real: Path) -> tuple[Path, Path]:
    """The root a real path lies in (the innermost, when the context folder is in
    the workspace) and the path relative to it: what ``open_beneath`` takes."""
    inner = [root for root in roots(env) if real == root or real.is_relative_to(root)]
    root = max(inner, key=lambda path: len(path.parts))
    return root, real.relative_to(root)


def in_context_dir(env: CellEnv, real: Path) -> bool:
    """True when a real path lies in the session's context folder (the home's own files)."""
    if env.context_dir is None:
        return False
    root = Path(os.path.realpath(env.context_dir))
    return real == root or real.is_relative_to(root)


def resolve_path(env: CellEnv, path: str, *, must_exist: bool, verb: str = "path") -> Path:
    """The real path a verb's PATH names, or WorkspaceEscape / CellError saying why not.

    Relative paths start at the workspace. A path that does not exist yet
    resolves through its existing parents, so a new file in a symlinked
    directory that leads out is refused too.
    """
    if not path:
        raise CellError(f"{verb}: the path is empty")
    if "\0" in path:
        raise CellError(f"{verb}: the path {_quote(path)} contains a NUL character")
    joined = Path(env.workspace) / os.path.expanduser(path)
    real = Path(os.path.realpath(joined))
    if not inside(env, real):
        raise WorkspaceEscape(f"{verb}: {_quote(path)} is {_outside(env)} (resolves to {real})")
    if must_exist and not real.exists():
        raise CellError(f"{verb}: no such file or directory: {_quote(path)}")
    return real


def display(env: CellEnv, real: Path) -> str:
    """How results name a real path: relative to the workspace, else absolute."""
    root = Path(os.path.realpath(env.workspace))
    if real == root:
        return "."
    if real.is_relative_to(root):
        return real.relative_to(root).as_posix()
    return str(real)


def _outside(env: CellEnv) -> str:
    where = f"outside the workspace {env.workspace}"
    if env.context_dir is not None:
        where += f" and the context folder {env.context_dir}"
    return where


def _quote(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
