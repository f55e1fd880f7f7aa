"""The store's schema, made only by named migrations applied on open.

Append a new ``m00N_verb_noun`` function for every change; never edit one
that has shipped. Each runs in its own transaction and its name is recorded.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import msgpack

from nodecode.log import delta

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_create_sessions(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            parent TEXT REFERENCES sessions(id),
            fork_seq INTEGER,          -- F: the child's seqs start at F + 1
            fork_turn INTEGER,         -- the parent's highest turn number at the fork
            title TEXT,
            created REAL NOT NULL,
            head INTEGER               -- a turn number; a pointer row, the only thing that moves
        )""")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")


@migration
def m002_create_events(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,    -- explicit integer key, also the FTS rowid
            session TEXT NOT NULL REFERENCES sessions(id),
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,        -- a message role, or request/stopped/edit/receipt/...
            role TEXT,                 -- the message role; NULL for events that are not messages
            turn INTEGER,
            text TEXT NOT NULL DEFAULT '',
            payload BLOB,              -- msgpack
            time REAL NOT NULL,
            UNIQUE (session, seq)
        )""")
    # The log is append-only: refuse any change at the lowest level too.
    db.execute("""CREATE TRIGGER events_no_update BEFORE UPDATE ON events
                  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""")
    db.execute("""CREATE TRIGGER events_no_delete BEFORE DELETE ON events
                  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""")


@migration
def m003_create_turns(db: sqlite3.Connection) -> None:
    db.execute("""
        CREATE TABLE turns (
            session TEXT NOT NULL REFERENCES sessions(id),
            number INTEGER NOT NULL,
            parent INTEGER,            -- parent turn number (NULL: the root)
            first_seq INTEGER NOT NULL,
            last_seq INTEGER,          -- NULL while running
            status TEXT NOT NULL,      -- running | done | stopped | failed
            PRIMARY KEY (session, number)
        )""")


@migration
def m004_create_blobs(db: sqlite3.Connection) -> None:
    db.execute("""CREATE TABLE blobs (hash TEXT PRIMARY KEY, size INTEGER NOT NULL,
                                      data BLOB NOT NULL)""")


@migration
def m005_create_fts(db: sqlite3.Connection) -> None:
    # External-content FTS over message text only; the trigger keeps it in step
    # inside the same transaction as the insert.
    db.execute("""CREATE VIRTUAL TABLE events_fts USING fts5(
                      text, content='events', content_rowid='id', tokenize='unicode61')""")
    db.execute("""CREATE TRIGGER events_fts_insert AFTER INSERT ON events
                  WHEN new.role IS NOT NULL
                  BEGIN INSERT INTO events_fts(rowid, text) VALUES (new.id, new.text); END""")


@migration
def m006_create_leases(db: sqlite3.Connection) -> None:
    db.execute("""CREATE TABLE leases (session TEXT PRIMARY KEY, owner TEXT NOT NULL,
                                       pid INTEGER NOT NULL, host TEXT NOT NULL,
                                       expires REAL NOT NULL)""")


@migration
def m007_index_events_kind_turn(db: sqlite3.Connection) -> None:
    # Takes, pending edits and the newest round look events up by kind and turn
    # on every request; without these they scan the whole session.
    db.execute("CREATE INDEX events_session_kind ON events (session, kind, seq)")
    db.execute("CREATE INDEX events_session_turn ON events (session, turn, seq)")


@migration
def m008_create_cache_entries(db: sqlite3.Connection) -> None:
    # What the provider's prompt cache is believed to hold (cache.ledger):
    # derived state, rewritten after each request, never part of the log.
    db.execute("""
        CREATE TABLE cache_entries (
            scope TEXT NOT NULL,       -- provider type:id:model
            hash TEXT NOT NULL,        -- the prefix's hash
            reading INTEGER NOT NULL,  -- 0: only found entries refresh; 1: the whole prefix
            ttl REAL NOT NULL,
            expires REAL NOT NULL,
            written REAL NOT NULL,
            PRIMARY KEY (scope, hash, reading)
        )""")


@migration
def m009_add_lease_started(db: sqlite3.Connection) -> None:
    # The holder's start time (boot id + /proc start ticks): a pid reused by
    # another process no longer holds the lease.
    db.execute("ALTER TABLE leases ADD COLUMN started TEXT")


@migration
def m010_create_shell_runs(db: sqlite3.Connection) -> None:
    # The snapshot before a turn's first shell command whose result is not logged
    # yet: a turn killed mid-command is settled from it. A pointer row, removed
    # when the call's result is logged.
    db.execute("""CREATE TABLE shell_runs (session TEXT NOT NULL, turn INTEGER NOT NULL,
                                           workspace TEXT NOT NULL, tree TEXT, untracked TEXT,
                                           PRIMARY KEY (session, turn))""")


@migration
def m011_encode_file_blobs_as_deltas(db: sqlite3.Connection) -> None:
    # Each export and each file edit kept the whole context file as a blob (two
    # copies per taken edit). From here a blob may be a delta against another
    # (``base``; see nodecode.log.delta), and the files already kept become deltas:
    # every export against its session's newest one (its nonce substituted),
    # every file edit against its export. Only the rows' encoding changes; their
    # hashes, and every event, stay as they were.
    db.execute("ALTER TABLE blobs ADD COLUMN base TEXT")
    for (sid,) in db.execute("SELECT id FROM sessions").fetchall():
        for digest, packed, base in _file_deltas(db, sid):
            db.execute(
                "UPDATE blobs SET data = ?, base = ? WHERE hash = ? AND base IS NULL",
                (packed, base, digest),
            )


@migration
def m012_create_titles(db: sqlite3.Connection) -> None:
    # A session's titles, one row per title set: a rename (source 'user') or an
    # automatic title (source 'auto'; title NULL when its request failed, ``failed``
    # saying why). Rows are never changed: the title shown is the newest user row,
    # else the one given at creation, else the newest automatic one.
    db.execute("""
        CREATE TABLE titles (
            id INTEGER PRIMARY KEY,
            session TEXT NOT NULL REFERENCES sessions(id),
            title TEXT,
            source TEXT NOT NULL,      -- user | auto
            model TEXT, tokens INTEGER, cost REAL, failed TEXT,
            time REAL NOT NULL
        )""")
    db.execute("CREATE INDEX titles_session ON titles (session, id)")
    db.execute("""CREATE TRIGGER titles_no_update BEFORE UPDATE ON titles
                  BEGIN SELECT RAISE(ABORT, 'titles are append-only'); END""")


@migration
def m013_allow_session_delete(db: sqlite3.Connection) -> None:
    # Deleting a session (``nodecode sessions delete``) is the one way events
    # leave the log: only while the session is named in ``deleting``, inside the
    # delete's own transaction. Its messages leave the full-text index with them.
    db.execute("CREATE TABLE deleting (session TEXT PRIMARY KEY)")
    db.execute("DROP TRIGGER events_no_delete")
    db.execute("""CREATE TRIGGER events_no_delete BEFORE DELETE ON events
                  WHEN NOT EXISTS (SELECT 1 FROM deleting WHERE session = old.session)
                  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END""")
    db.execute("""CREATE TRIGGER events_fts_delete AFTER DELETE ON events
                  WHEN old.role IS NOT NULL
                  BEGIN INSERT INTO events_fts(events_fts, rowid, text)
                        VALUES ('delete', old.id, old.text); END""")


def _file_deltas(db: sqlite3.Connection, sid: str) -> list[tuple[str, bytes, str]]:
    """(hash, delta, base hash) for the session's export and file-edit blobs."""
    exports: dict[int, tuple[str, str]] = {}
    edits: list[tuple[str, int]] = []
    rows = db.execute(
        "SELECT kind, payload FROM events WHERE session = ? AND kind IN ('export', 'edit') "
        "AND payload IS NOT NULL ORDER BY seq",
        (sid,),
    ).fetchall()
    for kind, packed in rows:
        p = msgpack.unpackb(packed, raw=False)
        if kind == "export" and isinstance(p.get("blob"), str):
            exports[p["number"]] = (p["blob"], p["nonce"])
        elif kind == "edit" and p.get("source") == "file" and isinstance(p.get("blob"), str):
            edits.append((p["blob"], p.get("export")))
    if not exports:
        return []
    newest, nonce = exports[max(exports)]
    # (blob, its base, the substitution that makes the base's headers its own)
    plan: list[tuple[str, str, tuple[bytes, bytes] | None]] = [
        (h, newest, (f"[[m:{nonce} ".encode(), f"[[m:{own} ".encode()))
        for h, own in exports.values()
        if h != newest
    ]
    kept = {h for h, _ in exports.values()}  # an export is never an edit's delta
    plan += [(h, exports[n][0], None) for h, n in edits if n in exports and h not in kept]
    whole = {h: _raw_blob(db, h) for h in {h for p in plan for h in p[:2]}}
    out: list[tuple[str, bytes, str]] = []
    for digest, base, sub in plan:
        data, base_bytes = whole[digest], whole[base]
        if data is None or base_bytes is None:
            continue  # not kept whole
        packed = delta.encode(base_bytes, data, sub)
        if len(packed) < len(data) and delta.decode(base_bytes, packed) == data:
            out.append((digest, packed, base))
    return out


