"""The file verbs: read-file, write-file, edit-file, list-files, grep.

Every path goes through ``resolve_path``; writes ask for approval first and
record a FileChange with the exact bytes so checkpoints can undo them.
Results name paths relative to the workspace (absolute in the context folder).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

from ..errors import CellError
from ..paths import replace_file
from .env import CellEnv, FileChange
from .paths import display, in_context_dir, inside, resolve_path
from .registry import verb

MAX_ENTRIES = 1000
MAX_MATCHES = 500
MAX_GREP_LINE = 400
MAX_GREP_FILE = 16 * 1024 * 1024
_SNIFF = 8192


@verb(
    "read-file", args=["path"], keywords={"from": int, "to": int}, metavars={"from": "L", "to": "L"}
)
def read_file(env: CellEnv, path: str, *, from_: int | None = None, to: int | None = None) -> str:
    """Read a text file as plain text, whole or lines L–M (1-based, inclusive)."""
    real = resolve_path(env, path, must_exist=True, verb="read-file")
    data = _file_bytes(real, "read-file", path)
    if _is_binary(data):
        raise CellError(f"read-file: {_q(path)} is a binary file ({len(data)} bytes)")
    text = data.decode("utf-8", errors="replace")
    if from_ is None and to is None:
        return text or f";; {display(env, real)} is empty"
    return _line_range(text, from_, to, path)


@verb("write-file", args=["path", "text"])
def write_file(env: CellEnv, path: str, text: str) -> str:
    """Create or replace a file with TEXT, making its parent folders."""
    real = resolve_path(env, path, must_exist=False, verb="write-file")
    if real.is_dir():
        raise CellError(f"write-file: {_q(path)} is a directory")
    data = _encode(text, "write-file", "TEXT")
    _approve_write(env, real)
    before = real.read_bytes() if real.exists() else None
    real.parent.mkdir(parents=True, exist_ok=True)
    replace_file(real, data)
    _record(env, real, before, data)
    return f"wrote {display(env, real)} ({len(data)} bytes)"


@verb("edit-file", args=["path", "old", "new"])
def edit_file(env: CellEnv, path: str, old: str, new: str) -> str:
    """Replace the one occurrence of OLD in a file with NEW."""
    real = resolve_path(env, path, must_exist=True, verb="edit-file")
    data = _file_bytes(real, "edit-file", path)
    if _is_binary(data):
        raise CellError(f"edit-file: {_q(path)} is a binary file ({len(data)} bytes)")
    if not old:
        raise CellError("edit-file: OLD is empty; give the exact text to replace")
    # surrogateescape keeps bytes that are not UTF-8 exactly as they were.
    text = data.decode("utf-8", "surrogateescape")
    at = _only_occurrence(text, old, display(env, real))
    after = _encode(text[:at] + new + text[at + len(old) :], "edit-file", "NEW")
    _approve_write(env, real)
    replace_file(real, after)
    _record(env, real, data, after)
    first = text.count("\n", 0, at) + 1
    last = max(first, first + new.count("\n") - new.endswith("\n"))
    where = f"line {first}" if first == last else f"lines {first}–{last}"
    return f"edited {display(env, real)}: replaced 1 occurrence ({where})"


@verb("list-files", optional=["dir"], keywords={"glob": str})
def list_files(env: CellEnv, directory: str = ".", *, glob: str | None = None) -> str:
    """List the files and folders under DIR (default the workspace), folders ending in /."""
    real = resolve_path(env, directory, must_exist=True, verb="list-files")
    if not real.is_dir():
        raise CellError(f"list-files: {_q(directory)} is a file; use (read-file {_q(directory)})")
    base = display(env, real)
    lines: list[str] = []
    for entry, rel, is_dir in _walk(real):
        target = rel if glob is not None and "/" in glob else entry.name
        if glob is not None and not fnmatch.fnmatch(target, glob):
            continue
        if len(lines) == MAX_ENTRIES:
            lines.append(f"[list cut at {MAX_ENTRIES} entries; narrow it with :glob or a folder]")
            break
        lines.append(_join(base, rel) + ("/" if is_dir else ""))
    if not lines:
        return f";; no entries in {base}" + (f" match {glob}" if glob is not None else "")
    return "\n".join(lines) + "\n"


@verb("grep", args=["pattern"], keywords={"path": str})
def grep(env: CellEnv, pattern: str, *, path: str = ".") -> str:
    """Search text files under :path (default the workspace) for a Python regex."""
    regex = _compile(pattern)
    real = resolve_path(env, path, must_exist=True, verb="grep")
    lines: list[str] = []
    skipped = 0
    for file, shown in _grep_files(env, real):
        if _size(file) > MAX_GREP_FILE:
            skipped += 1
            continue
        if _grep_file(file, shown, regex, lines):
            lines.append(f"[grep cut at {MAX_MATCHES} matches; narrow PATTERN or :path]")
            break
    if skipped:
        lines.append(f"[skipped {skipped} files over {MAX_GREP_FILE // 2**20} MiB]")
    if not lines:
        return f";; no matches for {pattern} in {display(env, real)}"
    return "\n".join(lines) + "\n"


def _grep_files(env: CellEnv, real: Path) -> Iterator[tuple[Path, str]]:
    """The files grep reads, with the names it shows; symlinks leading out are skipped."""
    if real.is_file():
        yield real, display(env, real)
        return
    base = display(env, real)
    for entry, rel, is_dir in _walk(real):
        if is_dir or (entry.is_symlink() and not inside(env, Path(os.path.realpath(entry.path)))):
            continue
        if entry.is_file():
            yield Path(entry.path), _join(base, rel)


def _grep_file(file: Path, shown: str, regex: re.Pattern[str], lines: list[str]) -> bool:
    """Append the file's matching lines; True once more than MAX_MATCHES were found."""
    try:
        data = file.read_bytes()
    except OSError:
        return False  # unreadable files are skipped, as grep -s would
    if _is_binary(data):
        return False
    for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
        if regex.search(line):
            if len(lines) == MAX_MATCHES:
                return True
            text = line.rstrip("\r")
            if len(text) > MAX_GREP_LINE:
                text = text[:MAX_GREP_LINE] + "…"
            lines.append(f"{shown}:{number}:{text}")
    return False


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0  # reading it will fail too, and be skipped there


