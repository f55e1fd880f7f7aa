"""Each edit kind and each refusal: the next request body and the receipt (doc/design.md "The context")."""

from __future__ import annotations

from nodecode.context import take as takes
from nodecode.context.fileformat import split


def export(h):
    path = takes.export(h.app.workspace, h.sid)
    return path, path.read_text()


def nonce_of(text):
    return text.split("\n", 1)[0].split()[-1].rstrip("]")


def blocks(text):
    return {b.id: b for b in split(text, nonce_of(text)).blocks}


def remove_block(text, mid):
    n = nonce_of(text)
    lines = text.split("\n")
    start = lines.index(next(line for line in lines if line.startswith(f"[[m:{n} {mid} ")))
    end = start + 1
    while end < len(lines) and not lines[end].startswith(f"[[m:{n} "):
        end += 1
    return "\n".join(lines[:start] + lines[end:])


def receipt(h):
    return takes.receipt_file(h.app.workspace, h.sid).read_text()


def next_request(h, text="go on"):
    h.ask(text, [{"text": "ok"}])
    return h.sent_texts()


def test_export_writes_every_message_byte_exact_with_a_fresh_nonce(harness):
    path, text = export(harness)
    first = text.split("\n", 1)[0]
    assert first == f"[[export default/{harness.sid} 1 {nonce_of(text)}]]"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    got = blocks(text)
    assert list(got) == [1, 3, 4, 5, 7, 8, 10, 11, 12, 14]
    assert got[5].role == "tool" and got[5].body == "alpha\n[seq 5]"
    assert got[4].body == ';; read a\n(read-file "a.txt")'
    _, again = export(harness)
    assert nonce_of(again) != nonce_of(text) and " 2 " in again.split("\n", 1)[0]


def test_an_unchanged_file_is_not_an_edit(harness):
    export(harness)
    sent = next_request(harness)
    assert not takes.receipt_file(harness.app.workspace, harness.sid).exists()
    assert ("assistant", "Reading.") in sent


def test_deleting_a_result_drops_its_call_and_the_receipt_says_so(harness):
    path, text = export(harness)
    path.write_text(remove_block(text, 5))
    sent = next_request(harness)
    assert "toolu_nc4" not in [t for _, t in sent] and "alpha\n[seq 5]" not in [t for _, t in sent]
    r = receipt(harness)
    assert r.startswith(f"[[receipt default/{harness.sid} export 1]]\n")
    assert "· deleted 2 (4 5) ·" in r and "pairs: deleting 5 took its call 4" in r
    assert "cache: unchanged through 3" in r


def test_deleting_a_call_drops_its_result(harness):
    path, text = export(harness)
    path.write_text(remove_block(text, 11))
    sent = next_request(harness)
    assert ("tool_result", "beta\n[seq 12]") not in sent
    assert "pairs: deleting 11 took its result 12" in receipt(harness)


def test_rewrite_changes_the_text_and_an_edited_result_recalls_the_original(harness):
    path, text = export(harness)
    text = text.replace("\nReading.\n", "\nI read a.txt.\n")
    text = text.replace("beta\n[seq 12]\n", "b is beta\n")
    path.write_text(text)
    sent = next_request(harness)
    assert ("assistant", "I read a.txt.") in sent
    assert ("tool_result", "b is beta\n[edited · original: (recall-entry 12)]") in sent
    assert "rewrote 2 (3 12)" in receipt(harness)
    assert harness.app.store.event(harness.sid, 12).text == "beta\n[seq 12]"  # log unchanged


def test_rewriting_twice_does_not_add_the_edited_line_twice(harness):
    path, text = export(harness)
    path.write_text(text.replace("beta\n[seq 12]\n", "b\n"))
    next_request(harness)
    path, text = export(harness)
    assert "b\n[edited · original: (recall-entry 12)]\n" in text
    path.write_text(text.replace("\nb\n[edited", "\nbb\n[edited"))
    sent = next_request(harness)
    assert ("tool_result", "bb\n[edited · original: (recall-entry 12)]") in sent


