"""Where nodecode keeps its files, and how it writes them (0700 dirs, 0600 files)."""

from __future__ import annotations

import errno
import functools
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


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
    if path.is_dir():  # the common case: one stat, not one per parent
        return path
    # mkdir(parents=True) gives the parents it creates the umask's mode, not ``mode``.
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    for created in missing:
        os.chmod(created, 0o700)
    return path


def write_private(path: Path, data: bytes | str) -> None:
    """Write atomically (temp file + rename) with mode 0600, so a reader never
    sees half a file and a crash leaves the old content."""
    tmp = _private_temp(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def write_private_over(
    path: Path, data: bytes | str, known: Callable[[Path, os.stat_result], bool]
) -> bool:
    """``write_private``, but only over a file ``known`` (given its path and stat)
    says the caller has: else nothing is written and False returned. Looked at
    just before the rename; and where the kernel swaps two names at once
    (``exchange``), the very file displaced is looked at again and put back if it
    changed in between (a save landing in that instant)."""
    tmp = _private_temp(path, data)
    try:
        before = _lstat(path)
        if before is not None and not known(path, before):
            return False
        if before is None or not exchange(tmp, path):
            os.replace(tmp, path)
            return True
        after = os.lstat(tmp)  # what was at ``path`` when the names swapped
        if _same_content(before, after) or known(Path(tmp), after):
            return True
        exchange(tmp, path)  # a save landed in between: it goes back
        return False
    finally:
        _unlink(tmp)


def _private_temp(path: Path, data: bytes | str) -> str:
    """A temp file beside ``path`` holding ``data``, 0600, synced to disk."""
    ensure_dir(path.parent)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _same_content(a: os.stat_result, b: os.stat_result) -> bool:
    """The same file, not written since (a rename changes only its ctime)."""
    return (a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_ino, b.st_size, b.st_mtime_ns)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2() -> Any:
    """libc's renameat2, or None (not Linux, or a libc before 2.28)."""
    try:
        import ctypes  # imported late: most commands never swap a file

        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError, ImportError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap the files at two paths in one step (Linux ``renameat2`` with
    RENAME_EXCHANGE). False, with nothing changed, where that cannot be done: no
    such call, a filesystem without it, or either path absent."""
    fn = _renameat2()
    if fn is None:
        return False
    import ctypes

    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOENT, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(b))


class Swapped(OSError):
    """A folder or file on a path that was checked to lie inside its root is now a
    symlink: it was swapped in after the check, and nothing was read or written."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(errno.ELOOP, "now reached through a symlink", os.fspath(path))


# Every workspace file is opened beneath its root, one component at a time,
# never following a symlink: a path is checked (``cells.paths``) with its
# symlinks resolved, so a symlink met here was swapped in after the check,
# and the open fails instead of leaving the root.
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir(root: str | os.PathLike, parts: tuple[str, ...], *, make: bool = False) -> int:
    """A descriptor of the folder ``root/parts…``, reached without following a
    symlink below ``root`` (the caller closes it); ``make`` creates missing folders."""
    fd = os.open(root, _DIR & ~os.O_NOFOLLOW)  # the root itself may be a symlink
    for at, part in enumerate(parts):
        try:
            child = _enter(fd, part, make, Path(root, *parts[: at + 1]))
        finally:
            os.close(fd)
        fd = child
    return fd


def _enter(fd: int, part: str, make: bool, where: Path) -> int:
    """The descriptor of folder ``part`` in folder ``fd``."""
    try:
        return os.open(part, _DIR, dir_fd=fd)
    except FileNotFoundError:
        if not make:
            raise
    except OSError as e:
        raise _swapped_or(e, fd, part, where) from None
    try:
        os.mkdir(part, 0o777, dir_fd=fd)
    except FileExistsError:
        pass  # made meanwhile: opened, and checked, below
    try:
        return os.open(part, _DIR, dir_fd=fd)
    except OSError as e:
        raise _swapped_or(e, fd, part, where) from None


def _swapped_or(error: OSError, fd: int, name: str, where: Path) -> OSError:
    """``Swapped`` when ``name`` in ``fd`` is a symlink, else ``error`` (a file where
    a folder was expected stays an ordinary error)."""
    if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return error
    try:
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            return Swapped(where)
    except OSError:
        pass
    return error


def open_beneath(root: str | os.PathLike, rel: str | os.PathLike, flags: int) -> int:
    """``root/rel`` opened with ``flags``, no component below ``root`` followed if a
    symlink (``Swapped``); the caller closes the descriptor."""
    *parents, name = Path(rel).parts
    folder = open_dir(root, tuple(parents))
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError as e:
        raise _swapped_or(e, folder, name, Path(root, rel)) from None
    finally:
        os.close(folder)


def replace_file(
    root: str | os.PathLike, rel: str | os.PathLike, data: bytes, *, make_dirs: bool = False
) -> None:
    """Write the workspace file ``root/rel`` as a new inode (a temp file beside it,
    then a rename), beneath ``root`` as ``open_beneath`` opens (``make_dirs``:
    missing folders are created).

    A hard link to the old file, perhaps outside the workspace, keeps its
    content: a write never reaches through it. An existing file keeps its
    permission bits (set-id bits dropped, as a write would clear them) and,
    where allowed, its owner; a new one is 0644 whatever the umask. A file
    this process may not write stays refused, as writing it in place would be.
    """
    *parents, name = Path(rel).parts
    folder = open_dir(root, tuple(parents), make=make_dirs)
    try:
        _replace_in(folder, name, data, Path(root, rel))
    finally:
        os.close(folder)


def unlink_beneath(root: str | os.PathLike, rel: str | os.PathLike) -> None:
    """Delete ``root/rel`` (a symlink there is deleted, never followed)."""
    *parents, name = Path(rel).parts
    folder = open_dir(root, tuple(parents))
    try:
        os.unlink(name, dir_fd=folder)
    finally:
        os.close(folder)


def _replace_in(folder: int, name: str, data: bytes, where: Path) -> None:
    try:
        old = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISLNK(old.st_mode):
        raise Swapped(where)
    if old is not None and not os.access(name, os.W_OK, dir_fd=folder):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(where))
    fd, tmp = _temp_in(folder, name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o644 if old is None else old.st_mode & 0o777)
            if old is not None and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                _keep_owner(f.fileno(), old)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder)
        except FileNotFoundError:
            pass
        raise


def _temp_in(folder: int, name: str) -> tuple[int, str]:
    """A new private file ``.NAME.XXXXXXXX.tmp`` in ``folder``: (its descriptor, its name)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, flags, 0o600, dir_fd=folder), tmp
        except FileExistsError:
            continue


def _keep_owner(fd: int, old: os.stat_result) -> None:
    try:
        os.fchown(fd, old.st_uid, old.st_gid)
    except PermissionError:
        pass  # only root may give a file away; it stays the writer's, like a new file