def _raw_blob(db: sqlite3.Connection, digest: str) -> bytes | None:
    row = db.execute("SELECT data FROM blobs WHERE hash = ? AND base IS NULL", (digest,)).fetchone()
    return bytes(row[0]) if row else None


def foreign(db: sqlite3.Connection) -> str | None:
    """What makes the database another program's, or None when it is a store (or
    empty: a new store). A store records its first migration in ``migrations``;
    a store whose first open stopped after creating that table holds it alone, empty."""
    tables = [
        row[0]
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
        )
    ]
    if not tables:
        return None
    if "migrations" in tables:
        try:
            names = {row[0] for row in db.execute("SELECT name FROM migrations")}
        except sqlite3.OperationalError:  # another program's table of that name
            names = {""}
        if MIGRATIONS[0].__name__ in names or (not names and tables == ["migrations"]):
            return None
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    return f"an SQLite database with the tables {shown}"


def apply(db: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now."""
    db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied REAL)")
    done = {row[0] for row in db.execute("SELECT name FROM migrations")}
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the lock.
            if db.execute("SELECT 1 FROM migrations WHERE name = ?", (fn.__name__,)).fetchone():
                db.execute("ROLLBACK")
                continue
            fn(db)
            db.execute(
                "INSERT INTO migrations (name, applied) VALUES (?, ?)", (fn.__name__, time.time())
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        applied.append(fn.__name__)
    return applied
