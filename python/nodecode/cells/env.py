"""What a cell runs against: the workspace, its verbs, approvals, redaction, and the
changes it made."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodecode.cells.registry import Verb

MAX_OUTPUT = 8 * 1024 * 1024
"""The most of one verb's output the log keeps (shell output, a file read); the
agent is told what lies beyond it."""


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

    ``verbs`` is the table the cell may call, the caller's choice (the
    agent's is ``nodecode.verbs.table.VERBS``, in a ``nodecode.verbs.env.SessionEnv``,
    which also names the session). ``approve(kind, detail)`` is asked before
    every write ("write", the path) and every command ("shell", the command)
    and returns True to allow;
    ``review``, when set, is asked instead with the whole request (a
    ``cells.approval.Approval``: a write's diff, a command's directory),
    may raise ``cells.approval.Refused`` with the person's reason, and may
    answer a write with the hunks the person picked (``cells.approval.Picked``).
    ``env_remove`` names the variables (provider keys) removed from a
    command's environment. ``on_shell(env, phase)`` runs before and after
    each command (the checkpoints' shadow store). ``time_limit`` is how
    long any other verb may run (shell has ``shell_timeout``); ``cancel`` is
    the turn's stop (Ctrl-C, :NodecodeStop), which ends a running verb.
    ``changes`` and ``shell_untracked`` are what the cell did: files written,
    and why shell changes could not be tracked. ``shell_ended`` is a file
    touched when a command is killed because nodecode itself died (its mtime:
    the moment).
    """

    workspace: Path
    verbs: Mapping[str, Verb]
    context_dir: Path | None = None
    approve: Callable[[str, str], bool] = deny
    review: Callable[[Any], Any] | None = None  # bool, or a Picked
    redact: Callable[[str], str] = _same
    shell_timeout: float = 120
    time_limit: float = 30
    cancel: threading.Event = field(default_factory=threading.Event)
    env_remove: set[str] = field(default_factory=set)
    on_shell: Callable[[CellEnv, str], None] | None = None
    changes: list[FileChange] = field(default_factory=list)
    shell_untracked: str | None = None
    shell_ended: Path | None = None

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace)
        if self.context_dir is not None:
            self.context_dir = Path(self.context_dir)
