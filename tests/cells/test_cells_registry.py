"""Verbs: modules declare them by decorating functions, one table holds them; calls are validated."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nodecode.cells.env import CellEnv
from nodecode.cells.evaluate import evaluate
from nodecode.cells.forms import Keyword, Pair, Sym
from nodecode.cells.registry import Family, spec_of, table, verb
from nodecode.verbs.table import VERBS


@pytest.fixture
def probe(env: CellEnv) -> Iterator[list]:
    """A verb declared the way the context and recall modules declare theirs, in env's table."""
    calls: list = []

    @verb(
        "probe",
        args=[("n", int)],
        optional=["label"],
        keywords={"drop": (Sym, list), "flag": bool, "match-case": bool, "from": float},
    )
    def _probe(env, n, label=None, *, drop=None, flag=False, match_case=False, from_=None):
        """Record how it was called."""
        calls.append((n, label, drop, flag, match_case, from_))
        return f"probe {n}"

    env.verbs = {**VERBS, **table(Family("test", (_probe,)))}
    yield calls


def test_a_registered_verb_is_callable_from_a_cell(env: CellEnv, probe):
    result = evaluate('(probe 3 "x" :drop ((1 . 2) 5) :flag t :match-case nil :from 2)', env)
    assert result.output == "probe 3"
    assert probe == [(3, "x", [Pair(1, 2), 5], True, False, 2.0)]


def test_the_table_records_usage_and_doc(env, probe):
    entry = env.verbs["probe"]
    assert entry.usage == (
        "(probe N [LABEL] :drop DROP :flag FLAG :match-case MATCH-CASE :from FROM)"
    )
    assert entry.doc == "Record how it was called."
    assert [p.name for p in entry.args] == ["n"]
    assert [p.name for p in entry.optional] == ["label"]


def test_nil_for_an_optional_argument_means_not_given(env, probe):
    assert not evaluate("(probe 1 nil :drop nil)", env).error
    assert probe == [(1, None, None, False, False, None)]


def test_symbol_t_is_accepted_where_a_symbol_is(env, probe):
    evaluate("(probe 1 :drop t)", env)
    assert probe[0][2] == Sym("t")


def test_wrong_type_names_expected_and_found(env, probe):
    result = evaluate('(probe "3")', env)
    assert result.error
    assert 'N must be an integer (got "3", a string)' in result.output
    result = evaluate("(probe 1 :drop 4)", env)
    assert ":drop must be a symbol or a list (got 4, an integer)" in result.output


def test_a_symbol_is_not_accepted_as_a_string(env):
    result = evaluate("(read-file hello.txt)", env)
    assert result.output == (
        "error: (read-file PATH :from L :to L): PATH must be a string (got hello.txt, a symbol)"
    )


def test_wrong_arity_names_the_parameters(env):
    assert evaluate("(read-file)", env).output == (
        "error: (read-file PATH :from L :to L): expected 1 argument (PATH), got 0"
    )
    result = evaluate('(write-file "a" "b" "c")', env)
    assert "expected 2 arguments (PATH TEXT), got 3" in result.output


def test_unknown_keyword_lists_the_allowed_ones(env):
    result = evaluate('(read-file "hello.txt" :line 2)', env)
    assert result.output == (
        "error: (read-file PATH :from L :to L): unknown keyword :line; allowed: :from, :to"
    )


def test_keyword_without_value_and_twice(env):
    assert ":from needs a value" in evaluate('(read-file "hello.txt" :from)', env).output
    assert ":from is given twice" in evaluate('(read-file "hello.txt" :from 1 :from 2)', env).output


def test_unknown_verb_lists_known_verbs_sorted(env):
    result = evaluate("(foo 1)", env)
    assert result.error
    assert result.output.startswith('error: unknown verb "foo": known verbs are ')
    known = result.output.split("known verbs are ")[1].split(", ")
    assert known == sorted(known)
    assert {"edit-file", "grep", "list-files", "read-file", "shell", "write-file"} <= set(known)


def test_a_table_with_a_name_declared_twice_fails():
    @verb("read-file")
    def other(env):
        return ""

    with pytest.raises(ValueError, match=r"declared by .*files\.read_file and by .*other"):
        table(Family("files", (VERBS["read-file"].fn,)), Family("other", (other,)))


def test_declaring_a_verb_registers_nothing():
    @verb("never-in-the-table")
    def unseen(env):
        return ""

    assert spec_of(unseen).name == "never-in-the-table"
    assert "never-in-the-table" not in VERBS


def test_every_verb_module_contributes_to_the_one_table():
    assert sorted(VERBS) == [
        "context",
        "edit-file",
        "grep",
        "list-files",
        "read-file",
        "recall-entry",
        "recall-log",
        "recall-search",
        "shell",
        "write-file",
    ]


def test_keyword_values_are_read_as_given():
    assert Keyword("from") != Sym("from")
