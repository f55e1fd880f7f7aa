"""Where a Neovim works (``Place``) and which session each of its tab pages
works in: a chat per tab (doc/design.md Decisions, "A chat per tab"). Lua
sends the place and its tabpage's handle with every call; the host keeps
one pin per (home, store, tab). A tab's first call pins it to
the store's current session unless another tab's chat works there, when a
call that opens a chat (an ask, the chat's history) starts a new session and
any other call is refused: a tab never takes another's session. A tab that
only looked (no chat yet) holds nothing: others may look at, or open a chat
on, the same session.
Imports nothing heavy: the host loads it at start-up."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodecode.errors import UserError

NO_CHAT = "this tab has no chat of its own yet (another tab works in {sid}): :Nodecode opens one"
HELD = "session {sid} is open in another tab's chat: go to that tab, or pick another session"


@dataclass(frozen=True)
class Place:
    """Where a Neovim works: the nodecode home, the store and the workspace."""

    home: Path
    store: str
    cwd: Path

    @classmethod
    def from_lua(cls, ctx: Any) -> Place:
        """Decode the ``{home?, store?, cwd?}`` table Lua sends with each call."""
        from nodecode.paths import home_dir

        ctx = ctx if isinstance(ctx, dict) else {}
        home = ctx.get("home") or None
        cwd = ctx.get("cwd") or None
        return cls(
            home=home_dir(home),
            store=str(ctx.get("store") or "default"),
            cwd=Path(cwd).expanduser().absolute() if cwd else Path.cwd(),
        )


def tab_of(ctx: Any) -> int | None:
    """The tabpage handle a Lua ``ctx`` names (None: a caller of no tab, e.g. a test)."""
    tab = ctx.get("tab") if isinstance(ctx, dict) else None
    return int(tab) if isinstance(tab, int) and not isinstance(tab, bool) else None


class Pins:
    """The session of each tab, per (home, store). Thread-safe: the host's loop
    thread and its context worker both resolve."""

    def __init__(self) -> None:
        self._pins: dict[tuple[Path, str, int | None], str] = {}
        # The tabs that opened a chat: only they hold their session. A tab that only
        # looked (a statusline, :NodecodeContext before any chat) shares it.
        self._chats: set[tuple[Path, str, int | None]] = set()
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
        ``find`` names instead (the store's current one) when no other tab's chat
        holds it; else a ``new()`` one when ``open_chat``, else a UserError. A tab
        that only looked at a session another tab's chat now holds gets a new one
        when it opens its own chat."""
        key = (*where, tab)
        with self._lock:
            pinned = self._pins.get(key)
            sid = find(pinned)  # (its pin deleted meanwhile: the current one)
            held = sid in self.others(where, tab)
            if held and (sid != pinned or (open_chat and key not in self._chats)):
                if not open_chat:
                    raise UserError(NO_CHAT.format(sid=sid))
                sid = new()
            self._pins[key] = sid
            if open_chat:
                self._chats.add(key)
            return sid

    def get(self, where: tuple[Path, str], tab: int | None) -> str | None:
        """The session ``tab`` works in, if it has made a call yet."""
        with self._lock:
            return self._pins.get((*where, tab))

    def pin(self, where: tuple[Path, str], tab: int | None, sid: str) -> None:
        """Make ``sid`` the session of ``tab``; refused while another tab holds it."""
        with self._lock:
            if sid in self.others(where, tab):
                raise UserError(HELD.format(sid=sid))
            self._pins[(*where, tab)] = sid
            self._chats.add((*where, tab))  # a switch or a fork: this tab's chat works there

    def others(self, where: tuple[Path, str], besides: int | None) -> dict[str, int]:
        """The sessions other tabs' chats work in: session → tab (-1: None)."""
        with self._lock:
            return {
                sid: -1 if tab is None else tab
                for (home, store, tab), sid in self._pins.items()
                if (home, store) == where and tab != besides and (home, store, tab) in self._chats
            }

    def forget(self, tab: int) -> list[str]:
        """Drop every pin of ``tab`` (it was closed); the sessions it worked in."""
        with self._lock:
            keys = [k for k in self._pins if k[2] == tab]
            self._chats.difference_update(keys)
            return [self._pins.pop(k) for k in keys]
