"""The file verbs: read-file, write-file, edit-file, list-files, grep.

Every path goes through ``resolve_path``; writes ask for approval first and
record a FileChange with the exact bytes so checkpoints can undo them. A file
is then opened (read, written, created) beneath its root without following a
symlink (``nodecode.paths``): one swapped in after the check is refused.
Results name paths relative to the workspace (absolute in the context folder).
Only regular files are opened, never waiting on a FIFO or a device; a write
replaces the file, so it never reaches through a hard link; a read keeps to
MAX_OUTPUT; walks end at the env's time limit or the turn's stop. grep runs
ripgrep (``verbs.ripgrep``), killed at the same limit or stop.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nodecode.cells import approval, hunks
from nodecode.cells.env import MAX_OUTPUT, CellEnv, FileChange
from nodecode.cells.paths import beneath, display, in_context_dir, resolve_path
from nodecode.cells.registry import Family, verb
from nodecode.errors import CellError, WorkspaceEscape
from nodecode.paths import Swapped, open_beneath, replace_file
from nodecode.verbs import ripgrep

MAX_ENTRIES = 1000
MAX_MATCHES = 500
MAX_GREP_LINE = 400
MAX_GREP_FILE = 16 * 1024 * 1024
_SNIFF = 8192
_CHUNK = 64 * 1024  # lines passed over are read in pieces of this size at most
_CAP = f"the {MAX_OUTPUT // 2**20} MiB cap of a result"


@verb(
    "read-file", args=["path"], keywords={"from": int, "to": int}, metavars={"from": "L", "to": "L"}
)
def read_file(env: CellEnv, path: str, *, from_: int | None = None, to: int | None = None) -> str:
    """A file's text, optionally lines L..L.

    Whole, or lines :from to :to (1-based, inclusive), up to MAX_OUTPUT bytes."""
    first = 1 if from_ is None else from_
    if first < 1:
        raise CellError(f"read-file: :from must be 1 or more (got {first})")
    if to is not None and to < first:
        raise CellError(f"read-file: :to must be at least :from {first} (got {to})")
    real = resolve_path(env, path, must_exist=True, verb="read-file")
    clock = _Clock(env, "read-file", "read fewer lines with :from and :to")
    with _open_regular(env, real, "read-file", path) as f:
        size = os.fstat(f.fileno()).st_size
        if _is_binary(os.pread(f.fileno(), _SNIFF, 0)):
            raise CellError(f"read-file: {_q(path)} is a binary file ({size} bytes)")
        part = _read_lines(f, first, to, size, clock)
    if part.cut is not None:
        return _cut_read(part, path, to, size)
    if from_ is None and to is None:
        return part.text or f";; {display(env, real)} is empty"
    if part.last < first:
        raise CellError(
            f"read-file: :from {first} is past the end of {_q(path)} ({part.total} lines)"
        )
    return f";; lines {first}–{part.last} {_of(part, size)}\n{_ended(part.text)}"


@verb("write-file", args=["path", "text"])
def write_file(env: CellEnv, path: str, text: str) -> str:
    """Create or replace a file.

    Its parent folders are made; the write is approved first and recorded."""
    real = resolve_path(env, path, must_exist=False, verb="write-file")
    if real.is_dir():
        raise CellError(f"write-file: {_q(path)} is a directory")
    _refuse_special(real, "write-file", path, "a regular file")
    data = _encode(text, "write-file", "TEXT")
    before = _bytes_if_any(env, real, "write-file", path)
    data, picked = _approve_write(env, real, before, data)
    _replace(env, real, data, "write-file", path)
    _record(env, real, before, data)
    return f"wrote {display(env, real)} ({len(data)} bytes)" + picked


@verb("edit-file", args=["path", "old", "new"])
def edit_file(env: CellEnv, path: str, old: str, new: str) -> str:
    """Replace OLD, which must occur exactly once, by NEW."""
    real = resolve_path(env, path, must_exist=True, verb="edit-file")
    data = _file_bytes(env, real, "edit-file", path)
    if _is_binary(data):
        raise CellError(f"edit-file: {_q(path)} is a binary file ({len(data)} bytes)")
    if not old:
        raise CellError("edit-file: OLD is empty; give the exact text to replace")
    # surrogateescape keeps bytes that are not UTF-8 exactly as they were.
    text = data.decode("utf-8", "surrogateescape")
    at = _only_occurrence(text, old, display(env, real))
    after = _encode(text[:at] + new + text[at + len(old) :], "edit-file", "NEW")
    after, picked = _approve_write(env, real, data, after)
    _replace(env, real, after, "edit-file", path)
    _record(env, real, data, after)
    if picked:
        return f"edited {display(env, real)}" + picked
    first = text.count("\n", 0, at) + 1
    last = max(first, first + new.count("\n") - new.endswith("\n"))
    where = f"line {first}" if first == last else f"lines {first}–{last}"
    return f"edited {display(env, real)}: replaced 1 occurrence ({where})"


@verb("list-files", optional=["dir"], keywords={"glob": str})
def list_files(env: CellEnv, directory: str = ".", *, glob: str | None = None) -> str:
    """Files under DIR.

    Files and folders under DIR (default the workspace), folders ending in /."""
    real = resolve_path(env, directory, must_exist=True, verb="list-files")
    _refuse_special(real, "list-files", directory, "a folder")
    if not real.is_dir():
        raise CellError(f"list-files: {_q(directory)} is a file; use (read-file {_q(directory)})")
    base = display(env, real)
    lines: list[str] = []
    clock = _Clock(env, "list-files", "narrow it with a folder or :glob")
    for entry, rel, is_dir in _walk(real, clock):
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
    """Rust regex search, path:line:text; skips gitignored files.

    Text files under :path (default the workspace), searched by ripgrep: see
    ``verbs.ripgrep`` for what else it skips."""
    real = resolve_path(env, path, must_exist=True, verb="grep")
    _refuse_special(real, "grep", path, "a file or folder")
    clock = _Clock(env, "grep", "narrow PATTERN or :path")
    clock.check()
    found = _search(env, real, path, pattern, clock)
    base = display(env, real)
    lines = [_match(real, base, *match) for match in found.matches]
    if found.cut:
        lines.append(f"[grep cut at {MAX_MATCHES} matches; narrow PATTERN or :path]")
    if found.skipped:
        lines.append(f"[skipped {found.skipped} files over {MAX_GREP_FILE // 2**20} MiB]")
    if not lines:
        return f";; no matches for {pattern} in {base}"
    return "\n".join(lines) + "\n"


def _search(env: CellEnv, real: Path, path: str, pattern: str, clock: _Clock) -> ripgrep.Search:
    """rg's matches under a folder, or in a file when it is text and not too big
    (rg searches a file it is named whatever its size, and reports a binary one
    its own way); CellError at the time limit or a stop."""
    one_file = not real.is_dir()
    if one_file:
        with _open_regular(env, real, "grep", path) as f:
            if os.fstat(f.fileno()).st_size > MAX_GREP_FILE:
                return ripgrep.Search(skipped=1)
            if _is_binary(os.pread(f.fileno(), _SNIFF, 0)):
                return ripgrep.Search()
    found = ripgrep.search(
        pattern,
        real,
        text=one_file,
        max_matches=MAX_MATCHES,
        max_file=MAX_GREP_FILE,
        deadline=clock.deadline,
        cancel=env.cancel,
    )
    if found.ended in ("stopped", "time"):
        clock.check()
    return found


def _match(real: Path, base: str, path: bytes, number: bytes, text: bytes) -> str:
    """One match as grep shows it: the path as results name it, the line cut at
    MAX_GREP_LINE characters."""
    name = os.fsdecode(path)
    shown = base if name == str(real) else _join(base, os.path.relpath(name, real))
    line = text.decode("utf-8", "replace").rstrip("\r")
    if len(line) > MAX_GREP_LINE:
        line = line[:MAX_GREP_LINE] + "…"
    return f"{shown}:{number.decode('ascii', 'replace')}:{line}"


def _walk(top: Path, clock: _Clock) -> Iterator[tuple[os.DirEntry[str], str, bool]]:
    """Entries under top in sorted tree order, with paths relative to top; skips .git.

    Symlinked folders are listed but not entered, so a walk never leaves the root;
    it ends (CellError) at the verb's time limit or the turn's stop.
    """
    stack = [iter(_entries(str(top)))]
    prefix = len(str(top)) + 1
    while stack:
        clock.check()
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


def _file_bytes(env: CellEnv, real: Path, verb_name: str, path: str) -> bytes:
    with _open_regular(env, real, verb_name, path) as f:
        return f.read()


def _bytes_if_any(env: CellEnv, real: Path, verb_name: str, path: str) -> bytes | None:
    """The file's bytes, or None when there is no file yet."""
    try:
        return _file_bytes(env, real, verb_name, path)
    except FileNotFoundError:
        return None


