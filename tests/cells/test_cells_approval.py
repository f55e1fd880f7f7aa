"""What a reviewer sees of a write or a command, and a refusal's reason in the result."""

from __future__ import annotations

from nodecode.cells.approval import Approval, Refused
from nodecode.cells.env import CellEnv
from nodecode.cells.evaluate import evaluate
from nodecode.verbs.table import VERBS


def reviewing(ws, answer=True) -> tuple[CellEnv, list[Approval]]:
    seen: list[Approval] = []

    def review(request: Approval) -> bool:
        seen.append(request)
        if isinstance(answer, str):
            raise Refused(answer)
        return answer

    return CellEnv(workspace=ws, verbs=VERBS, review=review), seen


def test_edit_file_shows_its_unified_diff_before_writing(ws):
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    env, seen = reviewing(ws)

    result = evaluate('(edit-file "calc.py" "a - b" "a + b")', env)

    assert not result.error, result.output
    [asked] = seen
    assert (asked.kind, asked.detail) == ("write", "calc.py")
    assert asked.diff.splitlines() == [
        "--- a/calc.py",
        "+++ b/calc.py",
        "@@ -1,2 +1,2 @@",
        " def add(a, b):",
        "-    return a - b",
        "+    return a + b",
    ]


def test_write_file_of_a_new_file_diffs_against_nothing(ws):
    env, seen = reviewing(ws)

    evaluate('(write-file "new.txt" "one\\ntwo\\n")', env)

    assert seen[0].diff.splitlines() == [
        "--- /dev/null",
        "+++ b/new.txt",
        "@@ -0,0 +1,2 @@",
        "+one",
        "+two",
    ]


def test_shell_shows_the_command_and_where_it_runs(ws):
    env, seen = reviewing(ws)

    evaluate('(shell "true")', env)

    assert (seen[0].kind, seen[0].detail, seen[0].cwd) == ("shell", "true", str(ws))


def test_a_refusal_with_a_reason_ends_the_result_and_writes_nothing(ws):
    (ws / "calc.py").write_text("x = 1\n")
    env, _ = reviewing(ws, answer="keep x as it is,\n  it is used elsewhere")

    result = evaluate('(write-file "calc.py" "x = 2\\n")', env)

    assert result.error
    assert result.output == (
        "error: write to calc.py not approved: keep x as it is, it is used elsewhere"
    )
    assert (ws / "calc.py").read_text() == "x = 1\n"


def test_without_a_reviewer_the_plain_approve_answers(ws):
    asked = []
    env = CellEnv(
        workspace=ws, verbs=VERBS, approve=lambda kind, detail: asked.append((kind, detail))
    )

    result = evaluate('(shell "true")', env)

    assert result.output == "error: shell not approved" and asked == [("shell", "true")]
