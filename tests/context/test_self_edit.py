"""The agent edits its own context mid-turn, as the reference intends: one round
exports it with (context), the next edits the file with a cell, and the round
after that reads the edit (doc/design.md "The context")."""

from __future__ import annotations

from nodecode.context import take as takes

EXPORT = {"text": "Exporting my context.", "calls": [{"code": ";; export my context\n(context)"}]}
DONE = {"text": "Context tidied."}
NL = "\n"


def lisp(text: str) -> str:
    """``text`` as a cell string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def self_edit(h, cell: str, comment: str = ";; edit my context"):
    """A turn: (context), then ``cell`` (which edits the exported file), then an answer.
    Returns the seq the (context) call will get and the file's path."""
    path = h.app.context_dir(h.sid) / "context.txt"
    call = h.app.store.last_seq(h.sid) + 4  # ask, request, reply text, then the call
    edit = {"text": "Editing it.", "calls": [{"code": f"{comment}\n{cell}"}]}
    result = h.ask("tidy your context", [EXPORT, edit, DONE])
    assert result.status == "done", result
    assert h.app.store.event(h.sid, call).text.endswith("(context)")
    return call, path


def results(h) -> dict[str, str]:
    """tool_use id → tool_result content in the last request."""
    return {
        b["tool_use_id"]: b["content"]
        for msg in h.last_body()["messages"]
        for b in msg["content"]
        if b["type"] == "tool_result"
    }


def receipt(h) -> str:
    return takes.receipt_file(h.app.workspace, h.sid).read_text()


def test_edit_file_on_the_exported_path_is_taken_at_the_next_round(harness):
    path = harness.app.context_dir(harness.sid) / "context.txt"
    file = lisp(str(path))
    cell = (
        f"(edit-file {file} {lisp('alpha' + NL + '[seq 5]' + NL)} "
        f"{lisp('alpha (summarised)' + NL)})"
        + NL
        + f"(edit-file {file} {lisp('b.txt says beta.' + NL)} "
        f"{lisp('b.txt says beta.' + NL + '[[note]]' + NL + 'beta matters' + NL)})"
    )
    call, path = self_edit(harness, cell)
    got = results(harness)
    assert got["toolu_nc4"] == "alpha (summarised)\n[edited · original: (recall-entry 5)]"
    assert got[f"toolu_nc{call}"].startswith(str(path))  # after the export: untouched
    sent = harness.sent_texts()
    at = sent.index(("assistant", "b.txt says beta."))
    assert sent[at + 1] == ("assistant", "beta matters")
    r = receipt(harness)
    assert r.startswith(f"[[receipt default/{harness.sid} export 1]]\ntaken at seq ")
    assert "rewrote 1 (5)" in r and "noted 1 (" in r
    assert harness.app.store.event(harness.sid, 5).text == "alpha\n[seq 5]"  # log unchanged


def test_a_shell_sed_on_the_exported_path_is_taken_at_the_next_round(harness):
    path = harness.app.context_dir(harness.sid) / "context.txt"
    sed = f"sed -i '/^\\[\\[m:[a-z0-9]* 12 tool\\]\\]$/,/^\\[seq 12\\]$/d' '{path}'"
    call, _ = self_edit(harness, f"(shell {lisp(sed)})", ";; drop the old read of b")
    got = results(harness)
    assert "toolu_nc11" not in got and "beta\n[seq 12]" not in got.values()
    assert "toolu_nc4" in got and f"toolu_nc{call}" in got
    r = receipt(harness)
    assert "\ntaken at seq " in r and "deleted 2 (11 12)" in r
    assert "pairs: deleting 12 took its call 11" in r


def test_deleting_the_call_that_exported_is_refused_and_the_agent_is_told(harness):
    path = harness.app.context_dir(harness.sid) / "context.txt"
    call = harness.app.store.last_seq(harness.sid) + 4
    sed = f"sed -i '/^\\[\\[m:[a-z0-9]* {call} call\\]\\]$/,/^(context)$/d' '{path}'"
    got_call, _ = self_edit(harness, f"(shell {lisp(sed)})", ";; drop the export call")
    assert got_call == call
    result = next(
        e.seq
        for e in harness.app.store.events(harness.sid)
        if e.role == "tool" and e.payload.get("call") == call
    )  # after the export event
    reason = f"deleting call {call} whose result {result} was logged after this export"
    r = receipt(harness)
    assert "\nrefused at seq " in r and reason in r, r
    last_user = harness.last_body()["messages"][-1]
    assert last_user["role"] == "user"
    texts = [b["text"] for b in last_user["content"] if b["type"] == "text"]
    assert texts and "was refused" in texts[-1] and reason in texts[-1]
    assert f"toolu_nc{call}" in results(harness)  # nothing was taken
