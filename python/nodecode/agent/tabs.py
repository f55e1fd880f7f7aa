"""Which session each tabpage of a Neovim works in: a chat per tab (doc/design.md
Decisions, "A chat per tab"). Lua sends its tabpage's handle with every call;
the host keeps one pin per (home, store, tab). A tab's first call pins it to
the store's current session unless another tab of this Neovim works there,
when a call that opens a chat (an ask, the chat's history) starts a new
session and any other call is refused: a tab never takes another's session.
Imports nothing heavy: the host loads it at start-up."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodecode.errors import UserError

NO_CHAT = "this tab has no chat of its own yet (another tab works in {sid}): :Nodecode opens one"
HELD = "session {sid} is open in another tab's chat: go to that tab, or pick another session"


def tab_of(ctx: Any) -> int | None:
    """The tabpage handle a Lua ``ctx`` names (None: a caller of no tab, e.g. a test)."""
    tab = ctx.get("tab") if isinstance(ctx, dict) else None
    return int(tab) if isinstance(tab, int) and not isinstance(tab, bool) else None


class Pins:
    """The session of each tab, per (home, store). Thread-safe: the host's loop
    thread and its context worker both resolve."""

    def __init__(self) -> None:
        self._pins: dict[tuple[Path, str, int | None], str] = {}
        self._lock = threading.RLock()

    def resolve(
        self,
        where: tuple[Path, str],
        tab: int | None,
        find: Callable[[str | None], str],
        new: Callable[[], str],
        *,
        open_chat: bool,
    ) -> str:
        """The session of ``tab``: its pin (checked by ``find``), or else the one
        ``find(None)`` names (the store's current one) when no other tab holds
        it; else a ``new()`` one when ``open_chat``, else a UserError."""
        with self._lock:
            pinned = self._pins.get((*where, tab))
            sid = find(pinned)
            if pinned is None and self.holder(where, sid, tab) is not None:
                if not open_chat:
                    raise UserError(NO_CHAT.format(sid=sid))
                sid = new()
            self._pins[(*where, tab)] = sid
            return sid

    def pin(self, where: tuple[Path, str], tab: int | None, sid: str) -> None:
        """Make ``sid`` the session of ``tab``; refused while another tab holds it."""
        with self._lock:
            if self.holder(where, sid, tab) is not None:
                raise UserError(HELD.format(sid=sid))
            self._pins[(*where, tab)] = sid

    def holder(self, where: tuple[Path, str], sid: str, besides: int | None) -> int | None:
        """A tab other than ``besides`` whose session is ``sid`` (-1 for the tab None)."""
        with self._lock:
            for (home, store, tab), pinned in self._pins.items():
                if (home, store) == where and tab != besides and pinned == sid:
                    return -1 if tab is None else tab
        return None

    def others(self, where: tuple[Path, str], besides: int | None) -> dict[str, int]:
        """The sessions tabs other than ``besides`` work in: session → tab (-1: None)."""
        with self._lock:
            return {
                sid: -1 if tab is None else tab
                for (home, store, tab), sid in self._pins.items()
                if (home, store) == where and tab != besides
            }

    def forget(self, tab: int) -> list[str]:
        """Drop every pin of ``tab`` (it was closed); the sessions it worked in."""
        with self._lock:
            keys = [k for k in self._pins if k[2] == tab]
            return [self._pins.pop(k) for k in keys]
