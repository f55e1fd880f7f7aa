"""A session's state is read as of one moment of the log, while another
connection (another Neovim, another App of the host) commits to it.

The other connection's commit is made to land between two of the state's
reads by SQLite's own trace callback on the reading connection: the moment
a given SELECT starts, the other connection appends a message."""

from __future__ import annotations

from pathlib import Path

from nodecode.context import derived
from nodecode.log import sessions as session
from nodecode.log.store import Store


def _land_during(reader: Store, writer: Store, sid: str, sql_start: str, text: str) -> list[bool]:
    """Append ``text`` through ``writer`` once, when ``reader`` starts a statement
    beginning with ``sql_start``; the returned list says whether it landed."""
    landed: list[bool] = []

    def trace(sql: str) -> None:
        if not landed and " ".join(sql.split()).startswith(sql_start):
            landed.append(True)
            writer.append(sid, "user", role="user", text=text)

    reader.db.set_trace_callback(trace)
    return landed


def _texts(store: Store, sid: str) -> list[str]:
    return [m.text for m in derived.state(store, sid).messages]


def test_a_message_committed_mid_read_is_in_the_state_once(tmp_path: Path) -> None:
    path = tmp_path / "store" / "default.db"
    path.parent.mkdir()
    reader, writer = Store(path), Store(path)
    try:
        sid = session.create(writer)
        for i in range(4):
            writer.append(sid, "user", role="user", text=f"m{i}")
        rows = "SELECT seq, role, turn, text, payload FROM events"
        landed = _land_during(reader, writer, sid, rows, "landed mid-compute")
        first = _texts(reader, sid)  # computed from the log
        second = _texts(reader, sid)  # grown from the first: what the next request sends
        assert landed == [True]
        assert second == ["m0", "m1", "m2", "m3", "landed mid-compute"]  # once, not twice
        assert first == ["m0", "m1", "m2", "m3"]  # as of the moment it began

        grown = "SELECT session, seq, kind, role, turn, text"
        landed = _land_during(reader, writer, sid, grown, "landed mid-grow")
        writer.append(sid, "user", role="user", text="m4")
        assert _texts(reader, sid)[-1] == "m4"  # grown from the cached state
        assert landed == [True]
        assert _texts(reader, sid) == [
            "m0",
            "m1",
            "m2",
            "m3",
            "landed mid-compute",
            "m4",
            "landed mid-grow",
        ]
    finally:
        reader.db.set_trace_callback(None)
        reader.close()
        writer.close()
