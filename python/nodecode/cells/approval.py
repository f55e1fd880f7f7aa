"""What a write or a command asks the person: the request, its diff, the answer.

A verb calls ``ask`` before it writes or runs anything. The env's ``review``
(the agent's, which the CLI and the Neovim host answer) sees the whole
request, a write's unified diff (and its hunks) and a command's working
directory; without one, the plain ``approve(kind, detail)`` answers. A person
may refuse with a reason (``Refused``): the reason ends the call's error
result, so the agent learns why. A write may also be answered hunk by hunk
(``Picked``, from Neovim's approval window): the verb then writes only the
hunks taken (``cells.hunks``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodecode.cells import hunks
from nodecode.cells.env import CellEnv
from nodecode.errors import CellError, UserError

MAX_DIFF_LINES = 5000  # a diff longer than this is cut (the person still sees its start)


class Refused(Exception):  # noqa: N818 -- an answer, not a failure
    """Raised by a reviewer: the person said no, and why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Picked:
    """A write answered hunk by hunk: the person's choice for each hunk they chose."""

    choices: tuple[hunks.Choice, ...]

    @classmethod
    def from_lua(cls, value: Any) -> Picked:
        """The approval window's list of {n, take, reason?, lines?}; UserError
        naming the first entry that is not one."""
        if not isinstance(value, list):
            raise UserError(f"approval: hunks must be a list (got {type(value).__name__})")
        return cls(tuple(_choice(i, v) for i, v in enumerate(value, 1)))


def _choice(index: int, v: Any) -> hunks.Choice:
    lines = v.get("lines") if isinstance(v, dict) else None
    ok = (
        isinstance(v, dict)
        and isinstance(v.get("n"), int)
        and (lines is None or (isinstance(lines, list) and all(isinstance(x, str) for x in lines)))
    )
    if not ok:
        raise UserError(
            f"approval: hunks[{index}] must be {{n = number, take = boolean, reason?, lines?}} "
            f"(got {v!r:.80})"
        )
    return hunks.Choice(
        int(v["n"]),
        bool(v.get("take")),
        str(v.get("reason") or ""),
        None if lines is None else tuple(lines),
    )


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
    shown_hunks: tuple[dict[str, Any], ...] | None = None
    # Names an ``auto_approve`` entry may give to allow it without asking, besides
    # ``kind`` (an MCP call: "mcp", "mcp:SERVER", "mcp:SERVER/TOOL").
    scope: tuple[str, ...] = ()

    @property
    def diff(self) -> str:
        if self.shown_diff is not None:
            return self.shown_diff
        return self._shown[0]

    @property
    def hunks(self) -> tuple[dict[str, Any], ...]:
        """The write's hunks as the approval window shows them: {n, at (the 1-based
        diff line of its @@), lines (its proposed lines), editable}; those past a
        cut diff are left out."""
        if self.shown_hunks is not None:
            return self.shown_hunks
        return self._shown[1]

    @functools.cached_property
    def _shown(self) -> tuple[str, tuple[dict[str, Any], ...]]:
        if self.change is None:
            return "", ()
        return unified(self.detail, *self.change)

    def redacted(self, redact: Callable[[str], str]) -> Approval:
        """The request as the person may see it: every text through ``redact``; a
        hunk whose proposed lines held a secret cannot be edited (its text is not
        what would be written)."""
        shown = []
        for h in self.hunks:
            lines = [redact(x) for x in h["lines"]]
            shown.append({**h, "lines": lines, "editable": h["editable"] and lines == h["lines"]})
        return Approval(
            self.kind,
            redact(self.detail),
            redact(self.cwd),
            shown_diff=redact(self.diff),
            shown_hunks=tuple(shown),
            scope=self.scope,
        )


def unified(
    shown: str, before: bytes | None, after: bytes
) -> tuple[str, tuple[dict[str, Any], ...]]:
    """The unified diff of a write of ``shown``, cut at MAX_DIFF_LINES lines, and
    the hunks it shows (none for a binary file)."""
    old, new = _text(before), _text(after)
    if old is None or new is None:
        size = len(after)
        return f"Binary file {shown}: {len(before or b'')} → {size} bytes", ()
    ch = hunks.change(old, new)
    lines, at = hunks.unified(shown, before is None, ch)
    shown_hunks = tuple(
        _hunk(h.number, i + 1, hunks.proposed(ch, h))
        for h, i in zip(ch.hunks, at, strict=True)
        if i < MAX_DIFF_LINES
    )
    lines = [_valid(x) for x in lines]
    if len(lines) > MAX_DIFF_LINES:
        more = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"[diff cut: {more} more lines]"]
    return "\n".join(lines), shown_hunks


def _hunk(number: int, at: int, lines: list[str]) -> dict[str, Any]:
    shown = [_valid(x) for x in lines]
    return {"n": number, "at": at, "lines": shown, "editable": shown == lines}


def _valid(line: str) -> str:
    """A line as it can be shown: bytes that were not UTF-8 as U+FFFD."""
    return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _text(data: bytes | None) -> str | None:
    """``data`` as text ('' for an absent file), None when it looks binary."""
    if data is None:
        return ""
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "surrogateescape")


def ask(env: CellEnv, request: Approval, refused: str) -> Picked | None:
    """Return when the person allows ``request`` (what they picked, when they
    answered a write hunk by hunk); else CellError ``refused`` (followed by
    their reason, when they gave one)."""
    try:
        if env.review is not None:
            allowed = env.review(request)
        else:
            allowed = env.approve(request.kind, request.detail)
    except Refused as no:
        reason = " ".join(no.reason.split())
        raise CellError(f"{refused}: {reason}" if reason else refused) from None
    if isinstance(allowed, Picked):
        return allowed
    if not allowed:
        raise CellError(refused)
    return None