def _replace(env: CellEnv, real: Path, data: bytes, verb_name: str, path: str) -> None:
    """Write the file beneath its root (its folders made), or WorkspaceEscape when a
    folder on its path became a symlink since the check."""
    root, rel = beneath(env, real)
    try:
        replace_file(root, rel, data, make_dirs=True)
    except Swapped:
        raise _swapped(verb_name, path, "nothing was written") from None


def _swapped(verb_name: str, path: str, what: str) -> WorkspaceEscape:
    return WorkspaceEscape(
        f"{verb_name}: {_q(path)} is now reached through a symlink, which may lead outside "
        f"the workspace (it changed after the path was checked); {what}"
    )


def _is_binary(data: bytes) -> bool:
    # The same test git and grep use: a NUL byte near the start.
    return b"\0" in data[:_SNIFF]


@dataclass(frozen=True)
class _Part:
    """What a read shows: lines ``first``–``last`` as bytes, and what it knows of the rest."""

    data: bytes
    first: int
    last: int  # the last line shown; first - 1 when none is
    total: int | None  # the file's lines, when known without reading far
    cut: str | None = None  # "lines": the cap fell between lines; "line": inside line first

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _read_lines(f: BinaryIO, first: int, last: int | None, size: int, clock: _Clock) -> _Part:
    """Lines first..last (to the end when None) streamed from f, at most MAX_OUTPUT bytes."""
    number = _skip(f, first - 1, clock)
    offset = f.tell()
    kept: list[bytes] = []
    room = MAX_OUTPUT
    while last is None or number < last:
        clock.check()
        line = f.readline(room + 1)
        if not line:  # the end: every line is counted
            return _Part(b"".join(kept), first, number, number)
        if len(line) > room:
            if not kept:
                return _Part(line[:room], first, first, None, "line")
            return _Part(
                b"".join(kept), first, number, _lines_after(f, offset, size, number), "lines"
            )
        kept.append(line)
        room -= len(line)
        offset += len(line)
        number += 1
    return _Part(b"".join(kept), first, number, _lines_after(f, offset, size, number))