def test_a_note_is_read_as_the_agents_own_words_at_its_place(harness):
    path, text = export(harness)
    path.write_text(
        text.replace("a.txt says alpha.\n", "a.txt says alpha.\n[[note]]\nalpha matters\n")
    )
    sent = next_request(harness)
    i = sent.index(("assistant", "a.txt says alpha."))
    assert sent[i + 1] == ("assistant", "alpha matters")
    r = receipt(harness)
    assert "noted 1 (" in r
    _, again = export(harness)
    assert any(b.role == "note" and b.body == "alpha matters" for b in blocks(again).values())


def test_a_note_line_the_export_already_had_is_body_text(harness):
    (harness.app.cwd / "n.txt").write_text("x\n[[note]]\ny\n")
    harness.ask("read n", [{"calls": [{"code": '(read-file "n.txt")'}]}, {"text": "done"}])
    path, text = export(harness)
    assert "x\n[[note]]\ny\n[seq" in text
    path.write_text(text.replace("\ndone\n", "\ndone.\n"))
    next_request(harness)
    assert "noted 0" in receipt(harness) and "rewrote 1" in receipt(harness)


def test_restore_brings_back_the_original_bytes_at_the_original_place(harness):
    path, text = export(harness)
    path.write_text(remove_block(text, 10))
    next_request(harness)
    path, text = export(harness)
    assert "\nAnd b.\n" not in text
    n = nonce_of(text)
    path.write_text(text + f"[[m:{n} 10 assistant]]\n")  # written anywhere: at the end
    sent = next_request(harness, "again")
    i = sent.index(("user", "read b"))
    assert sent[i + 1] == ("assistant", "And b.")
    assert "restored 1 (10)" in receipt(harness)


def test_restore_with_a_body_is_a_rewrite_of_it(harness):
    path, text = export(harness)
    path.write_text(remove_block(text, 10))
    next_request(harness)
    path, text = export(harness)
    path.write_text(text + f"[[m:{nonce_of(text)} 10 assistant]]\nAnd then b.\n")
    sent = next_request(harness, "again")
    assert ("assistant", "And then b.") in sent


def test_restoring_a_result_restores_its_call(harness):
    path, text = export(harness)
    path.write_text(remove_block(text, 5))
    next_request(harness)
    path, text = export(harness)
    path.write_text(text + f"[[m:{nonce_of(text)} 5 tool]]\n")
    sent = next_request(harness, "again")
    assert ("tool_use", "toolu_nc4") in sent and ("tool_result", "alpha\n[seq 5]") in sent


def refused(h, reason_part):
    sent = next_request(h)
    r = receipt(h)
    assert "refused at seq" in r and reason_part in r, r
    notice = [t for role, t in sent if role == "user" and "was refused" in t]
    assert notice and reason_part in notice[0]
    return sent


def test_first_line_changed_is_refused(harness):
    path, text = export(harness)
    path.write_text("[[export nope]]\n" + text.split("\n", 1)[1])
    sent = refused(harness, "line 1: first line changed")
    assert ("assistant", "Reading.") in sent


def test_an_edit_made_before_another_take_is_refused_as_stale(harness):
    path, text = export(harness)
    # A form taken first makes the file's export stale.
    from nodecode.cells.evaluate import evaluate

    env = harness.app.cell_env(harness.sid, approve=lambda *a: True)
    assert "Pending" in evaluate("(context :drop (3))", env).output
    next_request(harness)
    path.write_text(remove_block(text, 10))
    refused(harness, "made before another edit was taken: run (context) again")


def test_role_changed_is_refused(harness):
    path, text = export(harness)
    n = nonce_of(text)
    path.write_text(text.replace(f"[[m:{n} 3 assistant]]", f"[[m:{n} 3 user]]"))
    refused(harness, "role of message 3 changed: expected assistant (found user)")


def test_unknown_id_is_refused(harness):
    path, text = export(harness)
    path.write_text(text + f"[[m:{nonce_of(text)} 999 user]]\nx\n")
    refused(harness, "unknown ID 999")


def test_duplicate_id_is_refused(harness):
    path, text = export(harness)
    path.write_text(text + f"[[m:{nonce_of(text)} 3 assistant]]\nagain\n")
    refused(harness, "message 3 appears twice")


def test_reordered_blocks_are_refused(harness):
    path, text = export(harness)
    n = nonce_of(text)
    moved = remove_block(text, 1) + f"[[m:{n} 1 user]]\nread a\n"
    path.write_text(moved)
    refused(harness, "blocks reordered")


