"""Thinking in the context file, eviction, recall and /context: blocks
``[[m:NONCE ID thinking]]``, keep and delete as for any message, rewrites
refused, the running round's thinking never dropped, and a valid request
after every edit (the structural validator knows thinking blocks; the
loopback refuses thinking that did not go back as received)."""

from __future__ import annotations

import pytest
from helpers import write_config
from nodecode import budget as budgets
from nodecode import recall
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.context import take as takes
from nodecode.context.fileformat import split
from nodecode.providers.types import REDACTED_THINKING
from nodecode.views import status
from validator import check, problems

THOUGHT_1 = "Turn one: a.txt is the file to read."
THOUGHT_2 = "Turn two: now b.txt."
REFUSED = "a thinking block is signed by the provider: keep it or delete it"
ENABLED = {"type": "enabled", "budget_tokens": 1024}


def turn(thought, name):
    return [
        {
            "thinking": [thought],
            "text": f"Reading {name}.",
            "calls": [{"code": f'(read-file "{name}")'}],
        },
        {"text": f"{name} read."},
    ]


class Notices(TurnCallbacks):
    def __init__(self):
        self.notices: list[str] = []
        self.approve_hook = None

    def on_notice(self, text):
        self.notices.append(text)

    def approve(self, kind, detail):
        if self.approve_hook:
            self.approve_hook()
        return True


class Thinking:
    """A session with thinking on, against the loopback server."""

    def __init__(self, tmp_path, loopback, ptype="anthropic", thinking=ENABLED):
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "a.txt").write_text("alpha\n")
        (ws / "b.txt").write_text("beta\n")
        self.srv = loopback([], cache_min_tokens=1)
        models = [{"id": "loopback-model", "max_tokens": 4096, "thinking": thinking}]
        home = write_config(tmp_path / "home", self.srv, ptype, models=models)
        self.ptype = ptype
        self.app = App.open(home, "default", ws, environ={})
        self.sid = self.app.new_session("t")
        self.cb = Notices()

    def ask(self, text, rounds):
        self.srv.add_rounds(rounds)
        return Agent(self.app, self.sid).ask(text, self.cb)

    def thinking_ids(self):
        return [e.seq for e in self.app.store.events(self.sid) if e.kind == "thinking"]

    def export(self):
        path = takes.export(self.app.workspace, self.sid)
        return path, path.read_text()

    def body(self):
        return self.srv.model_requests[-1].body

    def blocks(self, kind="thinking"):
        return [b for m in self.body()["messages"] for b in m["content"] if b["type"] == kind]

    def receipt(self):
        return takes.receipt_file(self.app.workspace, self.sid).read_text()

    def all_answered(self):
        return all(r.status == 200 for r in self.srv.model_requests)


@pytest.fixture
def session(tmp_path, loopback):
    s = Thinking(tmp_path, loopback)
    yield s
    s.app.close()


def remove_block(text, mid):
    """The file without the block of message ``mid``."""
    lines = text.split("\n")
    out, skip = [], False
    for line in lines:
        if line.startswith("[[m:"):
            skip = line.split(" ")[1] == str(mid)
        if not skip:
            out.append(line)
    return "\n".join(out)


def test_an_export_shows_each_thinking_block_with_its_text(session):
    session.ask("read a", turn(THOUGHT_1, "a.txt"))
    (tid,) = session.thinking_ids()

    path, text = session.export()

    nonce = text.split("\n", 1)[0].split(" ")[-1].rstrip("]")
    blocks = split(text, nonce).blocks
    thinking = [b for b in blocks if b.role == "thinking"]
    assert [(b.id, b.body) for b in thinking] == [(tid, THOUGHT_1)]
    assert f"[[m:{nonce} {tid} thinking]]\n{THOUGHT_1}\n" in text


def test_redacted_thinking_shows_as_a_one_line_placeholder(session):
    redacted = {"thinking": [{"redacted": True}], "calls": [{"code": "(list-files)"}]}
    session.ask("list", [redacted, {"text": "ok"}])

    _, text = session.export()

    assert f" thinking]]\n{REDACTED_THINKING}\n" in text
    assert "\n" not in REDACTED_THINKING


