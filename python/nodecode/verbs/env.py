"""A session's cell environment: a ``CellEnv`` that knows which session it runs in.

``cells`` knows nothing of sessions; the context and recall verbs (and the
checkpoints' shell hook) need the workspace's store and the session, so the
core hands them a ``SessionEnv`` (``App.cell_env`` builds it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodecode.cells.env import CellEnv
from nodecode.errors import CellError

if TYPE_CHECKING:
    from nodecode.context.message import Message
    from nodecode.servers.mcp import Hub
    from nodecode.workspace import Workspace


@dataclass(kw_only=True)
class SessionEnv(CellEnv):
    """``ws`` (its store, home and cwd) and ``session`` name the session the cell
    runs in; ``turn`` is the turn running it (None for the person's own cells)."""

    ws: Workspace
    session: str
    turn: int | None = None
    mcp: Hub | None = None  # the App's MCP servers, when any are configured
    # What an edit making the first order the second does to the next request's
    # cache and cost, in a line (``views.cost``); None: not said.
    foresee: Callable[[list[Message], list[Message]], str | None] | None = None


def in_session(env: CellEnv, refusal: str) -> SessionEnv:
    """The env as a session's, or CellError ``refusal``: the cell runs outside one."""
    if not isinstance(env, SessionEnv):
        raise CellError(refusal)
    return env