def test_text_before_the_first_header_is_refused(harness):
    path, text = export(harness)
    first, rest = text.split("\n", 1)
    path.write_text(first + "\nstray words\n" + rest)
    refused(harness, "line 2: text between line 1 and the first header")


def test_a_malformed_own_header_is_refused_but_a_foreign_one_is_body_text(harness):
    path, text = export(harness)
    n = nonce_of(text)
    path.write_text(text.replace("\nReading.\n", "\nReading.\n[[m:zzzz 3 user]]\n"))
    next_request(harness)
    assert "rewrote 1 (3)" in receipt(harness)
    path, text = export(harness)
    n = nonce_of(text)
    path.write_text(text.replace(f"[[m:{n} 7 assistant]]", f"[[m:{n} seven assistant]]"))
    refused(harness, "malformed header")


def test_a_refused_edit_changes_nothing_and_the_log_keeps_every_row(harness):
    before = [(e.seq, e.text) for e in harness.app.store.events(harness.sid)]
    path, text = export(harness)
    path.write_text(
        remove_block(text, 3).replace(nonce_of(text) + " 1 user", nonce_of(text) + " 1 tool")
    )
    sent = refused(harness, "role of message 1 changed")
    assert ("assistant", "Reading.") in sent
    after = {e.seq: e.text for e in harness.app.store.events(harness.sid)}
    assert all(after[s] == t for s, t in before)


def test_an_idle_take_belongs_to_the_head_and_lists_each_message_once(harness):
    path, text = export(harness)
    path.write_text(remove_block(text, 10))
    report = takes.take(harness.app.workspace, harness.sid, None)
    assert report.taken
    from nodecode.context.derived import build

    ids = [m.id for m in build(harness.app.store, harness.sid)]
    assert len(ids) == len(set(ids)) and 10 not in ids and 11 in ids


def test_many_notes_land_under_their_blocks_in_the_order_written(harness):
    path, text = export(harness)
    under_result = "".join(f"[[note]]\nr{k}\n" for k in range(300))
    under_reply = "".join(f"[[note]]\na{k}\n" for k in range(300))
    path.write_text(
        text.replace("alpha\n[seq 5]\n", "alpha\n[seq 5]\n" + under_result).replace(
            "a.txt says alpha.\n", "a.txt says alpha.\n" + under_reply
        )
    )
    sent = next_request(harness)
    assert "noted 600 (" in receipt(harness)
    i = sent.index(("assistant", "a.txt says alpha."))
    assert sent[i + 1 : i + 301] == [("assistant", f"a{k}") for k in range(300)]
    notes = [text for role, text in sent if role == "assistant" and text.startswith("r")]
    assert notes == [f"r{k}" for k in range(300)]


def _lines_run_inserting(notes: int) -> int:
    """Python lines ``edits._insert_notes`` runs (its comprehensions and the calls it
    makes included) to insert ``notes`` notes under two of 200 blocks: an operation
    count, the same on every run."""
    import sys

    from nodecode.context import edits
    from nodecode.context.message import Message
    from nodecode.context.model import State

    order = [Message(i, "assistant", f"m{i}") for i in range(1, 201)]
    st = State(list(order), {m.id: m for m in order}, {m.id: (0, m.id) for m in order}, None)
    edit = edits.Edit(notes=[(100 + k % 2, f"note {k}") for k in range(notes)])
    ids = iter(range(10_000, 10**9))
    target = edits._insert_notes.__code__
    count = 0

    def local(frame, event, arg):
        nonlocal count
        count += event == "line"
        return local

    def calls(frame, event, arg):
        inside = frame.f_code is target or (frame.f_back and frame.f_back.f_code is target)
        return local if inside else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        out, done = edits.apply(order, edit, st, lambda text: Message(next(ids), "note", text))
    finally:
        sys.settrace(before)
    assert len(done.noted) == notes and len(out) == 200 + notes
    return count


def test_taking_notes_is_linear_in_their_number():
    # Issue "Trust, third round" 14: each note looked up its block in a new list
    # of every message and walked the notes before it (3,000 notes: 53 s).
    assert _lines_run_inserting(1000) <= 15 * _lines_run_inserting(100)
