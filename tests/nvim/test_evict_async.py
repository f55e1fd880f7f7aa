""":NodecodeEvict with ``evict_summary`` on does not freeze Neovim: the host
evicts on a worker thread, Neovim says the summary is being asked, the
receipt comes as an event, :NodecodeStop ends the summary request, and a
second eviction, an ask or a move meanwhile is refused with one line
(doc/design.md "Decisions": an eviction by hand runs beside Neovim)."""

from __future__ import annotations

import json
from pathlib import Path

import pynvim
import pytest
from nodecode.agent.evicting import BUSY

from .conftest import configure, open_context, wait_for
from .test_evict_ui import READ
from .ui_helpers import make_session, record_notes

SUMMARY = "Turn 1 read a.txt: it says hello."
ASKED = "are leaving the context"  # in the summary request's instruction
ASKING = "evicting… asking for a summary of seq 1–"


def said(nv: pynvim.Nvim, part: str) -> list[dict]:
    return [n for n in nv.exec_lua("return _G.notes") if part in n["msg"]]


def summary_asked(srv) -> bool:
    return any(ASKED in json.dumps(r.body, ensure_ascii=False) for r in srv.model_requests)


@pytest.fixture
def two_turns(home: Path, workspace: Path, loopback):
    """Two turns (the first reads a file) with ``evict_summary`` on; the summary
    request's reply is up to each test. Returns the loopback server."""
    (workspace / "a.txt").write_text("hello\n")
    srv = loopback([READ, {"text": "done reading"}, {"text": "second answer"}])
    configure(home, srv, evict_summary="auto", evict_summary_timeout=60)
    make_session(home, workspace, ["first question", "second question"])
    return srv


def evicting_stalled(nv: pynvim.Nvim, srv) -> None:
    """:NodecodeEvict through 1, its summary request given part of a reply,
    then a minute of silence; returns once Neovim says it asks (notes recorded)."""
    srv.add_fault({"kind": "stall", "seconds": 60, "match": ASKED})
    record_notes(nv)
    nv.command("NodecodeEvict through 1")
    wait_for(lambda: said(nv, ASKING) and summary_asked(srv))


def test_evict_returns_at_once_and_the_receipt_with_the_summary_follows(nvim, two_turns):
    srv = two_turns
    srv.add_rounds([{"text": SUMMARY, "match": ASKED}])
    open_context(nvim)
    status = "return require('nodecode.ui.status').line()"
    before = wait_for(lambda: nvim.exec_lua(status))
    srv.chunk_delay = 0.5  # the summary's reply takes seconds
    record_notes(nvim)

    nvim.command("NodecodeEvict through 1")

    (asking,) = wait_for(lambda: said(nvim, ASKING))  # Neovim answers meanwhile
    assert nvim.eval("1") == 1 and summary_asked(srv)
    assert not said(nvim, "evicted at seq"), "the receipt came before the summary"
    assert asking["level"] == nvim.exec_lua("return vim.log.levels.INFO")
    assert ":NodecodeStop" in asking["msg"]
    (receipt,) = wait_for(lambda: said(nvim, "evicted at seq"))
    assert "summary of seq 1–" in receipt["msg"] and "in the stub (loopback-model" in receipt["msg"]
    assert "failed" not in receipt["msg"]
    # The open context buffer and the statusline follow.
    wait_for(lambda: any(x.endswith(" stub]]") for x in nvim.current.buffer[:]))
    buf = nvim.current.buffer[:]
    assert any(x.startswith("note: summary of seq 1–") for x in buf), buf
    assert any(x == "  " + SUMMARY for x in buf), buf
    assert wait_for(lambda: nvim.exec_lua(status) != before and nvim.exec_lua(status))


def test_stop_during_the_summary_ends_it_at_once_and_the_plain_stub_stands(nvim, two_turns):
    srv = two_turns
    evicting_stalled(nvim, srv)

    nvim.command("NodecodeStop")

    # Within wait_for's 10 s: neither the minute's stall nor the minute's limit.
    (receipt,) = wait_for(lambda: said(nvim, "evicted at seq"))
    assert "failed (stopped before the summary came): the plain stub stands" in receipt["msg"]
    assert not said(nvim, "nothing is running")
    open_context(nvim)
    stub = [x for x in nvim.current.buffer[:] if x.startswith("note: summary")]
    assert stub == [], "a stopped summary left a note"


def test_a_second_evict_while_one_runs_is_refused_with_one_line(nvim, two_turns):
    srv = two_turns
    evicting_stalled(nvim, srv)

    nvim.command("NodecodeCompact 50")

    (refused,) = wait_for(lambda: said(nvim, "an eviction is running"))
    assert refused["msg"] == f"nodecode: {BUSY}"
    assert refused["level"] == nvim.exec_lua("return vim.log.levels.ERROR")
    nvim.command("NodecodeStop")
    wait_for(lambda: said(nvim, "evicted at seq"))
    assert len(said(nvim, "evicted at seq")) == 1


def test_an_ask_or_an_undo_during_an_eviction_is_refused_and_sends_nothing(nvim, two_turns):
    srv = two_turns
    evicting_stalled(nvim, srv)
    sent = len(srv.model_requests)

    nvim.command("Nodecode a third question")
    nvim.command("NodecodeUndo")

    refused = wait_for(lambda: len(said(nvim, BUSY)) == 2 and said(nvim, BUSY))
    assert [n["msg"] for n in refused] == [f"nodecode: {BUSY}"] * 2
    assert len(srv.model_requests) == sent  # the ask was not sent
    nvim.command("NodecodeStop")
    wait_for(lambda: said(nvim, "evicted at seq"))
    # Once the eviction is done, the ask goes (on the context it left).
    srv.add_rounds([{"text": "third answer"}])
    nvim.command("Nodecode a third question")
    wait_for(lambda: len(srv.model_requests) == sent + 1)
