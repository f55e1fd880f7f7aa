"""A store file nodecode cannot use as it is: a data page damaged on disk, or
another program's SQLite database in its place. Each command says so in one
line naming the file and what to do, and never writes into the file."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from helpers import run_cli, write_config

COMMANDS = [("status",), ("recall-log",), ("ask", "go on")]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line(out) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.fixture
def used_store(loopback, home, workspace) -> Path:
    """A store holding a session with two turns, every page in the main file."""
    srv = loopback([{"text": "Noted: " + "words " * 200}] * 4)
    write_config(home, srv)
    run_cli("new", home=home)
    for ask in ("first " * 300, "second"):
        assert run_cli("ask", ask, home=home, cwd=workspace).returncode == 0
    path = home / "store" / "default.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def damage_events_page(path: Path) -> None:
    """Overwrite the root page of the events table with bytes that are no b-tree page."""
    db = sqlite3.connect(path)
    size = db.execute("PRAGMA page_size").fetchone()[0]
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events'").fetchone()
    db.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * size : root * size] = b"\xa5" * size
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_damaged_data_page_is_one_line_naming_the_store_and_what_to_do(
    args, used_store, home, workspace
):
    damage_events_page(used_store)
    before = digest(used_store)

    out = run_cli(*args, home=home, cwd=workspace)

    assert out.returncode == 1
    line = one_line(out)
    assert line.startswith(f"nodecode: store {used_store} is damaged (")
    assert "PRAGMA integrity_check" in line and "backup" in line
    assert digest(used_store) == before  # nothing written over the damage


def foreign_database(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    db.execute("INSERT INTO invoices (total) VALUES (12.5)")
    db.commit()
    db.close()


@pytest.mark.parametrize("args", [("new",), ("sessions",), *COMMANDS], ids=lambda a: a[0])
def test_a_foreign_sqlite_file_as_the_store_is_refused_by_name_and_left_as_it_was(
    args, loopback, home, workspace
):
    write_config(home, loopback([{"text": "never sent"}]))
    path = home / "store" / "default.db"
    foreign_database(path)
    before = digest(path)

    out = run_cli(*args, home=home, cwd=workspace)

    assert out.returncode == 1
    line = one_line(out)
    assert line.startswith(f"nodecode: store {path} is not a nodecode store")
    assert "found an SQLite database with the tables invoices" in line
    assert digest(path) == before
    db = sqlite3.connect(path)
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("invoices",)]
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    db.close()


def test_a_store_whose_first_open_stopped_after_the_migrations_table_opens(home):
    path = home / "store" / "default.db"
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)  # what the first open had done when it was killed
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied REAL)")
    db.close()

    out = run_cli("new", home=home)

    assert out.returncode == 0, out.stderr
    assert run_cli("sessions", home=home).stdout.count(out.stdout.strip()) == 1
