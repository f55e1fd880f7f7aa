"""The recall verbs: a cell's (recall-log), (recall-entry N) and (recall-search WORDS)."""

from __future__ import annotations

from nodecode.cells.env import CellEnv
from nodecode.cells.registry import Family, verb
from nodecode.log.store import Store
from nodecode.recall import (
    DEFAULT_LIMIT,
    NO_MATCHES,
    recall_entry,
    recall_log,
    recall_search,
)
from nodecode.verbs.env import in_session


def _where(env: CellEnv) -> tuple[Store, str]:
    session = in_session(env, "recall: this cell runs outside a session (no store to read)")
    return session.ws.store, session.session


def _joined(lines: list[str]) -> str:
    return "\n".join(lines) if lines else NO_MATCHES


@verb(
    "recall-log",
    keywords={"match": str, "before": int, "limit": int},
    metavars={"match": '"text"', "before": "N", "limit": "20"},
)
def recall_log_verb(
    env: CellEnv, *, match: str | None = None, before: int | None = None, limit: int = DEFAULT_LIMIT
) -> str:
    """This session's log.

    Oldest first, its ancestors' too; bodies clipped to 200 characters."""
    store, sid = _where(env)
    return _joined(recall_log(store, sid, match=match, before=before, limit=limit))


@verb("recall-entry", args=[("n", int)])
def recall_entry_verb(env: CellEnv, n: int) -> str:
    """The event at seq N, whole."""
    store, sid = _where(env)
    return recall_entry(store, sid, n)


@verb(
    "recall-search",
    args=["words"],
    keywords={"limit": int},
    metavars={"words": '"words"', "limit": "20"},
)
def recall_search_verb(env: CellEnv, words: str, *, limit: int = DEFAULT_LIMIT) -> str:
    """Search every session.

    Messages of every session of the store holding every word, newest first."""
    store, _ = _where(env)
    return _joined(recall_search(store, words, limit=limit))


FAMILY = Family("recall", (recall_log_verb, recall_entry_verb, recall_search_verb))
