"""The context-state cache under threads: the Neovim host's loop thread reads the
context while its job thread's turn appends to the same store."""

from __future__ import annotations

import sys
import threading

from nodecode.context import derived
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.log.store import open_store


def test_state_read_by_two_threads_while_a_turn_appends_never_duplicates_a_message(tmp_path):
    store = open_store(tmp_path / "home", "default")
    sid = sessions.create(store, title="t")
    turn = turn_tree.begin(store, sid, 1)
    store.append(sid, "user", role="user", turn=turn.number, text="go")
    bad: list[list[int]] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            ids = [m.id for m in derived.state(store, sid).messages]
            if len(ids) != len(set(ids)):
                bad.append(ids)
                return

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows
    readers = [threading.Thread(target=read) for _ in range(2)]
    try:
        for t in readers:
            t.start()
        for i in range(600):
            role = ("assistant", "call", "tool")[i % 3]
            store.append(sid, role, role=role, turn=turn.number, text=f"{role} {i}")
    finally:
        done.set()
        for t in readers:
            t.join()
        sys.setswitchinterval(old)
    ids = [m.id for m in derived.state(store, sid).messages]
    assert not bad, f"a state listed message {_first_dup(bad[0])} twice"
    assert ids == list(range(1, 602))
    store.close()


def _first_dup(ids: list[int]) -> int:
    seen: set[int] = set()
    return next(i for i in ids if i in seen or seen.add(i))