def _walk(top: Path) -> Iterator[tuple[os.DirEntry[str], str, bool]]:
    """Entries under top in sorted tree order, with paths relative to top; skips .git.

    Symlinked folders are listed but not entered, so a walk never leaves the root.
    """
    stack = [iter(_entries(str(top)))]
    prefix = len(str(top)) + 1
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        is_dir = _is_dir(entry)
        yield entry, entry.path[prefix:], is_dir
        if is_dir and not entry.is_symlink():
            stack.append(iter(_entries(entry.path)))


def _entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return sorted((e for e in it if e.name != ".git"), key=lambda e: e.name)
    except OSError:
        return []  # an unreadable folder is left out rather than failing the listing


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _join(base: str, rel: str) -> str:
    return rel if base == "." else f"{base}/{rel}"


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise CellError(f"grep: bad regular expression {_q(pattern)}: {e}") from None


def _file_bytes(real: Path, verb_name: str, path: str) -> bytes:
    if real.is_dir():
        raise CellError(f"{verb_name}: {_q(path)} is a directory; use (list-files {_q(path)})")
    return real.read_bytes()


def _is_binary(data: bytes) -> bool:
    # The same test git and grep use: a NUL byte near the start.
    return b"\0" in data[:_SNIFF]


def _line_range(text: str, first: int | None, last: int | None, path: str) -> str:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    total = len(lines)
    first = 1 if first is None else first
    last = total if last is None else last
    if first < 1:
        raise CellError(f"read-file: :from must be 1 or more (got {first})")
    if first > total:
        raise CellError(f"read-file: :from {first} is past the end of {_q(path)} ({total} lines)")
    if last < first:
        raise CellError(f"read-file: :to must be at least :from {first} (got {last})")
    last = min(last, total)
    body = "\n".join(lines[first - 1 : last])
    return f";; lines {first}–{last} of {total}\n{body}\n"


def _only_occurrence(text: str, old: str, shown: str) -> int:
    at = text.find(old)
    if at < 0:
        raise CellError(f"edit-file: OLD not found in {shown}")
    count, nxt = 1, text.find(old, at + 1)
    while nxt >= 0 and count < 1000:
        count, nxt = count + 1, text.find(old, nxt + 1)
    if count > 1:
        raise CellError(f"edit-file: OLD occurs {count} times in {shown}; give more context")
    return at


def _encode(text: str, verb_name: str, what: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        raise CellError(
            f"{verb_name}: {what} holds a lone surrogate at position {e.start}; "
            "it cannot be written as UTF-8"
        ) from None


def _approve_write(env: CellEnv, real: Path) -> None:
    shown = display(env, real)
    if not env.approve("write", shown):
        raise CellError(f"write to {shown} not approved")


def _record(env: CellEnv, real: Path, before: bytes | None, after: bytes) -> None:
    # The home's own files (the context export) are never tracked by checkpoints.
    if not in_context_dir(env, real):
        env.changes.append(FileChange(str(real), before, after))


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


VERBS = (read_file, write_file, edit_file, list_files, grep)
