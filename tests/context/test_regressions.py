"""Failures the property test (test_property.py) found, minimised."""

from __future__ import annotations

from nodecode.cells.evaluate import evaluate
from nodecode.context import take as takes
from validator import check


def form(h, code: str) -> str:
    return evaluate(code, h.app.cell_env(h.sid, approve=lambda *a: True)).output


def receipt(h) -> str:
    return takes.receipt_file(h.app.workspace, h.sid).read_text()


def last_user_text(h) -> str:
    return [b for b in h.last_body()["messages"][-1]["content"] if b["type"] == "text"][-1]["text"]


def test_a_refusal_notice_reaches_the_request_when_another_edit_is_taken_with_it(harness):
    path = takes.export(harness.app.workspace, harness.sid)
    path.write_text("[[export nope]]\n" + path.read_text().split("\n", 1)[1])
    assert "Pending" in form(harness, "(context :drop (3))")
    harness.ask("go on", [{"text": "ok"}])
    r = receipt(harness)
    assert "\ntaken at seq " in r and "deleted 1 (3)" in r
    assert "\nrefused at seq " in r and "first line changed" in r
    notice = [t for role, t in harness.sent_texts() if role == "user" and "was refused" in t]
    assert notice and "first line changed" in notice[0]
    check("anthropic", harness.last_body())


def test_a_span_in_an_idle_form_does_not_drop_the_ask_that_follows_it(harness):
    assert "Pending" in form(harness, "(context :drop ((1 . 1000)))")
    ask = harness.app.store.last_seq(harness.sid) + 1
    harness.ask("a fresh start", [{"text": "ok"}])
    assert "\ntaken at seq " in receipt(harness) and f" {ask})" not in receipt(harness)
    assert harness.sent_texts() == [("user", "a fresh start")]
    check("anthropic", harness.last_body())


def test_a_form_dropping_the_call_that_runs_it_is_refused_like_a_file_edit(harness):
    call = harness.app.store.last_seq(harness.sid) + 4  # ask, request, reply text, call
    harness.ask(
        "forget everything",
        [
            {"text": "Dropping.", "calls": [{"code": '(context :drop ((1 . 100000)) :note "n")'}]},
            {"text": "ok"},
        ],
    )
    r = receipt(harness)
    assert "\nrefused at seq " in r and f"deleting call {call} whose result" in r
    assert "logged after this form" in last_user_text(harness)
    assert ("assistant", "Reading.") in harness.sent_texts()  # nothing was taken
    check("anthropic", harness.last_body())
