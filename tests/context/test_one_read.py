"""An operation reads the session once: a take, and a request built on a session of
2,000 messages, seen through SQLite's own trace of every statement the store ran.

The session's message rows are read by one statement when an App first reads it
(a cold App), and not at all when the App has read it before (a warm App: what
was logged since is read in one query). Every other statement is named here, so
a new query on the request path shows up as a failure that says which.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodecode.agent.loop import Agent
from nodecode.app import App
from nodecode.context import take as takes
from nodecode.log import turns as turn_tree
from nodecode.loopback import LoopbackServer

MESSAGES = 2000
READS_MESSAGE_ROWS = "SELECT seq, role, turn, text, payload FROM events"
EVENTS_AFTER = "SELECT session, seq, kind, role, turn, text, payload, time FROM events"


def grow(app: App, sid: str, messages: int) -> None:
    """Finished turns of an ask, a call, its result and a reply, logged directly."""
    store, n = app.store, 0
    while store.last_seq(sid) < messages:
        with store.atomic():
            turn = turn_tree.begin(store, sid, store.last_seq(sid) + 1).number
            store.append(sid, "user", role="user", turn=turn, text=f"ask {n} " + "word " * 30)
            code = ';; look\n(read-file "a.py")'
            call = store.append(
                sid,
                "call",
                role="call",
                turn=turn,
                text=code,
                payload={"name": "eval", "input": {"code": code}},
            )
            store.append(
                sid,
                "tool",
                role="tool",
                turn=turn,
                text="line\n" * 20 + f"[seq {call.seq + 1}]",
                payload={"call": call.seq, "error": False},
            )
            store.append(sid, "assistant", role="assistant", turn=turn, text="done " * 40)
            turn_tree.finish(store, sid, turn, store.last_seq(sid), "done")
        n += 1


class Traced:
    """Every statement an App's store runs while ``on``, as SQLite reports it
    (statements run by the FTS triggers are SQLite's own and not counted)."""

    def __init__(self, app: App) -> None:
        self.statements: list[str] = []
        self.on = False
        app.store.db.set_trace_callback(self._seen)

    def _seen(self, sql: str) -> None:
        if self.on and "events_fts" not in sql:
            self.statements.append(" ".join(sql.split()))

    @property
    def reads(self) -> list[str]:
        return [s for s in self.statements if s.startswith(("SELECT", "WITH"))]

    def count(self, prefix: str) -> int:
        return sum(s.startswith(prefix) for s in self.reads)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A home with a 2,000-message session, pointed at a loopback server."""
    root = tmp_path_factory.mktemp("one-read")
    home, cwd = root / "home", root / "ws"
    home.mkdir()
    cwd.mkdir()
    with LoopbackServer() as server:
        server.add_rounds([{"text": "ok"}] * 20)
        provider = {"type": "anthropic", "base_url": server.url, "api_key_env": None}
        provider["models"] = [{"id": "m", "context_window": 2_000_000}]
        config = {"provider": "p", "model": "m", "providers": {"p": provider}}
        (home / "config.jsonc").write_text(json.dumps(config))
        app = App.open(home=home, cwd=cwd, environ={})
        sid = app.new_session()
        grow(app, sid, MESSAGES)
        app.close()
        yield home, cwd, sid


def _open(world: tuple[Path, Path, str]) -> App:
    home, cwd, _ = world
    return App.open(home=home, cwd=cwd, environ={})


def _drop_one(app: App, sid: str, k: int) -> None:
    """A pending (context :drop …) edit of the ``k``-th oldest reply."""
    seq = app.store.read(
        "SELECT seq FROM events WHERE session = ? AND role = 'assistant' "
        "ORDER BY seq LIMIT 1 OFFSET ?",
        (sid, k),
    )[0][0]
    takes.record_form_edit(app.store, sid, {"drop": [[seq, seq]]}, None)


def test_a_cold_take_reads_the_message_rows_once(world):
    _, _, sid = world
    app = _open(world)
    try:
        _drop_one(app, sid, 0)
        app.close()
        app = _open(world)  # a new App: it has read nothing of the session
        trace = Traced(app)
        trace.on = True
        report = takes.take(app.workspace, sid, None)
        trace.on = False
        assert report.taken
        assert trace.count(READS_MESSAGE_ROWS) == 1, trace.reads
        assert len(trace.reads) <= 10, trace.reads
    finally:
        app.close()


def test_a_warm_take_reads_only_what_was_logged_since(world):
    _, _, sid = world
    app = _open(world)
    try:
        takes.take(app.workspace, sid, None)  # the App reads the session (a take of nothing)
        _drop_one(app, sid, 1)
        trace = Traced(app)
        trace.on = True
        report = takes.take(app.workspace, sid, None)
        trace.on = False
        assert report.taken
        assert trace.count(READS_MESSAGE_ROWS) == 0, trace.reads
        assert trace.count(EVENTS_AFTER) == 1, trace.reads  # the edit, read once
        assert len(trace.reads) <= 4, trace.reads
    finally:
        app.close()


def test_a_warm_request_build_reads_the_session_once(world):
    """From the ask to the request's first byte: the turn begins (its lease, its
    number), the take reads what was logged since, and nothing reads it again."""
    _, _, sid = world
    app = _open(world)
    try:
        Agent(app, sid).ask("first")  # a warm App, as the host keeps one
        trace = Traced(app)
        provider = app.provider()
        real = provider.stream
        seen: list[str] = []

        def stream(body, **kw):
            seen.extend(trace.reads)
            trace.on = False
            return real(body, **kw)

        provider.stream = stream  # type: ignore[method-assign]
        trace.on = True
        Agent(app, sid).ask("second")
        assert seen, "the request was never sent"
        assert sum(s.startswith(READS_MESSAGE_ROWS) for s in seen) == 0, seen
        assert sum(s.startswith(EVENTS_AFTER) for s in seen) == 1, seen
        assert len(seen) <= 11, seen
    finally:
        app.close()
