"""Eviction with ``evict_summary`` on, through the CLI against the loopback server
(doc/design.md "Budget and eviction"): the stub keeps a summary as a note with
its cost, the originals stay recallable, and any failed summary leaves the
plain stub and says so."""

from __future__ import annotations

import json
import threading
import time

import pytest
from nodecode.agent.loop import Agent
from nodecode.budget import summary as summaries
from nodecode.context import take as takes
from nodecode.context.derived import state
from test_budget import REJECTIONS, Rejecting
from test_budget_support import Session, check_valid, cli, read_round, texts
from test_cost import anthropic_dollars, listed, money
from test_evict import first_turns

SUMMARY = "Turns 1-3 read f1, f2 and f3; f2 holds the words."
ASKED = "are leaving the context"  # in the summary request's instruction


@pytest.fixture
def session(loopback, tmp_path):
    made: list[Session] = []

    def make(**config) -> Session:
        srv = loopback([], cache_min_tokens=1)
        s = Session(tmp_path / f"s{len(made)}", srv, window=20000, config=config)
        made.append(s)
        first_turns(s)
        s.read_turn(4)
        s.close()
        return s

    yield make
    for s in made:
        s.close()


def evict_through_3(s: Session) -> tuple[int, str, str]:
    return cli("evict", "through", "3", home=s.home, env={"NODECODE_SESSION": s.sid})


def plain(blocks: list[dict]) -> list[dict]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


def stub_of(s: Session):
    s.reopen()
    (stub,) = [m for m in state(s.app.store, s.sid).messages if m.role == "stub"]
    return stub


def test_an_eviction_with_a_summary_keeps_it_in_the_stub_with_its_cost(session):
    s = session(evict_summary="auto")
    before = s.srv.model_requests[-1].body
    s.srv.add_rounds([{"text": SUMMARY, "match": ASKED}])
    code, out, err = evict_through_3(s)
    assert code == 0, err
    asked = s.srv.model_requests[-1]
    body = asked.body
    check_valid("anthropic", body)
    assert body["max_tokens"] == summaries.MAX_TOKENS
    # The context as the last request sent it and its reply (the prefix the cache
    # holds), then the ask naming the span.
    sent, last = texts(body), texts(before)
    assert sent[: len(last)] == last and sent[len(last) : -1] == ["f4 read."]
    assert sent[-1].startswith("[nodecode: the messages above from seq 1 to seq ")
    assert ASKED in sent[-1]
    assert plain(body["system"]) == plain(before["system"]) and body["tools"] == before["tools"]
    assert asked.usage["cache_read"] > 0

    stub = stub_of(s)
    head, *rest = stub.text.split("\n")
    assert head.startswith("[history evicted: seq 1–") and '(recall-log :match "text"' in head
    output = asked.usage["output"]
    note = next(k for k, line in enumerate(rest) if line.startswith("note: summary of seq 1–"))
    assert rest[note].endswith(f"(loopback-model, {output} tokens):")
    assert rest[note + 1] == "  " + SUMMARY
    assert stub.payload["summary"] == {"model": "loopback-model", "tokens": output}
    b = stub.payload["span"][1]
    assert out.endswith(f"\nsummary of seq 1–{b} in the stub (loopback-model, {output} tokens)\n")

    # The originals are still there for recall.
    read2 = next(e for e in s.events("tool") if "word2x0" in e.text)
    code, entry, err = cli(
        "recall-entry", str(read2.seq), home=s.home, env={"NODECODE_SESSION": s.sid}
    )
    assert code == 0 and "word2x0" in entry
    code, found, err = cli("recall-search", "word1x5", home=s.home)
    assert code == 0 and "word1x5" in found

    # The next request sends the stub with the summary.
    s.read_turn(5)
    assert SUMMARY in "\n".join(texts(s.srv.model_requests[-2].body))


