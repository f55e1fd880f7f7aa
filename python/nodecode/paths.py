"""Where nodecode keeps its files, and how it writes them (0700 dirs, 0600 files)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def home_dir(
    explicit: str | os.PathLike | None = None, environ: Mapping[str, str] = os.environ
) -> Path:
    """The nodecode home: explicit, else $NODECODE_HOME, else $XDG_DATA_HOME/nodecode."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    if environ.get("NODECODE_HOME"):
        return Path(environ["NODECODE_HOME"]).expanduser().absolute()
    data = environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data).absolute() / "nodecode"


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as 0700 directories. An existing directory
    keeps its mode: it may be the person's (``--home /tmp`` must not lock every
    other user out of /tmp)."""
    # mkdir(parents=True) gives the parents it creates the umask's mode, not ``mode``.
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for created in missing:
        os.chmod(created, 0o700)
    return path


def write_private(path: Path, data: bytes | str) -> None:
    """Write atomically (temp file + rename) with mode 0600, so a reader never
    sees half a file and a crash leaves the old content."""
    ensure_dir(path.parent)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
