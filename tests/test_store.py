"""The store: migrations on open, append-only events, FTS in step, fork seqs, modes."""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
import subprocess
import time

import pytest
from nodecode.config import schema
from nodecode.errors import ConfigError, SessionBusy, SessionError, StoreError
from nodecode.log import leases, migrations, sessions
from nodecode.log.store import open_store


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "home", "default")
    yield s
    s.close()


def test_open_applies_every_named_migration_once(tmp_path):
    s = open_store(tmp_path, "x")
    names = [r[0] for r in s.read("SELECT name FROM migrations ORDER BY name")]
    assert names == sorted(fn.__name__ for fn in migrations.MIGRATIONS)
    s.close()
    again = open_store(tmp_path, "x")
    assert migrations.apply(again.db) == []
    again.close()


def test_store_file_is_private_and_in_a_private_dir(tmp_path):
    s = open_store(tmp_path / "home", "default")
    s.append(sessions.create(s), "user", role="user", text="hi")
    path = tmp_path / "home" / "store" / "default.db"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    s.close()


def test_seqs_increase_per_session_from_one(store):
    a, b = sessions.create(store), sessions.create(store)
    seqs = [store.append(a, "user", role="user", text=str(i)).seq for i in range(3)]
    assert seqs == [1, 2, 3]
    assert store.append(b, "user", role="user", text="x").seq == 1


def test_events_can_never_be_updated_or_deleted(store):
    sid = sessions.create(store)
    store.append(sid, "user", role="user", text="original")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        store.db.execute("UPDATE events SET text = 'changed'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        store.db.execute("DELETE FROM events")
    assert store.event(sid, 1).text == "original"


def test_text_can_name_its_own_seq(store):
    sid = sessions.create(store)
    store.append(sid, "user", role="user", text="a")
    ev = store.append(sid, "tool", role="tool", text=lambda seq: f"out\n[seq {seq}]")
    assert ev.text == "out\n[seq 2]" and store.event(sid, 2).text == "out\n[seq 2]"


def test_payload_round_trips_through_msgpack(store):
    sid = sessions.create(store)
    store.append(
        sid, "call", role="call", text="(x)", payload={"input": {"code": "(x)"}, "n": [1, 2]}
    )
    assert store.event(sid, 1).payload == {"input": {"code": "(x)"}, "n": [1, 2]}


def test_fts_indexes_message_text_only_in_the_same_transaction(store):
    sid = sessions.create(store)
    store.append(sid, "user", role="user", text="the pelican flies")
    store.append(sid, "request", text="pelican request")  # not a message
    hits = store.read("SELECT rowid FROM events_fts WHERE events_fts MATCH ?", ('"pelican"',))
    assert len(hits) == 1


def test_forked_session_seqs_continue_after_the_fork_point(store):
    parent = sessions.create(store)
    for i in range(5):
        store.append(parent, "user", role="user", text=str(i))
    child = sessions.create(store, parent=parent, fork_seq=3, fork_turn=1)
    assert store.append(child, "user", role="user", text="c").seq == 4
    assert store.last_seq(parent) == 5


def test_rollback_leaves_nothing_behind(store):
    sid = sessions.create(store)
    with pytest.raises(RuntimeError), store.atomic():
        store.append(sid, "user", role="user", text="lost")
        raise RuntimeError("boom")
    assert store.events(sid) == []


def test_blobs_are_content_addressed(store):
    h1 = store.put_blob(b"same")
    h2 = store.put_blob(b"same")
    assert h1 == h2 and store.blob(h1) == b"same"
    assert store.read("SELECT COUNT(*) FROM blobs")[0][0] == 1


def test_unknown_session_is_a_clear_error(store):
    with pytest.raises(SessionError, match="does not exist"):
        sessions.get(store, "s-nope")


def test_append_to_unknown_session_is_refused(store):
    with pytest.raises(StoreError, match="does not exist"):
        store.append("s-missing", "user", role="user", text="x")


def test_bad_store_name_is_refused(tmp_path):
    with pytest.raises(StoreError, match="plain file name"):
        open_store(tmp_path, "../escape")


def test_session_ids_sort_by_time_and_are_filename_safe():
    a, b = sessions.new_id(1_000_000), sessions.new_id(2_000_000)
    assert a < b
    assert all(c.isalnum() or c == "-" for c in a)


def test_lease_makes_a_second_turn_fail_with_session_busy(store):
    sid = sessions.create(store)
    with leases.Lease(store, sid), pytest.raises(SessionBusy, match="session busy"):
        leases.Lease(store, sid).acquire()
    leases.Lease(store, sid).acquire().release()  # free again


def test_lease_of_a_dead_process_does_not_hold(store):
    sid = sessions.create(store)
    lease = leases.Lease(store, sid).acquire()
    # Pretend the holder was a process that no longer exists.
    with store.atomic() as db:
        db.execute("UPDATE leases SET pid = ?, owner = 'dead' WHERE session = ?", (2**22 + 7, sid))
    leases.Lease(store, sid).acquire()  # no SessionBusy
    del lease


def test_an_expired_lease_holds_while_its_process_lives_and_frees_on_another_host(store):
    sid = sessions.create(store)
    lease = leases.Lease(store, sid, seconds=-1).acquire()
    with pytest.raises(SessionBusy):  # this process, alive: an expiry alone frees nothing
        leases.Lease(store, sid).acquire()
    with store.atomic() as db:  # a machine whose processes cannot be checked: the expiry rules
        db.execute("UPDATE leases SET host = 'elsewhere' WHERE session = ?", (sid,))
    leases.Lease(store, sid).acquire().release()
    lease.release()


def test_a_bad_lease_length_is_one_line_naming_the_variable():
    with pytest.raises(ConfigError, match=r"NODECODE_LEASE_SECONDS must be a number .* 'soon'"):
        schema.env({"NODECODE_LEASE_SECONDS": "soon"}, "NODECODE_LEASE_SECONDS")


def test_a_lease_whose_pid_now_belongs_to_another_process_does_not_hold(store):
    """The pid is alive but started later than the lease's holder: the holder is gone."""
    sid = sessions.create(store)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        lease = leases.Lease(store, sid).acquire()
        lease.release()
        row = (sleeper.pid, leases.process_start(sleeper.pid), time.time() + 60, sid)
        with store.atomic() as db:
            db.execute(
                "INSERT INTO leases (session, owner, pid, host, expires, started) "
                "VALUES (?, 'x', ?, ?, ?, ?)",
                (sid, row[0], socket.gethostname(), row[2], row[1]),
            )
        assert leases.lease_live(store, sid)  # the very process that took it
        with store.atomic() as db:
            db.execute("UPDATE leases SET started = ? WHERE session = ?", ("0:1", sid))
        assert not leases.lease_live(store, sid)  # same pid, another start: reused
        leases.Lease(store, sid).acquire().release()
    finally:
        sleeper.kill()
        sleeper.wait()