def test_a_summary_by_a_named_model_shows_what_it_cost(session):
    s = session(evict_summary="claude-sonnet-4-5")
    s.set_provider(models_dev="anthropic")
    s.srv.add_rounds([{"text": SUMMARY, "match": ASKED}])
    code, out, err = evict_through_3(s)
    assert code == 0, err
    asked = s.srv.model_requests[-1]
    assert asked.body["model"] == "claude-sonnet-4-5"
    dollars = anthropic_dollars(asked.usage, listed("anthropic", "claude-sonnet-4-5"))
    stub = stub_of(s)
    line = next(x for x in stub.text.split("\n") if x.startswith("note: summary of seq"))
    output = asked.usage["output"]
    assert line.endswith(f"(claude-sonnet-4-5, {output} tokens · {money(dollars)}):")
    assert stub.payload["summary"]["cost"] == pytest.approx(dollars)
    # The session's spending counts it: loopback-model has no price, the summary has.
    env = {"NODECODE_SESSION": s.sid}
    code, out, err = cli("recall-cost", "--json", home=s.home, env=env)
    spent = json.loads(out)
    assert spent["dollars"] == pytest.approx(dollars) and spent["priced"] == 1
    assert spent["unpriced"] == len(s.srv.model_requests) - 1


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        (dict(max_retries=0), "failed (loopback: still failing after 0 retries: HTTP 500"),
        (dict(evict_summary_timeout=0.5), "failed (no reply within 0.5 s)"),
    ],
)
def test_a_failed_summary_leaves_the_plain_stub_and_says_so(session, setup, why):
    s = session(evict_summary="auto", **setup)
    if "max_retries" in setup:
        s.srv.add_fault({"kind": "500"})
    else:
        s.srv.add_fault({"kind": "stall", "seconds": 5})
    s.srv.add_rounds([{"text": SUMMARY, "match": ASKED}])
    code, out, err = evict_through_3(s)
    assert code == 0, err
    assert "summary of seq 1–" in out and "the plain stub stands" in out
    assert why in out, out
    stub = stub_of(s)
    assert SUMMARY not in stub.text and "summary" not in stub.payload
    assert not any(x.startswith("note: summary") for x in stub.text.split("\n"))
    (evict,) = s.events("evict")
    assert "the plain stub stands" in evict.text  # in the log too


def test_with_summaries_off_no_summary_is_asked_for(session):
    s = session()
    n = len(s.srv.model_requests)
    code, out, err = evict_through_3(s)
    assert code == 0, err
    assert len(s.srv.model_requests) == n
    stub = stub_of(s)
    assert "summary" not in stub.payload and "note: summary" not in stub.text


def test_a_summary_the_person_edits_stays_edited_when_the_stub_merges(session):
    s = session(evict_summary="auto")
    env = {"NODECODE_SESSION": s.sid}
    s.srv.add_rounds([{"text": "First summary.", "match": ASKED}])
    code, out, err = cli("evict", "through", "2", home=s.home, env=env)
    assert code == 0, err
    s.reopen()
    path = takes.export(s.app.workspace, s.sid)
    text = path.read_text()
    assert "\n  First summary.\n" in text
    path.write_text(text.replace("\n  First summary.\n", "\n  f2 matters; f1 does not.\n"))
    s.close()
    s.srv.add_rounds([{"text": "Second summary.", "match": ASKED}])
    code, out, err = evict_through_3(s)  # takes the edit first, then merges the stub
    assert code == 0, err
    stub = stub_of(s)
    notes = [x for x in stub.text.split("\n") if x.startswith("note: summary of seq")]
    assert len(notes) == 2 and notes[0].startswith("note: summary of seq 1–")
    assert "\n  f2 matters; f1 does not.\n" in stub.text
    assert "First summary." not in stub.text and stub.text.endswith("\n  Second summary.")
    first = s.events("stub")[0]  # the stub as first written stays in the log
    code, entry, err = cli("recall-entry", str(first.seq), home=s.home, env=env)
    assert code == 0 and "First summary." in entry


def test_context_counts_the_summary_as_the_stubs(session):
    def stubs_part(s: Session) -> int:
        env = {"NODECODE_SESSION": s.sid, "NODECODE_CONTEXT_TOKENS": "20000"}
        code, out, err = cli("status", "--json", home=s.home, env=env)
        assert code == 0, err
        return json.loads(out)["parts"]["stubs"]

    plain_stub, summed = session(), session(evict_summary="auto")
    summed.srv.add_rounds([{"text": SUMMARY, "match": ASKED}])
    for s in (plain_stub, summed):
        code, out, err = evict_through_3(s)
        assert code == 0, err
    note = next(x for x in stub_of(summed).text.split("\n") if x.startswith("note: summary"))
    more = stubs_part(summed) - stubs_part(plain_stub)
    assert more >= len(f"{note} {SUMMARY}".split())  # about a token a word, at least