def _skip(f: BinaryIO, count: int, clock: _Clock) -> int:
    """Pass over ``count`` lines without keeping them; how many there were (fewer at the end)."""
    done, open_line = 0, False
    while done < count:
        clock.check()
        chunk = f.readline(_CHUNK)  # a long line goes by in pieces
        if not chunk:
            return done + open_line  # a last line without a newline counts too
        open_line = not chunk.endswith(b"\n")
        done += not open_line
    return done


def _lines_after(f: BinaryIO, offset: int, size: int, shown: int) -> int | None:
    """The file's line count when the rest past ``offset`` is within the cap, else None."""
    if size - offset > MAX_OUTPUT:
        return None
    f.seek(offset)
    rest = f.read(MAX_OUTPUT + 1)
    if len(rest) > MAX_OUTPUT:
        return None  # it grew meanwhile
    return shown + rest.count(b"\n") + (1 if rest and not rest.endswith(b"\n") else 0)


def _of(part: _Part, size: int) -> str:
    return f"of {part.total}" if part.total is not None else f"of a {size}-byte file"


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _cut_read(part: _Part, path: str, to: int | None, size: int) -> str:
    """A read cut at the cap: a header saying so and how to read on, then the text."""
    if part.cut == "line":
        head = f"line {part.first} is longer; its first {len(part.data)} bytes are shown"
    else:
        more = f" :to {to}" if to is not None else ""
        head = (
            f"lines {part.first}–{part.last} {_of(part, size)}; "
            f"read on with (read-file {_q(path)} :from {part.last + 1}{more})"
        )
    return f";; cut at {_CAP}: {head}\n{_ended(part.text)}"


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


