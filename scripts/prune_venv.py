"""Remove from this Python's environment what nodecode no longer needs: every
distribution outside the requirements of ``nodecode`` and of the extras named
on the command line (walked through their own requirements). Run by ``make
install`` with the .venv's Python, so a plugin manager's update of an older
build (which installed the test tools) leaves the runtime dependencies only.

Usage: prune_venv.py [EXTRA ...]   (the extras ``make test`` / ``make demo`` added)
"""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys

from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

KEEP = {"pip", "setuptools", "wheel"}  # the environment's own tools


def needed(root: str, extras: set[str]) -> set[str]:
    """The canonical names of ``root`` (with ``extras``) and all it requires."""
    seen: set[str] = set()
    walked: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, set[str]]] = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        if (key, frozenset(wanted)) in walked:
            continue
        walked.add((key, frozenset(wanted)))
        seen.add(key)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for line in dist.requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, set(req.extras)))
    return seen


def main(argv: list[str]) -> int:
    keep = needed("nodecode", set(argv)) | KEEP
    names = {d.metadata["Name"] for d in md.distributions() if d.metadata["Name"]}
    extra = sorted((n for n in names if canonicalize_name(n) not in keep), key=str.lower)
    if not extra:
        return 0
    print(f"make: removing what nodecode no longer needs: {', '.join(extra)}")
    cmd = [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *extra]
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
