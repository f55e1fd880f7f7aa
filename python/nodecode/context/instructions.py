"""Project instructions: the AGENTS.md files the system prompt carries, verbatim.

Which files, in order: the personal ``$NODECODE_HOME/AGENTS.md``; then, from
the outermost folder to the innermost, each folder from the repository root
(the nearest folder holding ``.git``) down to the session's cwd — or from the
home folder down, when the cwd is in no repository (the cwd alone when it is
outside the home folder too) — its ``AGENTS.md``, else its ``CLAUDE.md``;
then the files config.jsonc's ``"instructions"`` lists (relative to the cwd).
A file met twice is read once. Their text goes into every request's system
prompt, each under a line naming its path, so a change to one changes the
cached prefix from there on and takes effect at the next request.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nodecode.bounded import Bounded
from nodecode.errors import UserError

NAMES = ("AGENTS.md", "CLAUDE.md")  # the first a folder holds is read
HEADING = "# Project instructions"
INTRO = (
    "The person's instructions for this work, from these files, in order (a later file "
    "is nearer the work):"
)


@dataclass(frozen=True)
class Instruction:
    """One file of instructions: its path, how the prompt names it, its text
    (redacted) and the sha256 of that text."""

    path: Path
    shown: str
    text: str
    digest: str


def files(
    cwd: Path, home: Path, listed: Sequence[str], user_home: Path | None = None
) -> list[Path]:
    """The instruction files that exist, in the order the prompt carries them."""
    user_home = user_home if user_home is not None else Path.home()
    found: list[Path] = []
    personal = home / NAMES[0]
    if personal.is_file():
        found.append(personal)
    for folder in _folders(cwd, user_home):
        for name in NAMES:
            candidate = folder / name
            if candidate.is_file():
                found.append(candidate)
                break
    for k, entry in enumerate(listed):
        path = Path(os.path.expanduser(entry))
        path = path if path.is_absolute() else cwd / path
        if not path.is_file():
            raise UserError(
                f"config.jsonc: instructions[{k}] must name a file (found no file at {path})"
            )
        found.append(path)
    seen: set[Path] = set()
    out = []
    for path in found:
        real = path.resolve()
        if real not in seen:
            seen.add(real)
            out.append(path)
    return out


def _folders(cwd: Path, user_home: Path) -> list[Path]:
    """From the outermost folder read to the cwd: the repository root's, else the
    home folder's (or the cwd alone, outside both)."""
    cwd = cwd.absolute()
    chain = [cwd, *cwd.parents]
    root = next((f for f in chain if (f / ".git").exists()), None)
    if root is None:
        home = user_home.absolute()
        root = home if home == cwd or home in cwd.parents else cwd
    out = []
    for folder in chain:
        out.append(folder)
        if folder == root:
            break
    return out[::-1]


def read(
    paths: Sequence[Path], cwd: Path, redact: Callable[[str], str], user_home: Path | None = None
) -> list[Instruction]:
    """Each file's text, redacted, as the prompt carries it; a file that is not UTF-8
    is one UserError line naming it."""
    user_home = user_home if user_home is not None else Path.home()
    root = _folders(cwd, user_home)[0]
    return [_read(path, cwd, redact, user_home, root) for path in paths]


def _read(
    path: Path, cwd: Path, redact: Callable[[str], str], user_home: Path, root: Path
) -> Instruction:
    try:
        st = path.stat()
        stamp = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError as e:
        raise UserError(f"{path}: cannot read the instructions file ({e.strerror})") from None
    raw = _RAW.get(stamp)
    if raw is None:
        try:
            raw = _RAW.keep(stamp, path.read_bytes())
        except OSError as e:
            raise UserError(f"{path}: cannot read the instructions file ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path}: an instructions file must be UTF-8 (byte {e.start} is "
            f"{raw[e.start : e.start + 1]!r})"
        ) from None
    text = redact(text)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return Instruction(path, _shown(path, cwd, user_home, root), text, digest)


# Files' bytes by (path, inode, size, mtime): a request reads each again only when it changed.
_RAW = Bounded(4_000_000, weigh=len)


def _shown(path: Path, cwd: Path, user_home: Path, root: Path) -> str:
    """The path relative to the cwd when it lies under the folders searched (the
    repository, or the home folder), else ``~/…`` under the home folder, else whole."""
    absolute = path.absolute()
    if absolute.is_relative_to(root):
        return os.path.relpath(absolute, cwd.absolute())
    home = user_home.absolute()
    if absolute.is_relative_to(home):
        return "~/" + str(absolute.relative_to(home))
    return str(absolute)


def section(found: Sequence[Instruction]) -> str:
    """The system prompt's part holding the instructions ("" without any)."""
    if not found:
        return ""
    parts = [f"{HEADING}\n{INTRO}"]
    for item in found:
        parts.append(f"## {item.shown}\n{item.text.rstrip()}")
    return "\n\n".join(parts) + "\n"