def test_an_automatic_eviction_asks_for_the_summary_before_the_request(loopback, tmp_path):
    s = Session(
        tmp_path / "auto",
        loopback([], cache_min_tokens=1),
        window=4000,
        config={"evict_summary": "auto"},
    )
    try:
        s.srv.add_rounds([{"text": SUMMARY, "match": ASKED}])  # waits for its request
        first_turns(s)
        n = 4
        while not s.events("evict"):
            assert s.read_turn(n).status == "done"
            n += 1
            assert n < 30
        (stub,) = s.events("stub")
        assert f"\n  {SUMMARY}" in stub.text and stub.payload["summary"]["tokens"] > 0
        bodies = [r.body for r in s.srv.model_requests]
        asking = next(k for k, b in enumerate(bodies) if ASKED in texts(b)[-1])
        assert stub.text in texts(bodies[asking + 1])  # the request the eviction was for
        assert stub.text not in texts(bodies[asking])
        (evict,) = s.events("evict")
        assert evict.text in s.cb.notices and "failed" not in evict.text
    finally:
        s.close()


@pytest.mark.parametrize("ptype", ["openai", "openai-responses", "google"])
def test_a_summary_over_the_other_wire_formats(loopback, tmp_path, ptype):
    s = Session(
        tmp_path / ptype,
        loopback([]),
        ptype=ptype,
        window=20000,
        config={"evict_summary": "auto"},
    )
    try:
        first_turns(s)
        s.read_turn(4)
        s.close()
        s.srv.add_rounds([{"text": SUMMARY, "match": ASKED}])
        code, out, err = evict_through_3(s)
        assert code == 0, err
        assert "failed" not in out, out
        if ptype == "openai":
            check_valid(ptype, s.srv.model_requests[-1].body)
        assert f"\n  {SUMMARY}" in stub_of(s).text
    finally:
        s.close()


def test_an_eviction_after_a_too_large_rejection_asks_for_no_summary(tmp_path):
    srv = Rejecting([], cache_min_tokens=1).start()
    s = Session(tmp_path / "s", srv, window=None, config={"evict_summary": "auto"})
    try:
        for k in range(1, 7):
            s.read_turn(k)
        srv.reject(json.dumps(REJECTIONS["anthropic"]))
        s.srv.add_rounds([{"text": SUMMARY, "match": ASKED}])  # never taken
        n = len(srv.model_requests)
        assert s.read_turn(7).status == "done"
        (evict,) = s.events("evict")
        assert evict.payload["reason"] == "overflow"
        assert evict.text.endswith("not asked for: the provider rejected the context as too large")
        assert not any(ASKED in texts(r.body)[-1] for r in srv.model_requests[n:])
        (stub,) = s.events("stub")
        assert "summary" not in stub.payload and SUMMARY not in stub.text
    finally:
        s.close()
        srv.stop()


def test_a_stop_while_the_summary_is_asked_ends_the_turn_at_once(loopback, tmp_path):
    s = Session(
        tmp_path / "stop",
        loopback([], cache_min_tokens=1),
        window=4000,
        config={"evict_summary": "auto", "evict_summary_timeout": 60},
    )
    try:
        first_turns(s)
        n = 4
        # Turns until the next one evicts: the request after this one would be too big.
        s.srv.add_fault({"kind": "stall", "seconds": 45, "match": ASKED})
        cancel, done = threading.Event(), []
        while not any(ASKED in texts(r.body)[-1] for r in s.srv.model_requests):
            s.srv.add_rounds([read_round(n), {"text": f"f{n} read."}])
            worker = threading.Thread(
                target=lambda k=n: done.append(Agent(s.app, s.sid).ask(f"read f{k}", s.cb, cancel))
            )
            worker.start()
            deadline = time.monotonic() + 30
            while worker.is_alive() and not any(
                ASKED in texts(r.body)[-1] for r in s.srv.model_requests
            ):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            if worker.is_alive():
                break  # the summary is being asked, and stalls
            n += 1
            assert n < 30
        stopped = time.monotonic()
        cancel.set()  # the person stops the turn
        worker.join(10)
        assert not worker.is_alive()
        assert time.monotonic() - stopped < 5  # not the 45 s stall nor the 60 s limit
        assert done[-1].status != "done"
        (evict,) = s.events("evict")
        assert "stopped before the summary came" in evict.text and "plain stub" in evict.text
    finally:
        s.close()