def _approve_write(
    env: CellEnv, real: Path, before: bytes | None, after: bytes
) -> tuple[bytes, str]:
    """The bytes to write once the person allows this write (they see its diff),
    and what the result adds when they took only some hunks; or CellError."""
    shown = display(env, real)
    request = approval.Approval("write", shown, change=(before, after))
    refused = f"write to {shown} not approved"
    picked = approval.ask(env, request, refused)
    if picked is None:
        return after, ""
    offered = {h["n"] for h in request.hunks}  # a hunk past a cut diff was never shown
    choices = [c for c in picked.choices if c.number in offered]
    return hunks.picked(before, after, choices, refused)


def _record(env: CellEnv, real: Path, before: bytes | None, after: bytes) -> None:
    # The home's own files (the context export) are never tracked by checkpoints.
    if not in_context_dir(env, real):
        env.changes.append(FileChange(str(real), before, after))


# -- what may be opened ------------------------------------------------------------

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _special(mode: int) -> str | None:
    """What a file of this mode is when it is neither a regular file nor a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse_special(real: Path, verb_name: str, path: str, wanted: str) -> None:
    """CellError when the path is a FIFO, a device or a socket (looked at, never opened)."""
    try:
        what = _special(os.stat(real).st_mode)
    except FileNotFoundError:
        return
    if what is not None:
        raise CellError(f"{verb_name}: {_q(path)} is {what}, not {wanted}")


def _open_regular(env: CellEnv, real: Path, verb_name: str, path: str) -> BinaryIO:
    """A regular file opened to read; a folder, FIFO, device or socket is refused.

    Opened beneath its root without following a symlink, without blocking (a
    FIFO with no writer would wait forever) and checked on the open descriptor,
    so a file swapped after the first look is caught too.
    """
    if real.is_dir():
        raise CellError(f"{verb_name}: {_q(path)} is a directory; use (list-files {_q(path)})")
    _refuse_special(real, verb_name, path, "a regular file")
    root, rel = beneath(env, real)
    try:
        fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except Swapped:
        raise _swapped(verb_name, path, "nothing was read") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else _special(mode)
            raise CellError(f"{verb_name}: {_q(path)} is {what}, not a regular file")
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# -- time limits and stops ----------------------------------------------------------


class _Clock:
    """A verb's time limit and the turn's stop, checked by its long loops."""

    def __init__(self, env: CellEnv, verb_name: str, advice: str):
        self.cancel, self.limit, self.verb, self.advice = (
            env.cancel,
            env.time_limit,
            verb_name,
            advice,
        )
        self.deadline = time.monotonic() + env.time_limit

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """CellError once the turn is stopped or the time is up."""
        if self.cancel.is_set():
            raise CellError(f"{self.verb}: stopped by the person")
        if time.monotonic() >= self.deadline:
            raise CellError(
                f"{self.verb}: gave up after {self.limit:g} s (its time limit); {self.advice}"
            )


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


FAMILY = Family(
    "files",
    (read_file, write_file, edit_file, list_files, grep),
    guidance="""\
Paths are relative to the workspace root and may not leave it (your context folder is the
one exception). Writes may need the person's approval.""",
)
