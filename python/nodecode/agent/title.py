"""A session's automatic title (the setting ``session_title``; doc/design.md
"Decisions", Titles).

With ``auto`` (the session's model) or a model id, the first reply of a
session is followed by one short request on a thread of its own: the context
the turn just sent (the prefix the provider's cache holds) and an instruction
asking for a title, at most ``MAX_TOKENS`` tokens and
``session_title_timeout`` seconds (``budget.summary.aside``, the eviction
summary's request). The title is a row of the log's ``titles`` table; a
failure is a row too (no title, the reason), so it is asked once, and the
first line stays. A rename always wins over it. ``first_line`` (the default)
sends nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from nodecode.budget import summary
from nodecode.context import derived
from nodecode.log import sessions
from nodecode.views.titles import one_line

if TYPE_CHECKING:
    from nodecode.app import App

FIRST_LINE, AUTO = "first_line", "auto"
MAX_TOKENS = 32  # a title is a few words
INSTRUCTION = (
    "[nodecode: give this conversation a title for a list of sessions: at most 8 words "
    "saying what the person asked for, in their language. Reply with the title alone: "
    "no quotes, no preamble, no tool calls.]"
)


@dataclass(frozen=True)
class Titled:
    """What the automatic title request gave: the title, or why there is none."""

    session: str
    title: str | None
    failed: str | None = None

    def line(self) -> str:
        """One line for the person."""
        if self.title is not None:
            return f"session {self.session} titled: {self.title}"
        return f"no title for session {self.session} ({self.failed}): the first line stays"

    def event(self) -> dict[str, Any]:
        """The host's ``title`` event, of no job."""
        return {"job": None, "kind": "title", **asdict(self), "line": self.line()}


def wanted(app: App, sid: str) -> str | None:
    """The model to ask for ``sid``'s title now, or None: the setting is
    ``first_line``, the session has a title (given, renamed, made or tried), or
    its one finished turn is not its first."""
    chosen = str(app.config.setting("session_title") or FIRST_LINE).strip()
    if chosen == FIRST_LINE or app.config.provider is None:
        return None
    if sessions.get(app.store, sid).title or sessions.titles(app.store, sid):
        return None
    done = app.store.read(
        "SELECT COUNT(*) FROM turns WHERE session = ? AND status = 'done'", (sid,)
    )[0][0]
    if done != 1:
        return None
    return (app.config.model if chosen == AUTO else chosen) or None


def make(app: App, sid: str, model: str) -> Titled:
    """Ask ``model`` for the title and log what came of it."""
    config = app.config
    assert config.provider is not None  # wanted() said so
    prefix = derived.state(app.store, sid).messages
    limit = float(config.setting("session_title_timeout"))
    got = summary.aside(app, config, config.provider, model, limit, prefix, INSTRUCTION, MAX_TOKENS)
    title = one_line(got.text) if got.text else None
    failed = None if title else (got.failed or "the reply had no words")
    sessions.add_title(
        app.store,
        sid,
        title,
        "auto",
        model=model,
        tokens=got.tokens,
        cost=got.cost,
        failed=failed,
    )
    return Titled(sid, title, failed)


def start(app: App, sid: str, said: Callable[[Titled], None]) -> threading.Thread | None:
    """Start the title's request on a daemon thread when one is ``wanted`` (None
    when not); ``said`` gets what came of it, on that thread."""
    try:
        model = wanted(app, sid)
    except Exception:  # noqa: BLE001 - a title is never worth failing a turn over
        return None
    if model is None:
        return None

    def run() -> None:
        try:
            outcome = make(app, sid, model)
        except Exception as e:  # noqa: BLE001 - said in one line, the first line stays
            why = " ".join(str(e).split()) or type(e).__name__
            outcome = Titled(sid, None, app.redactor.apply(why))
        said(outcome)

    thread = threading.Thread(target=run, name="nodecode-title", daemon=True)
    thread.start()
    return thread
