"""What a cell runs against: the workspace, approvals, redaction, and the changes it made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FileChange:
    """One file written by a file verb: absolute path, bytes before and after (None = absent).

    Checkpoints restore files from these, so the content is exact, not decoded text.
    """

    path: str
    before: bytes | None
    after: bytes | None


def deny(kind: str, detail: str) -> bool:
    """The default approval: nothing is written or run unless the host says so."""
    return False


def _same(text: str) -> str:
    return text


@dataclass
class CellEnv:
    """The world a cell sees; the core builds one per session (or per call).

    ``approve(kind, detail)`` is asked before every write ("write", the path)
    and every command ("shell", the command) and returns True to allow.
    ``env_remove`` names the variables (provider keys) removed from a
    command's environment; ``extra`` carries the core's session/store handle
    for the verbs of other modules (context, recall).
    """

    workspace: Path
    context_dir: Path | None = None
    approve: Callable[[str, str], bool] = deny
    redact: Callable[[str], str] = _same
    shell_timeout: float = 120
    env_remove: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)
    changes: list[FileChange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace)
        if self.context_dir is not None:
            self.context_dir = Path(self.context_dir)
