"""Evaluating cells and tool calls: outputs joined, first failure stops, nothing raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodecode.cells.env import CellEnv
from nodecode.cells.evaluate import CellResult, evaluate, evaluate_call
from nodecode.cells.registry import Family, table, verb
from nodecode.errors import Stopped
from nodecode.secrets.redact import Redactor
from nodecode.verbs.table import VERBS


def test_one_form_gives_its_result_alone(env):
    assert evaluate(';; read it\n(read-file "hello.txt" :to 1)', env) == CellResult(
        ";; lines 1–1 of 3\none\n", False
    )


def test_several_forms_are_echoed_and_joined_by_blank_lines(env):
    result = evaluate(';; look around\n(read-file "hello.txt" :to 1)\n(grep "def")', env)
    assert result == CellResult(
        ';; (read-file "hello.txt" :to 1)\n;; lines 1–1 of 3\none\n\n'
        ';; (grep "def")\nsrc/app.py:1:def main():',
        False,
    )


def test_first_failure_stops_the_cell_and_keeps_earlier_output(env, ws):
    code = '(write-file "a.txt" "A")\n(edit-file "a.txt" "zzz" "y")\n(write-file "b.txt" "B")'
    result = evaluate(code, env)
    assert result.error
    assert result.output == (
        ';; (write-file "a.txt" "A")\nwrote a.txt (1 bytes)\n\n'
        ';; (edit-file "a.txt" "zzz" "y")\nerror: edit-file: OLD not found in a.txt'
    )
    assert not (ws / "b.txt").exists()


def test_a_bare_atom_at_top_level_is_an_error(env):
    assert evaluate('"just a string"', env) == CellResult(
        'error: expected a form like (read-file "README.md") at the top level, '
        'found a string "just a string"',
        True,
    )
    assert evaluate("42", env).error


def test_a_form_must_start_with_a_symbol(env):
    result = evaluate('("read-file" "hello.txt")', env)
    assert result.output.startswith("error: a form starts with a verb")


def test_an_empty_cell_is_an_error(env):
    assert evaluate(";; nothing to do\n", env).output.startswith("error: cell: no forms")


def test_nested_forms_are_data_not_calls(env):
    result = evaluate('(write-file "a.txt" (read-file "hello.txt"))', env)
    assert 'TEXT must be a string (got (read-file "hello.txt"), a list)' in result.output


def test_other_tool_names_are_refused(env):
    assert evaluate_call("bash", {"command": "ls"}, env) == CellResult(
        'error: unknown tool "bash": the only tool is eval, whose input is {"code": "<cell>"}', True
    )


@pytest.mark.parametrize(
    "payload, found",
    [
        ([1], "found an array"),
        (None, "found null"),
        ({}, "found an empty object"),
        ({"cmd": "(x)"}, 'found only the keys "cmd"'),
        ({"code": 5}, '"code" must be a string, found a number'),
        ("not json", "found a string that is not JSON"),
    ],
)
def test_eval_input_must_be_an_object_with_code(env, payload, found):
    result = evaluate_call("eval", payload, env)
    assert result.error
    assert found in result.output


def test_eval_call_runs_the_cell(env):
    assert evaluate_call("eval", {"code": '(read-file "hello.txt")'}, env).output == (
        "one\ntwo\nthree\n"
    )
    assert not evaluate_call("eval", '{"code": "(list-files)"}', env).error


def test_a_crashing_verb_becomes_a_redacted_internal_error(ws, monkeypatch):
    monkeypatch.setenv("PROVIDER_KEY", "key-1234567890")

    @verb("boom", args=["text"])
    def _boom(env, text):
        raise ZeroDivisionError(f"bad {text}\nsecond line")

    verbs = {**VERBS, **table(Family("test", (_boom,)))}
    env = CellEnv(workspace=ws, redact=Redactor.from_env(["PROVIDER_KEY"]), verbs=verbs)
    result = evaluate('(boom "key-1234567890")', env)
    assert result == CellResult(
        "error: internal error in (boom …): ZeroDivisionError: "
        "bad [redacted:PROVIDER_KEY] second line",
        True,
    )


def test_stopping_during_an_approval_reaches_the_agent_loop(ws):
    def approve(kind, detail):
        raise Stopped("stopped by the person")

    with pytest.raises(Stopped):
        evaluate('(write-file "x" "y")', CellEnv(workspace=ws, verbs=VERBS, approve=approve))


def test_os_errors_are_reported_not_raised(env, ws):
    (ws / "locked").mkdir()
    (ws / "locked" / "f.txt").write_text("x")
    (ws / "locked").chmod(0o500)
    try:
        result = evaluate('(write-file "locked/g.txt" "y")', env)
    finally:
        (ws / "locked").chmod(0o700)
    if result.error:  # root may write anyway
        assert result.output.startswith("error: write-file: Permission denied")


cell_text = st.one_of(
    st.text(max_size=200),
    st.text(alphabet="()[]\";\\'. :tnil-0123456789abcxyz\n", max_size=120),
    st.lists(
        st.sampled_from(
            [
                '(read-file "hello.txt")',
                "(list-files)",
                '(grep "o")',
                "(",
                ")",
                '"',
                ":from",
                " 1",
                "'",
                "(nope)",
                "(read-file",
                " . ",
                "nil",
                "\n;; c\n",
                "\\",
            ]
        ),
        max_size=12,
    ).map("".join),
)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(code=cell_text)
def test_evaluate_never_raises(tmp_path: Path, code: str):
    workspace = tmp_path / "fuzz"
    workspace.mkdir(exist_ok=True)
    (workspace / "hello.txt").write_text("hello\n")
    # Approvals denied: a random cell must not write or run anything.
    result = evaluate(code, CellEnv(workspace=workspace, verbs=VERBS))
    assert isinstance(result, CellResult)
    assert isinstance(result.output, str)
    if result.error:
        assert "error: " in result.output
