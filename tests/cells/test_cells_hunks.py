"""A write answered hunk by hunk: the bytes written, the diff's hunks, and what
the result tells the model."""

from __future__ import annotations

import difflib

import pytest
from nodecode.cells.approval import Approval, Picked
from nodecode.cells.env import CellEnv
from nodecode.cells.evaluate import evaluate
from nodecode.cells.hunks import Choice
from nodecode.errors import UserError
from nodecode.verbs.table import VERBS

OLD = "".join(f"line {i}\n" for i in range(1, 21))
NEW = OLD.replace("line 2\n", "line two\n").replace("line 15\n", "line fifteen\nline 15b\n")


def picking(ws, *choices: Choice) -> tuple[CellEnv, list[Approval]]:
    seen: list[Approval] = []

    def review(request: Approval) -> Picked:
        seen.append(request)
        return Picked(choices)

    return CellEnv(workspace=ws, verbs=VERBS, review=review), seen


def write(ws, env, text: str):
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return evaluate(f'(write-file "f.txt" "{quoted}")', env)


def test_the_diff_and_its_hunks_match_difflib(ws):
    (ws / "f.txt").write_text(OLD)
    env, seen = picking(ws, Choice(1, True), Choice(2, True))

    write(ws, env, NEW)

    [asked] = seen
    expected = difflib.unified_diff(
        OLD.splitlines(), NEW.splitlines(), "a/f.txt", "b/f.txt", lineterm=""
    )
    assert asked.diff.splitlines() == list(expected)
    lines = asked.diff.splitlines()
    assert [(h["n"], lines[h["at"] - 1]) for h in asked.hunks] == [
        (1, "@@ -1,5 +1,5 @@"),
        (2, "@@ -12,7 +12,8 @@"),
    ]
    assert asked.hunks[1]["lines"] == ["line fifteen", "line 15b"]


def test_taking_one_hunk_writes_exactly_it_and_the_result_names_both(ws):
    (ws / "f.txt").write_text(OLD)
    env, _ = picking(ws, Choice(1, True), Choice(2, False, "keep  15"))

    result = write(ws, env, NEW)

    assert not result.error, result.output
    taken = OLD.replace("line 2\n", "line two\n")
    assert (ws / "f.txt").read_text() == taken
    assert result.output.splitlines() == [
        f"wrote f.txt ({len(taken)} bytes): the person took 1 of 2 hunks, reviewing them one by one",
        "hunk 1 applied: old line 2 became line 2",
        "hunk 2 rejected: old line 15 kept (it proposed new lines 15–16 there); "
        "the person's reason: keep 15",
    ]
    assert [c.before for c in env.changes] == [OLD.encode()]
    assert [c.after for c in env.changes] == [(ws / "f.txt").read_bytes()]


def test_an_edited_hunk_is_written_as_edited_with_the_files_line_endings(ws):
    old = OLD.replace("\n", "\r\n")
    (ws / "f.txt").write_bytes(old.encode())
    env, _ = picking(ws, Choice(2, True, lines=("line 15", "my 15c", "my 15d")))

    result = write(ws, env, NEW.replace("\n", "\r\n"))

    assert (ws / "f.txt").read_bytes() == old.replace(
        "line 15\r\n", "line 15\r\nmy 15c\r\nmy 15d\r\n"
    ).encode()
    assert result.output.splitlines()[1:] == [
        "hunk 1 not applied (the person did not review it): old line 2 kept "
        "(it proposed new line 2 there)",
        "hunk 2 applied as the person edited it: old line 15 became lines 15–17; written as:",
        "  | line 15",
        "  | my 15c",
        "  | my 15d",
    ]


