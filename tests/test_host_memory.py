"""What a long-running host keeps per turn: nothing a fresh host would not hold.

A Neovim host asks hundreds of turns in one process (bench/host_turns.py measures
its memory against a fresh host's). These pin the causes found there: a sent
request's body outliving its reply (held by httpx's request/response cycle until
the collector's rare full pass), a finished job kept for the host's life, and
a session's request log growing by every request asked.
"""

from __future__ import annotations

import gc
import threading
import time

from helpers import write_config
from nodecode.agent.loop import Agent
from nodecode.app import App
from nodecode.context import derived
from nodecode.host import Host
from nodecode.log import turns as turn_tree


def _bodies_held(larger_than: int) -> list[int]:
    """Sizes of request bodies (JSON bytes of a Messages request) that some object
    still refers to."""
    found = []
    for obj in gc.get_objects():
        for ref in gc.get_referents(obj):
            if type(ref) is bytes and len(ref) > larger_than and ref.startswith(b'{"model"'):
                found.append(len(ref))
    return found


def bodies_let_go(larger_than: int) -> list[int]:
    """The bodies still held once they are let go, or after ten seconds.

    The turn ends at the reply's last event, a moment before its pump lets the
    request go. (The pumps are shared by the whole process: waiting for none to
    be busy would wait on what other tests in this worker left streaming.)"""
    deadline = time.monotonic() + 10
    while (held := _bodies_held(larger_than)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return held


def test_a_request_body_is_let_go_once_its_reply_is_read(loopback, home, workspace):
    srv = loopback([{"text": "ok"}])
    app = App.open(write_config(home, srv), "default", workspace, environ={})
    sid = app.new_session()
    big = "word " * 60_000  # 300 kB in the context: every body is larger
    Agent(app, sid).ask(big)
    gc.collect()
    gc.disable()  # what only the collector would free stays, as between its full passes
    try:
        for n in range(3):
            Agent(app, sid).ask(f"and then {n}?")
        held = bodies_let_go(len(big))
    finally:
        gc.enable()
        app.close()
    assert len(srv.model_requests) == 4
    sent = srv.model_requests[-1].body["messages"]
    assert sent[0]["content"][0]["text"] == big  # the body went whole, its length right
    assert held == []


class Events:
    def __init__(self) -> None:
        self.done = threading.Event()

    def emit(self, event):
        if event.get("kind") == "done":
            self.done.set()


def test_the_host_keeps_no_job_that_has_finished(loopback, home, workspace):
    srv = loopback([{"text": "ok"}])
    write_config(home, srv)
    port = Events()
    host = Host(port, flush_interval=0.0)
    ctx = {"home": str(home), "cwd": str(workspace)}
    for n in range(5):
        port.done.clear()
        host.ask(ctx, f"question {n}")
        assert port.done.wait(30)
    sid = host.session(ctx)["id"]
    assert host.jobs() == [{"id": 5, "session": sid, "tab": None, "status": "done"}]
    assert len(srv.model_requests) == 5


def _turn_with_requests(store, sid: str, n: int, requests: int) -> None:
    with store.atomic():
        turn = turn_tree.begin(store, sid, store.last_seq(sid) + 1).number
        store.append(sid, "user", role="user", turn=turn, text=f"ask {n}")
        for k in range(requests):
            usage = {"input": 100 + n, "output": 5, "cache_read": 0, "cache_write": 0}
            store.append(sid, "request", turn=turn, payload={"usage": usage, "round": k})
        store.append(sid, "assistant", role="assistant", turn=turn, text=f"reply {n}")
        turn_tree.finish(store, sid, turn, store.last_seq(sid), "done")


def test_a_sessions_request_log_holds_what_a_first_read_holds_however_long_it_runs(
    loopback, home, workspace
):
    srv = loopback([])
    app = App.open(write_config(home, srv), "default", workspace, environ={})
    store, sid = app.store, app.new_session()
    try:
        for n in range(200):  # 390 requests, the log read after each turn as a host does
            _turn_with_requests(store, sid, n, 0 if n % 40 == 39 else 2)  # some turns ask none
            r = derived.read(store, sid)
            assert len(r.requests.seqs) <= derived.HELD
        every = [
            s
            for (s,) in store.read(
                "SELECT seq FROM events WHERE session = ? AND kind = 'request' ORDER BY seq DESC",
                (sid,),
            )
        ]
        log = derived.read(store, sid).requests
        assert [seq for seq, _ in log.newest_first()] == every  # the older ones from the store
        assert log.last == (every[0], {"usage": log.last[1]["usage"], "round": 1})
        early = turn_tree.get(store, sid, 3)
        assert early is not None and log.of_turn(early) == sorted(every)[4:6]
    finally:
        app.close()
