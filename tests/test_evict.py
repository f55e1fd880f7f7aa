"""Sessions driven over 85% of a small budget against the loopback server
(doc/design.md "Budget and eviction"): one warning, eviction to 50% in order, the stub, merging, restores,
and eviction by hand."""

from __future__ import annotations

import pytest
from helpers import run_cli
from nodecode.budget import evict as evictions
from nodecode.budget import stubs
from nodecode.context import derived
from nodecode.context import take as takes
from nodecode.context.derived import state
from nodecode.errors import SessionBusy, UserError
from nodecode.log import turns as turn_tree
from nodecode.log.leases import Lease
from nodecode.providers import registry
from test_budget_support import Session, check_valid, cli, prompt_total, read_round, texts

WINDOW = 4000  # budget 3000 (a quarter goes to the reply): warn over 2550, evict to 1500
BUDGET, WARN, HALF = 3000, 2550, 1500
NOTE = "f2 holds the words\nsecond line"
LONG_CELL = '(read-file "f3.txt") ; ' + "the long first line of a cell without a comment " * 3
RECALL = '(recall-log :match "text" :before {})'


@pytest.fixture
def session(loopback, tmp_path):
    made: list[Session] = []

    def make(**kw) -> Session:
        s = Session(tmp_path / f"s{len(made)}", loopback([], cache_min_tokens=1), **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def stub_header(a: int, b: int, turns: int, rounds: int = 0, of_turn: int = 0) -> str:
    """A stub's first line: ``turns`` whole turns, or ``rounds`` rounds of turn ``of_turn``."""
    many = f"{rounds} round{'s' * (rounds != 1)} of turn {of_turn}" if rounds else ""
    if turns or not rounds:
        many = f"{turns} turn{'s' * (turns != 1)}" + (f" · {many}" if many else "")
    return f"[history evicted: seq {a}–{b} · {many} · recall: {RECALL.format(b + 1)}]"


def cells_of(n: int) -> list[str]:
    """The stub lines of turn ``n``'s cells as the first turns below make them."""
    if n == 2:
        return [';; (read-file "f2.txt")', ';; (context :note "f2 holds the words\\nsecond line")']
    if n == 3:
        return [";; " + LONG_CELL[:100]]
    return [f";; read f{n}"]


def first_turns(s: Session) -> None:
    s.read_turn(1)
    s.ask(
        "read f2",
        [
            {
                "text": "Reading 2.",
                "calls": [
                    {"code": '(read-file "f2.txt")'},
                    {"code": '(context :note "f2 holds the words\\nsecond line")'},
                ],
            },
            {"text": "f2 read."},
        ],
    )
    s.read_turn(3, code=LONG_CELL)


def evictions_of(s: Session):
    return s.events("evict")


def context_ids(s: Session) -> list[int]:
    return [m.id for m in state(s.app.store, s.sid).messages]


def turn_asks_present(body: dict, upto: int) -> list[int]:
    sent = texts(body)
    return [n for n in range(1, upto + 1) if f"read f{n}" in sent]


def test_a_session_over_85_percent_is_warned_once_then_evicted_to_half(session):
    s = session(window=WINDOW)
    first_turns(s)
    n = 4
    while not evictions_of(s):
        assert s.read_turn(n).status == "done"
        n += 1
        assert n < 30
    bodies = [r.body for r in s.srv.model_requests]
    for body in bodies:
        check_valid("anthropic", body)

    warnings = [[t for t in texts(b) if t.startswith("[context at ")] for b in bodies]
    first = next(i for i, ws in enumerate(warnings) if ws)
    warning = texts(bodies[first])[-1]  # at the end of that request, once
    assert warnings[first] == [warning] and all(len(ws) <= 1 for ws in warnings)
    assert {w for ws in warnings for w in ws} == {warning}  # one warning, never repeated
    assert warning.startswith("[context at ") and "% of the budget (" in warning
    assert warning.endswith(
        f" of {BUDGET} tokens): edit it with (context) — at the next "
        "request still over 85% the oldest turns are evicted into a stub]"
    )
    assert warning in s.cb.notices  # the person was told too

    # The very next request evicted: the oldest turns went, whole, into one stub.
    evicting = bodies[first + 1]
    assert texts(evicting)[-1] != warning
    (evict,) = evictions_of(s)
    (stub,) = s.events("stub")
    gone = [k for k in range(1, n) if k not in turn_asks_present(evicting, n)]
    assert gone == list(range(1, len(gone) + 1)) and len(gone) >= 3  # oldest first
    last = turn_tree.get(s.app.store, s.sid, gone[-1]).last_seq
    expected = "\n".join(
        [
            stub_header(1, last, len(gone)),
            *[line for k in gone for line in cells_of(k)],
            "note: f2 holds the words\n  second line",
        ]
    )
    assert stub.text == expected
    assert evicting["messages"][0]["content"][0]["text"] == expected

    request = next(e for e in s.events("request") if e.seq > evict.seq)
    assert request.payload["fill"] <= HALF
    usage = s.srv.model_requests[first + 1].usage
    assert prompt_total("anthropic", usage) <= HALF * 1.02
    receipt = (s.app.context_dir(s.sid) / "context.receipt.txt").read_text()
    assert receipt.startswith(
        f"[[receipt default/{s.sid} evict]]\nevicted at seq {evict.seq}: "
        f"turns 1–{gone[-1]} (seq 1–{last}) · tokens: "
    )
    assert f" of {BUDGET} (" in receipt and evict.text in receipt
    assert any(t == evict.text for t in s.cb.notices)


def test_a_second_eviction_merges_with_the_stub_before_it(session):
    s = session(window=WINDOW)
    first_turns(s)
    n = 4
    while len(evictions_of(s)) < 2:
        assert s.read_turn(n).status == "done"
        n += 1
        assert n < 40
    first, second = s.events("stub")
    ids = context_ids(s)
    assert first.seq not in ids and second.seq in ids and second.seq > first.seq
    assert [m.role for m in state(s.app.store, s.sid).messages].count("stub") == 1
    assert second.payload["replaces"] == [first.seq]
    body = s.srv.model_requests[-1].body
    gone = [k for k in range(1, n) if k not in turn_asks_present(body, n)]
    last = turn_tree.get(s.app.store, s.sid, gone[-1]).last_seq
    assert second.text == "\n".join(
        [
            stub_header(1, last, len(gone)),
            *[line for k in gone for line in cells_of(k)],
            "note: f2 holds the words\n  second line",
        ]
    )
    assert len(gone) > first.payload["turns"]


def test_the_running_turns_older_rounds_go_but_never_its_ask_and_newest_round(session):
    s = session(window=WINDOW)
    rounds = [read_round(k) for k in range(1, 13)] + [{"text": "all read."}]
    result = s.ask("read every file, one at a time", rounds)
    assert result.status == "done"
    (stub,) = s.events("stub")
    (evict,) = evictions_of(s)
    bodies = [r.body for r in s.srv.model_requests]
    for body in bodies:
        check_valid("anthropic", body)
    evicting = next(b for b in bodies if stub.text in texts(b))
    sent = texts(evicting)
    assert sent[0] == "read every file, one at a time"  # the ask stays, first
    assert sent[1] == stub.text  # the stub stands where the rounds were
    calls = [c for c in s.events("call") if c.seq < evict.seq]
    results = {t.payload["call"]: t for t in s.events("tool")}
    went = stub.payload["rounds"]
    assert 2 <= went < len(calls)
    assert all(results[c.seq].text not in sent for c in calls[:went])
    assert all(results[c.seq].text in sent for c in calls[went:])  # incl. the newest round
    assert results[calls[-1].seq].seq in state(s.app.store, s.sid).path_messages
    a = s.events("assistant")[0].seq
    b = results[calls[went - 1].seq].seq
    assert stub.text == "\n".join(
        [stub_header(a, b, 0, went, 1), *[f";; read f{k}" for k in range(1, went + 1)]]
    )


def test_an_evicted_message_restored_through_the_file_returns_after_the_stub(session):
    s = session(window=WINDOW)
    first_turns(s)
    n = 4
    while not evictions_of(s):
        s.read_turn(n)
        n += 1
    (stub,) = s.events("stub")
    result = next(t for t in s.events("tool") if "word1x0" in t.text)
    call = result.payload["call"]
    assert result.seq not in context_ids(s)
    path = takes.export(s.app.workspace, s.sid)
    nonce = takes.latest_export(s.app.store, s.sid).payload["nonce"]
    path.write_text(path.read_text() + f"[[m:{nonce} {result.seq} tool]]\n")
    s.read_turn(n)
    body = s.srv.model_requests[-2].body  # the turn's first request took the restore
    sent = texts(body)
    check_valid("anthropic", body)
    assert result.text in sent and sent.index(result.text) > sent.index(stub.text)
    ids = context_ids(s)
    assert (
        ids.index(call) == ids.index(stub.seq) + 1 and ids.index(result.seq) == ids.index(call) + 1
    )
    receipt = (s.app.context_dir(s.sid) / "context.receipt.txt").read_text()
    assert f"restored 1 ({result.seq})" in receipt or "restored 2" in receipt


def test_restored_messages_are_evicted_last(session):
    s = session(window=WINDOW)
    n = 1
    while not evictions_of(s):
        s.read_turn(n)
        n += 1
    result = next(t for t in s.events("tool") if "word1x0" in t.text)
    path = takes.export(s.app.workspace, s.sid)
    nonce = takes.latest_export(s.app.store, s.sid).payload["nonce"]
    path.write_text(path.read_text() + f"[[m:{nonce} {result.seq} tool]]\n")
    while len(evictions_of(s)) < 2:
        s.read_turn(n)
        n += 1
    ids = context_ids(s)
    assert result.seq in ids  # later turns went first
    second = evictions_of(s)[-1]
    assert result.seq not in second.payload["evicted"]
    assert second.payload["after"] <= HALF


def test_the_warning_is_rearmed_after_the_fill_drops_below_85_percent(session):
    s = session(window=WINDOW)
    n = 1
    while not evictions_of(s):
        s.read_turn(n)
        n += 1
    assert not evictions.warned(derived.read(s.app.store, s.sid).requests)
    while len(s.events("notice")) < 2:
        s.read_turn(n)
        n += 1
    assert [e.text[:12] for e in s.events("notice")] == ["[context at "] * 2


def test_a_request_that_cannot_fit_is_not_sent_and_the_cli_says_why(loopback, tmp_path):
    srv = loopback([])
    s = Session(tmp_path, srv, window=900)  # budget 675: less than the system prompt
    s.close()
    done = run_cli(
        "ask",
        "hello",
        home=s.home,
        cwd=s.ws,
        env={"NODECODE_CONTEXT_TOKENS": "900", "NODECODE_SESSION": s.sid},
    )
    assert done.returncode == 1, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and "does not fit" in line and "budget of 675" in line
    assert srv.model_requests == []


LONG_ASK = "please look at " + " ".join(f"item{i}" for i in range(80))


def fixed_tokens(s: Session) -> int:
    """What the system prompt and tool definitions cost, by our count."""
    from nodecode import budget as budgets

    meter = budgets.Meter(
        s.app.config, registry.wire(s.ptype), derived.read(s.app.store, s.sid).views
    )
    return meter.system + meter.tools


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_ceiling_too_small_for_the_system_prompt_names_it_and_says_budget_clear(
    ptype, loopback, tmp_path
):
    """The system prompt and tools fill a ceiling learned from a small server:
    the message says so, and names the command that works (issue 11, item 11)."""
    srv = loopback([], cache_min_tokens=1, window=780)
    s = Session(tmp_path, srv, ptype=ptype, window=None)
    try:
        from nodecode import budget as budgets

        budgets.set_override(s.app.workspace, s.app.config, 100000)  # shadowed by the ceiling
        result = s.ask(LONG_ASK, [{"text": "never sent"}])
        assert result.status == "failed" and result.user_error
        line = result.error
        assert "\n" not in line and "does not fit" in line
        fixed = int(line.split("the system prompt and tools take ")[1].split(",")[0])
        assert abs(fixed - fixed_tokens(s)) <= 0.02 * fixed, line  # calibrated by the rejection
        assert "the ask " in line and "system prompt and tools alone are over the budget" in line
        assert "once the server's context is bigger, run `nodecode budget clear`" in line
        assert "budget set" not in line
        assert [r.status for r in srv.model_requests] == [400]
    finally:
        s.close()


def test_a_budget_the_ask_overflows_names_the_parts_and_budget_set(loopback, tmp_path):
    srv = loopback([], cache_min_tokens=1)
    s = Session(tmp_path, srv, window=None)
    try:
        from nodecode import budget as budgets

        fixed = fixed_tokens(s)
        budgets.set_override(s.app.workspace, s.app.config, (fixed + 60) * 4 // 3)
        result = s.ask(LONG_ASK, [{"text": "never sent"}])
        assert result.status == "failed" and result.user_error
        line = result.error
        assert f"the system prompt and tools take {fixed}" in line, line
        ask = int(line.split("the ask ")[1].split(",")[0].split()[0])
        assert 80 <= ask <= 200  # the long ask, counted
        assert "edit the ask and newest round with (context)" in line
        assert "raise the window with `nodecode budget set N`" in line
        assert "budget clear" not in line and srv.model_requests == []
    finally:
        s.close()


def test_a_window_from_the_environment_says_to_raise_it_not_budget_set(loopback, tmp_path):
    s = Session(tmp_path, loopback([]), window=900)  # NODECODE_CONTEXT_TOKENS=900
    try:
        line = s.ask("hello", [{"text": "never sent"}]).error
        assert "window 900 from NODECODE_CONTEXT_TOKENS" in line
        assert "raise NODECODE_CONTEXT_TOKENS" in line and "budget set N" not in line
    finally:
        s.close()


# -- by hand ----------------------------------------------------------------------


def test_evict_by_hand_to_a_percent_writes_a_receipt_and_keeps_the_newest_turn(session):
    s = session(window=20000)
    first_turns(s)
    s.read_turn(4)
    s.close()
    env = {"NODECODE_CONTEXT_TOKENS": "20000", "NODECODE_SESSION": s.sid}
    code, out, err = cli("evict", "5", home=s.home, env=env)
    assert code == 0, err
    receipt = (s.home / "context" / "default" / s.sid / "context.receipt.txt").read_text()
    assert receipt == out
    assert out.startswith(f"[[receipt default/{s.sid} evict]]\nevicted at seq ")
    assert "turns 1–3 (seq 1–" in out and " of 15000 (" in out
    s.reopen()
    st = state(s.app.store, s.sid)
    assert next(m.role for m in st.messages) == "stub"
    assert {m.turn for m in st.messages if m.role != "stub"} == {4}  # the newest stays whole
    s.read_turn(5)
    sent = texts(s.srv.model_requests[-2].body)
    assert sent[0].startswith("[history evicted: seq 1–") and "read f4" in sent

    code, out, err = cli("compact", home=s.home, env=env)  # the alias; 50% by default
    assert code == 0 and out.startswith("nothing to evict")
    code, out, err = cli("evict", "later", home=s.home, env=env)
    assert code == 1 and err.strip() == (
        "nodecode: evict: expected PERCENT or `through TURN` (got 'later')"
    )


def test_evict_through_a_turn_and_what_is_refused(session):
    s = session(window=None)
    for k in range(1, 5):
        s.read_turn(k)
    with pytest.raises(UserError, match="no known window"):
        evictions.manual(s.app.workspace, s.app.config, s.sid, percent=50)
    with pytest.raises(UserError, match="turn 9 is not on this session's path"):
        evictions.manual(s.app.workspace, s.app.config, s.sid, through=9)
    with Lease(s.app.store, s.sid), pytest.raises(SessionBusy):
        evictions.manual(s.app.workspace, s.app.config, s.sid, through=2)
    receipt = evictions.manual(s.app.workspace, s.app.config, s.sid, through=2)
    assert "evicted at seq" in receipt and "turns 1–2" in receipt
    (stub,) = s.events("stub")
    assert stub.text.startswith("[history evicted: seq 1–") and " · 2 turns · " in stub.text
    receipt = evictions.manual(
        s.app.workspace, s.app.config, s.sid, through=4
    )  # the newest turn (4) stays
    assert "turn 3 (" in receipt
    roles = [(m.role, m.turn) for m in state(s.app.store, s.sid).messages]
    assert roles[0][0] == "stub" and {t for r, t in roles[1:]} == {4}
    assert len([m for m in state(s.app.store, s.sid).messages if m.role == "stub"]) == 1
    assert evictions.parse_words(["through", "3"]) == (None, 3)
    assert evictions.parse_words("40%") == (40.0, None)
    with pytest.raises(UserError):
        evictions.parse_words(["later"])


def test_a_cell_line_in_a_stub():
    assert stubs.cell_line(';; read the parser\n(read-file "p.py")') == ";; read the parser"
    assert stubs.cell_line('\n(shell "ls")\n') == ';; (shell "ls")'
    assert stubs.cell_line("x" * 150) == ";; " + "x" * 100
    assert stubs.note_lines("one\ntwo\nthree\n") == "note: one\n  two\n  three"


def test_stub_words_agree_with_their_numbers():
    text = stubs.stub_text((3, 9), 0, [(7, 2)], [], [])
    assert text.startswith("[history evicted: seq 3–9 · 1 round of turn 7 · recall: ")
    text = stubs.stub_text((3, 9), 0, [(7, 1), (7, 2)], [], [])
    assert text.startswith("[history evicted: seq 3–9 · 2 rounds of turn 7 · recall: ")
    text = stubs.stub_text((3, 9), 1, [(7, 1), (7, 2)], [], [])
    assert " · 1 turn · 2 rounds of turn 7 · " in text
    assert " · 2 turns · recall: " in stubs.stub_text((3, 9), 2, [], [], [])


def test_a_call_restored_then_evicted_again_is_listed_once_in_the_stub(session):
    s = session(window=None)
    for k in range(1, 4):
        s.read_turn(k)
    evictions.manual(s.app.workspace, s.app.config, s.sid, through=2)
    (first,) = s.events("stub")
    assert first.text.splitlines()[1:] == [";; read f1", ";; read f2"]
    result = next(t for t in s.events("tool") if "word1x0" in t.text)
    path = takes.export(s.app.workspace, s.sid)
    nonce = takes.latest_export(s.app.store, s.sid).payload["nonce"]
    path.write_text(path.read_text() + f"[[m:{nonce} {result.seq} tool]]\n")
    s.read_turn(4)  # its first request takes the restore
    assert result.payload["call"] in context_ids(s)

    evictions.manual(s.app.workspace, s.app.config, s.sid, through=3)

    second = s.events("stub")[-1]
    assert second.payload["replaces"] == [first.seq]
    assert second.text.splitlines()[1:] == [";; read f1", ";; read f2", ";; read f3"]
    assert " · 3 turns · " in second.text.splitlines()[0]
    assert result.payload["call"] not in context_ids(s)


def stored_bytes(s: Session) -> int:
    """What the store holds: every event's text and payload, every blob's bytes."""
    read = s.app.store.read
    events = read("SELECT SUM(LENGTH(text) + IFNULL(LENGTH(payload), 0)) FROM events")[0][0]
    return events + (read("SELECT IFNULL(SUM(LENGTH(data)), 0) FROM blobs")[0][0])


def test_a_note_larger_than_the_window_is_refused_at_the_take_and_never_stored_again(session):
    # Issue "Trust, third round" 13: a 50 MB note was taken, could never fit, and
    # every later ask evicted it into a new stub that kept it whole (~100 MB each).
    s = session(window=WINDOW)
    s.read_turn(1)
    path = takes.export(s.app.workspace, s.sid)
    text = path.read_text()
    note = "word " * 200_000  # 1 MB: ~200,000 tokens against a 3,000-token budget
    path.write_text(text.replace("\nf1 read.\n", "\nf1 read.\n[[note]]\n" + note + "\n"))
    done = s.ask("go on", [{"text": "fine"}])
    assert done.status == "done", done.error
    [receipt] = [n for n in s.cb.notices if n.startswith("[[receipt")]
    head, refused = receipt.split("\n")  # the reason is one line
    assert refused.startswith("refused at seq ")
    [anchor] = [m.id for m in state(s.app.store, s.sid).messages if m.text == "f1 read."]
    assert f"the note under message {anchor} holds more than" in refused
    assert "all the budget of 3,000 leaves" in refused
    assert not any(m.role == "note" for m in state(s.app.store, s.sid).messages)
    assert all("word word" not in t for t in texts(s.srv.model_requests[-1].body))
    size = stored_bytes(s)
    for k in range(2):
        assert s.ask(f"again {k}", [{"text": "fine"}]).status == "done"
    assert stored_bytes(s) - size < 20_000  # two small turns, no copy of the note


def test_a_stub_keeps_a_long_note_cut_with_the_way_to_read_it_whole(session):
    s = session(window=20000)
    long = "long note " * 800  # 8,000 characters
    s.ask(
        "note it",
        [
            {"text": "Noting.", "calls": [{"code": f'(context :note "{long}")'}]},
            {"text": "noted."},
        ],
    )
    s.read_turn(2)
    evictions.manual(s.app.workspace, s.app.config, s.sid, through=1)
    (stub,) = s.events("stub")
    (note,) = s.events("note")
    assert note.text == long
    cut = f"[cut: 8,000 characters · whole: (recall-entry {note.seq})]"
    assert stub.text.endswith(cut) and len(stub.text) < 3000
    assert stub.payload["notes"] == [long[:2000] + "\n" + cut]


def test_a_turn_smaller_than_its_stub_is_not_evicted(session):
    s = session(window=None)
    s.ask("hi", [{"text": "ok"}])  # a tiny turn: its stub would be larger
    s.read_turn(2)
    ids = context_ids(s)

    said = evictions.manual(s.app.workspace, s.app.config, s.sid, through=1)

    assert said.startswith("nothing to evict: the fill is "), said
    assert said.endswith(
        "its stub would be larger than what it replaces, so the context would grow"
    ), said
    assert context_ids(s) == ids and not s.events("stub")