def test_a_kept_thinking_block_goes_back_unchanged_with_a_note_beside_it(session):
    session.ask("read a", turn(THOUGHT_1, "a.txt"))
    (tid,) = session.thinking_ids()
    logged = session.app.store.event(session.sid, tid).payload["block"]
    path, text = session.export()
    path.write_text(text.replace(f"{THOUGHT_1}\n", f"{THOUGHT_1}\n[[note]]\nremember a\n", 1))

    session.ask("and now?", [{"text": "fine"}])

    assert "taken at seq" in session.receipt() and "noted 1" in session.receipt()
    assert session.blocks() == [logged]
    assert session.all_answered()
    check("anthropic", session.body())


def test_deleting_a_finished_turns_thinking_is_taken_and_cached_as_usual(session):
    session.ask("read a", turn(THOUGHT_1, "a.txt"))
    (tid,) = session.thinking_ids()
    path, text = session.export()
    path.write_text(remove_block(text, tid))

    session.ask("read b", turn(THOUGHT_2, "b.txt"))

    receipt = session.receipt()
    assert f"deleted 1 ({tid})" in receipt
    assert f"cache: unchanged through {tid - 2}" in receipt  # the ask before it
    assert [b["thinking"] for b in session.blocks()] == [THOUGHT_2]
    assert session.all_answered()
    check("anthropic", session.body())


def test_rewriting_a_thinking_block_is_refused_naming_its_line(session):
    session.ask("read a", turn(THOUGHT_1, "a.txt"))
    (tid,) = session.thinking_ids()
    path, text = session.export()
    edited = text.replace(THOUGHT_1, "I was thinking something else.")
    line = text.split("\n").index(THOUGHT_1)  # the body line; its header is the line before
    assert takes.validate(session.app.workspace, session.sid, edited)["errors"] == [[line, REFUSED]]
    path.write_text(edited)

    session.ask("and now?", [{"text": "fine"}])

    assert "refused at seq" in session.receipt() and f"line {line}: {REFUSED}" in session.receipt()
    assert [b["thinking"] for b in session.blocks()] == [THOUGHT_1]
    assert any(REFUSED in n for n in session.cb.notices)
    assert session.all_answered()
    check("anthropic", session.body())


def test_restoring_a_thinking_block_with_another_body_is_refused_too(session):
    session.ask("read a", turn(THOUGHT_1, "a.txt"))
    (tid,) = session.thinking_ids()
    path, text = session.export()
    path.write_text(remove_block(text, tid))
    session.ask("next", [{"text": "ok"}])
    path, text = session.export()
    nonce = text.split("\n", 1)[0].split(" ")[-1].rstrip("]")

    back = text + f"[[m:{nonce} {tid} thinking]]\nnot what it thought\n"

    errors = takes.validate(session.app.workspace, session.sid, back)["errors"]
    assert [e[1] for e in errors] == [REFUSED]


def test_the_running_rounds_thinking_is_not_dropped_while_its_round_is_newest(session):
    ask = session.app.store.last_seq(session.sid) + 1
    thinking = ask + 2  # the ask, the request, then the thinking
    rounds = [
        {"thinking": [THOUGHT_1], "calls": [{"code": f"(context :drop ({thinking}))"}]},
        {"text": "kept."},
    ]

    assert session.ask("drop your thinking", rounds).status == "done"

    assert session.thinking_ids() == [thinking]
    (result,) = [e for e in session.app.store.events(session.sid) if e.kind == "tool"]
    assert result.payload["error"]
    assert f"deleting thinking {thinking} of the running turn's newest round" in result.text
    round_2 = session.srv.model_requests[1].body
    assert round_2["messages"][1]["content"][0]["thinking"] == THOUGHT_1
    assert session.all_answered()
    check("anthropic", round_2)


def test_a_file_edit_deleting_the_running_rounds_thinking_is_refused_at_the_take(session):
    def delete_it():  # while round 1's call waits: the person deletes the newest thinking
        (tid,) = session.thinking_ids()
        path, text = session.export()
        path.write_text(remove_block(text, tid))

    session.cb.approve_hook = delete_it
    rounds = [
        {"thinking": [THOUGHT_1], "calls": [{"code": '(shell "true")'}]},
        {"text": "kept."},
    ]

    assert session.ask("run it", rounds).status == "done"

    (tid,) = session.thinking_ids()
    receipt = session.receipt()
    assert "refused at seq" in receipt
    assert f"deleting thinking {tid} of the running turn's newest round" in receipt
    round_2 = session.srv.model_requests[1].body
    assert round_2["messages"][1]["content"][0]["thinking"] == THOUGHT_1
    assert session.all_answered()
    check("anthropic", round_2)


