"""What a write or a command asks the person: the request, its diff, the answer.

A verb calls ``ask`` before it writes or runs anything. The env's ``review``
(the agent's, which the CLI and the Neovim host answer) sees the whole
request, a write's unified diff and a command's working directory; without
one, the plain ``approve(kind, detail)`` answers. A person may refuse with a
reason (``Refused``): the reason ends the call's error result, so the agent
learns why.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from nodecode.cells.env import CellEnv
from nodecode.errors import CellError

MAX_DIFF_LINES = 5000  # a diff longer than this is cut (the person still sees its start)


class Refused(Exception):  # noqa: N818 -- an answer, not a failure
    """Raised by a reviewer: the person said no, and why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Approval:
    """One request to write (``detail`` the path shown) or run (``detail`` the command).

    ``change`` holds a write's bytes before (None: a new file) and after; the
    diff is made from them only when someone reads it (an auto-approved write
    never pays for it). ``shown_diff`` is a diff already made (and redacted).
    """

    kind: str
    detail: str
    cwd: str = ""
    change: tuple[bytes | None, bytes] | None = None
    shown_diff: str | None = None
    # Names an ``auto_approve`` entry may give to allow it without asking, besides
    # ``kind`` (an MCP call: "mcp", "mcp:SERVER", "mcp:SERVER/TOOL").
    scope: tuple[str, ...] = ()

    @property
    def diff(self) -> str:
        if self.shown_diff is not None:
            return self.shown_diff
        if self.change is None:
            return ""
        return unified(self.detail, *self.change)

    def redacted(self, redact: Callable[[str], str]) -> Approval:
        """The request as the person may see it: every text through ``redact``."""
        return Approval(
            self.kind,
            redact(self.detail),
            redact(self.cwd),
            shown_diff=redact(self.diff),
            scope=self.scope,
        )


def unified(shown: str, before: bytes | None, after: bytes) -> str:
    """The unified diff of a write of ``shown``, cut at MAX_DIFF_LINES lines."""
    old, new = _text(before), _text(after)
    if old is None or new is None:
        size = len(after)
        return f"Binary file {shown}: {len(before or b'')} → {size} bytes"
    lines = list(
        difflib.unified_diff(
            old.splitlines(),
            new.splitlines(),
            fromfile="/dev/null" if before is None else f"a/{shown}",
            tofile=f"b/{shown}",
            lineterm="",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        more = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"[diff cut: {more} more lines]"]
    return "\n".join(lines)


def _text(data: bytes | None) -> str | None:
    """``data`` as text ('' for an absent file), None when it looks binary."""
    if data is None:
        return ""
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace")


def ask(env: CellEnv, request: Approval, refused: str) -> None:
    """Return when the person allows ``request``; else CellError ``refused``
    (followed by their reason, when they gave one)."""
    try:
        if env.review is not None:
            allowed = env.review(request)
        else:
            allowed = env.approve(request.kind, request.detail)
    except Refused as no:
        reason = " ".join(no.reason.split())
        raise CellError(f"{refused}: {reason}" if reason else refused) from None
    if not allowed:
        raise CellError(refused)
