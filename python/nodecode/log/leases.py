"""The one-turn-at-a-time lease of a session: held by one process, renewed by a
heartbeat, and taken over only when its holder is gone."""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid

from nodecode.bounded import Bounded
from nodecode.errors import SessionBusy, StoreError
from nodecode.log.store import Store

LEASE_SECONDS = 30.0  # $NODECODE_LEASE_SECONDS changes it (tests shorten it; agent.loop reads it)
HEARTBEAT_SECONDS = 5.0  # how often a held lease is renewed (a third of it, when shorter)


class Lease:
    """A turn's hold on a session: a row naming its process (pid and start time)
    with an expiry. While held, a heartbeat thread renews the expiry every few
    seconds, whatever the turn waits on (a long cell, an approval, a stream).
    On this host the lease holds exactly as long as its process lives (a
    suspended process too); the expiry decides only where that cannot be
    checked (another machine, no /proc)."""

    def __init__(self, store: Store, sid: str, seconds: float = LEASE_SECONDS):
        self.store, self.sid, self.seconds = store, sid, seconds
        self.owner = uuid.uuid4().hex
        self.host = socket.gethostname()
        self._renewed = 0.0
        self.every = max(0.05, min(HEARTBEAT_SECONDS, seconds / 3))  # between heartbeats

    def acquire(self) -> Lease:
        now = time.time()
        with self.store.atomic() as db:
            row = db.execute(
                "SELECT owner, pid, host, expires, started FROM leases WHERE session = ?",
                (self.sid,),
            ).fetchone()
            if row and row[0] != self.owner and _held(row[1], row[2], row[3], row[4], now):
                raise SessionBusy(
                    f"session busy: {self.sid} is running a turn in process {row[1]}"
                    + (f" on {row[2]}" if row[2] != self.host else "")
                )
            db.execute(
                "INSERT INTO leases (session, owner, pid, host, expires, started) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session) DO UPDATE SET "
                "owner = excluded.owner, pid = excluded.pid, host = excluded.host, "
                "expires = excluded.expires, started = excluded.started",
                (
                    self.sid,
                    self.owner,
                    os.getpid(),
                    self.host,
                    now + self.seconds,
                    _own_start(),
                ),
            )
        self._renewed = now
        _KEEPER.add(self)
        return self

    def renew(self) -> None:
        """Push the expiry out again (not more often than a tenth of the lease)."""
        now = time.time()
        if now - self._renewed < self.seconds / 10:
            return
        with self.store.atomic() as db:
            db.execute(
                "UPDATE leases SET expires = ? WHERE session = ? AND owner = ?",
                (now + self.seconds, self.sid, self.owner),
            )
        self._renewed = now

    def release(self) -> None:
        # Not waited for: the caller may hold the store's lock a beat waits for.
        # A last beat after the delete updates no row (it names this owner).
        _KEEPER.remove(self)
        with self.store.atomic() as db:
            db.execute("DELETE FROM leases WHERE session = ? AND owner = ?", (self.sid, self.owner))

    def beat(self) -> bool:
        """One heartbeat; False once there is nothing left to hold."""
        try:
            self.renew()
        except sqlite3.ProgrammingError:
            return False  # the store was closed under us
        except (sqlite3.Error, StoreError):
            pass  # busy for longer than the busy timeout: try at the next beat
        return True

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Keeper:
    """One daemon thread renewing every held lease of the process, each at its own
    pace: a turn starts no thread of its own (a thread start costs milliseconds on a
    busy machine, on the way to the first token)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[Lease, float] = {}  # lease → when its next beat is due
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._cond:
            self._due[lease] = time.monotonic() + lease.every
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="nodecode-leases", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def remove(self, lease: Lease) -> None:
        with self._cond:
            self._due.pop(lease, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due:
                    self._cond.wait()
                now = time.monotonic()
                first = min(self._due.values())
                if first > now:
                    self._cond.wait(first - now)
                    continue
                ready = [lease for lease, due in self._due.items() if due <= now]
                for lease in ready:
                    self._due[lease] = now + lease.every
            # Outside the condition: a beat may wait on its store (up to the busy
            # timeout, delaying the other leases' beats by as much; their processes
            # still hold them on this host, where a lease lasts as its process does).
            for lease in ready:
                if not lease.beat():
                    self.remove(lease)


_KEEPER = _Keeper()


def lease_live(store: Store, sid: str) -> bool:
    """Whether some live process holds the lease on ``sid``."""
    rows = store.read("SELECT pid, host, expires, started FROM leases WHERE session = ?", (sid,))
    if not rows:
        return False
    pid, host, expires, started = rows[0]
    return _held(pid, host, expires, started, time.time())


def _held(pid: int, host: str, expires: float, started: str | None, now: float) -> bool:
    """A lease holds while its process runs; when that cannot be told, until it expires."""
    running = _running(pid, host, started)
    return running if running is not None else expires > now


def _running(pid: int, host: str, started: str | None) -> bool | None:
    """Whether the lease's own process still runs: None when this host cannot tell."""
    if host != socket.gethostname():
        return None  # another machine's processes cannot be checked
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    now = _stat(pid)
    if now is None:
        return None  # no /proc: the pid may have been reused, trust the expiry
    state, start = now
    if state in ("Z", "X", "gone"):
        return False  # dead, waiting to be reaped (or gone since the kill above)
    if started is None:
        return None  # a lease taken before start times were recorded
    return start == started


def process_start(pid: int) -> str | None:
    """What tells process ``pid`` from a later one given the same pid: this boot's id
    and its start time (field 22 of /proc/PID/stat, clock ticks since boot).
    None where there is no /proc (not Linux), or the process is gone."""
    now = _stat(pid)
    return now[1] if now is not None and now[0] not in ("Z", "X", "gone") else None


_OWN_START = Bounded(1024)  # pid → process_start(pid), for this process


def _own_start() -> str | None:
    """``process_start`` of this process, read from /proc once it was read whole
    (per pid: a forked child is another process)."""
    pid = os.getpid()
    hit = _OWN_START.get(pid)
    if hit is None:
        hit = process_start(pid)
        if hit is not None and not hit.startswith(":"):  # a failed read is tried again
            _OWN_START[pid] = hit
    return hit


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, boot id + start time) of ``pid`` from /proc; state "gone" when it has
    exited; None when this system has no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return ("gone", "") if os.path.isdir("/proc/self") else None
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 20:
        return None
    return fields[0].decode(), f"{_boot_id()}:{int(fields[19])}"  # fields[0] is field 3


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""