def test_rejecting_every_hunk_writes_nothing_and_names_each(ws):
    (ws / "f.txt").write_text(OLD)
    env, _ = picking(ws, Choice(1, False, "no"), Choice(2, False))

    result = write(ws, env, NEW)

    assert result.error
    assert (ws / "f.txt").read_text() == OLD
    assert "write to f.txt not approved: the person rejected every hunk" in result.output
    assert "hunk 1 rejected: old line 2 kept (it proposed new line 2 there); " in result.output
    assert env.changes == []


def test_an_edit_file_answered_whole_by_hunks_reads_as_before(ws):
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    env, _ = picking(ws, Choice(1, True))

    result = evaluate('(edit-file "calc.py" "a - b" "a + b")', env)

    assert result.output.startswith("edited calc.py: replaced 1 occurrence (line 2)")
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"


def test_a_hunk_ending_a_file_without_a_newline_keeps_it_open(ws):
    (ws / "f.txt").write_text("a\nb")
    env, _ = picking(ws, Choice(1, True, lines=("c", "d")))

    write(ws, env, "a\nx")

    assert (ws / "f.txt").read_bytes() == b"a\nc\nd"


def test_a_hunk_holding_a_secret_is_shown_redacted_and_cannot_be_edited(ws):
    (ws / "f.txt").write_text(OLD)
    env, seen = picking(ws, Choice(1, True))

    write(ws, env, NEW)

    shown = seen[0].redacted(lambda s: s.replace("fifteen", "[secret]"))
    assert [(h["lines"], h["editable"]) for h in shown.hunks] == [
        (["line two"], True),
        (["line [secret]", "line 15b"], False),
    ]


def test_a_malformed_answer_is_one_line_naming_the_entry():
    with pytest.raises(UserError) as bad:
        Picked.from_lua([{"n": 1, "take": True}, {"n": "2", "take": False}])

    assert str(bad.value) == (
        "approval: hunks[2] must be {n = number, take = boolean, reason?, lines?} "
        "(got {'n': '2', 'take': False})"
    )
    assert Picked.from_lua([{"n": 2, "take": True, "lines": ["x"]}]).choices == (
        Choice(2, True, "", ("x",)),
    )


def test_a_hunk_past_a_cut_diff_is_not_offered_nor_written(ws):
    old = "".join(f"line {i}\n" for i in range(1, 6001))
    new = "".join(f"new {i}\n" for i in range(1, 3001)) + old.split("\n", 3000)[3000]
    new = new.replace("line 5990\n", "line 5990 changed\n")
    (ws / "f.txt").write_text(old)
    env, seen = picking(ws, Choice(1, True), Choice(2, True))

    result = write(ws, env, new)

    shown = seen[0].diff.splitlines()
    assert len(shown) == 5001 and shown[-1].startswith("[diff cut: ")
    assert [h["n"] for h in seen[0].hunks] == [1]
    assert "hunk 2 not applied (the person did not review it)" in result.output
    assert (ws / "f.txt").read_text() == new.replace("line 5990 changed\n", "line 5990\n")


def test_a_last_line_without_a_newline_is_marked_as_git_marks_it(ws):
    (ws / "f.txt").write_text("a\nb")
    env, seen = picking(ws, Choice(1, True))

    write(ws, env, "a\nb\n")

    assert seen[0].diff.splitlines()[2:] == [
        "@@ -1,2 +1,2 @@",
        " a",
        "-b",
        "\\ No newline at end of file",
        "+b",
    ]
    assert (ws / "f.txt").read_bytes() == b"a\nb\n"


def test_insertions_and_deletions_are_named_by_where_they_fall(ws):
    (ws / "f.txt").write_text(OLD)
    env, _ = picking(ws, Choice(1, True), Choice(2, False))

    result = write(ws, env, "line 0\n" + OLD.replace("line 15\n", ""))

    assert result.output.splitlines()[1:] == [
        "hunk 1 applied: line 1 inserted at the start of the file",
        "hunk 2 rejected: old line 15 kept (it proposed deleting it)",
    ]
    assert (ws / "f.txt").read_text() == "line 0\n" + OLD
