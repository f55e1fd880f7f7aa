"""grep's search, run as a child process (``python -I -S grep_child.py``).

A pattern that backtracks without end holds its thread inside ``re`` and no
signal handler runs until it returns; a child process can still be killed, at
the verb's time limit or the turn's stop (see ``files.grep``). It reads one
JSON job on stdin: ``{"pattern", "files": [[path, shown], ...], "max_matches",
"max_line", "max_file", "cpu"}`` and writes one line per event on stdout:
``F i`` (searching file i now), ``M text`` (a match as grep shows it), ``S``
(a file skipped for its size), ``C`` (cut at max_matches), ``E`` (done).

It imports only the standard library, and limits its own CPU time so that it
ends even when its parent is killed.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import stat
import sys
from typing import BinaryIO

_SNIFF = 8192  # as files._is_binary: a NUL byte near the start means binary
_TOO_BIG = object()  # read's answer for a file over max_file


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C at the terminal ends it at once
    job = json.loads(sys.stdin.buffer.read())
    cpu = int(job["cpu"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    out = sys.stdout.buffer
    search(re.compile(job["pattern"]), job, out)
    out.write(b"E\n")
    out.flush()
    return 0


def search(compiled: re.Pattern[str], job: dict, out: BinaryIO) -> None:
    """Write the matches of every file of the job, up to max_matches."""
    found = 0
    for index, (path, shown) in enumerate(job["files"]):
        out.write(b"F %d\n" % index)
        out.flush()  # the parent names this file if the search never ends
        data = read(path, job["max_file"])
        if data is _TOO_BIG:
            out.write(b"S\n")
            continue
        if not isinstance(data, bytes):
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
            if not compiled.search(line):
                continue
            if found == job["max_matches"]:
                out.write(b"C\n")
                return
            found += 1
            text = line.rstrip("\r")
            if len(text) > job["max_line"]:
                text = text[: job["max_line"]] + "…"
            out.write(f"M {shown}:{number}:{text}\n".encode("utf-8", "surrogateescape"))


def read(path: str, limit: int) -> bytes | object | None:
    """A regular text file's bytes; _TOO_BIG over ``limit``; None for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None  # unreadable files are skipped, as grep -s would
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > limit:
            return _TOO_BIG
        data = f.read(limit + 1)
    if len(data) > limit:
        return _TOO_BIG
    return None if b"\0" in data[:_SNIFF] else data


if __name__ == "__main__":
    sys.exit(main())