def test_eviction_keeps_the_running_rounds_thinking_and_stubs_leave_thinking_out(session):
    big = " ".join(f"idea{i}" for i in range(1500))
    session.ask("read a", turn(big, "a.txt"))
    store, config = session.app.store, session.app.config

    def shrink():  # before round 2's request: a budget the finished turn no longer fits
        fill = budgets.fill_of(store, session.sid, config)
        budgets.set_override(session.app.workspace, config, 4096 + fill - 50)

    session.cb.approve_hook = shrink
    rounds = [
        {"thinking": [THOUGHT_2], "calls": [{"code": '(shell "true")'}]},
        {"text": "done."},
    ]

    assert session.ask("run it", rounds).status == "done"

    (evicted,) = [e for e in store.events(session.sid) if e.kind == "evict"]
    first_thinking, newest_thinking = session.thinking_ids()
    assert first_thinking in evicted.payload["evicted"]
    assert newest_thinking not in evicted.payload["evicted"]
    (stub,) = [e for e in store.events(session.sid) if e.kind == "stub"]
    assert "idea1" not in stub.text and stub.text.split("\n")[1:] == [';; (read-file "a.txt")']
    round_2 = session.srv.model_requests[-1].body
    assert [b["thinking"] for b in session.blocks()] == [THOUGHT_2]
    assert session.all_answered()
    check("anthropic", round_2)


def test_recall_reads_thinking_like_any_message(session):
    session.ask("read a", turn(THOUGHT_1, "a.txt"))
    (tid,) = session.thinking_ids()

    lines = recall.recall_log(session.app.store, session.sid, match="file to read")

    assert lines == [f"[seq {tid} · turn 1 · thinking] {THOUGHT_1}"]
    assert THOUGHT_1 in recall.recall_entry(session.app.store, session.sid, tid)


def test_context_shows_thinking_as_its_own_part(session):
    session.ask("read a", turn(THOUGHT_1, "a.txt"))

    report = status.report(session.app.workspace, session.app.basis(strict=True), session.sid)

    assert report["parts"]["thinking"] > 0
    assert f"thinking {report['parts']['thinking']}" in status.render(report)


def test_openai_reasoning_not_sent_back_is_not_in_the_fill(tmp_path, loopback):
    s = Thinking(tmp_path, loopback, "openai", thinking={"send_back": False})
    try:
        s.ask("read a", turn(THOUGHT_1, "a.txt"))
        report = status.report(s.app.workspace, s.app.basis(strict=True), s.sid)
        assert report["parts"]["thinking"] == 0
        assert s.thinking_ids()
    finally:
        s.app.close()


def test_openai_reasoning_sent_back_is_in_the_fill_and_the_request_is_valid(tmp_path, loopback):
    s = Thinking(tmp_path, loopback, "openai", thinking={"send_back": True})
    try:
        s.ask("read a", turn(THOUGHT_1, "a.txt"))
        report = status.report(s.app.workspace, s.app.basis(strict=True), s.sid)
        assert report["parts"]["thinking"] > 0
        check("openai", s.body())
    finally:
        s.app.close()


def test_the_validator_knows_thinking_blocks():
    base = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": []},
            {"role": "user", "content": [{"type": "text", "text": "more"}]},
        ]
    }
    thinking = {"type": "thinking", "thinking": "t", "signature": "sig"}
    text = {"type": "text", "text": "x"}

    base["messages"][1]["content"] = [thinking, text]
    assert problems("anthropic", base) == []
    base["messages"][1]["content"] = [text, thinking]
    assert problems("anthropic", base) == ["message 1 block 1: thinking blocks must come first"]
    base["messages"][1]["content"] = [{**thinking, "cache_control": {"type": "ephemeral"}}]
    assert problems("anthropic", base) == ["message 1 block 0: cache_control on a thinking block"]
    base["messages"][1]["content"] = [{"type": "redacted_thinking"}]
    assert problems("anthropic", base) == ["message 1 block 0: redacted_thinking needs its data"]
