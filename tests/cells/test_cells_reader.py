"""Reading cells: the forms verbs receive, and one-line errors for malformed text."""

from __future__ import annotations

import pytest
from nodecode.cells.evaluate import evaluate
from nodecode.cells.forms import Keyword, Pair, Sym, show_form
from nodecode.cells.reader import first_comment, read_cell
from nodecode.errors import CellError


def test_strings_keep_quotes_newlines_and_semicolons():
    forms = read_cell(';; comment\n(write-file "a.txt" "say \\"hi\\";\nnext\\tline\\\\")')
    assert forms == [[Sym("write-file"), "a.txt", 'say "hi";\nnext\tline\\']]


def test_keywords_symbols_and_numbers():
    (form,) = read_cell("(read-file x :from 3 :to -4 t nil 1.5)")
    assert form == [
        Sym("read-file"),
        Sym("x"),
        Keyword("from"),
        3,
        Keyword("to"),
        -4,
        Sym("t"),
        Sym("nil"),
        1.5,
    ]
    assert type(form[3]) is int


def test_dotted_pairs_and_quoted_lists():
    (form,) = read_cell("(context :drop '((12 . 40) 7 (50 . 51)))")
    assert form == [Sym("context"), Keyword("drop"), [Pair(12, 40), 7, Pair(50, 51)]]


def test_square_brackets_read_as_lists():
    assert read_cell("(f [1 2])") == [[Sym("f"), [1, 2]]]


def test_comments_anywhere_are_ignored():
    code = ';; first\n(a 1) ; trailing\n; between\n(b "x;y")\n;; last'
    assert read_cell(code) == [[Sym("a"), 1], [Sym("b"), "x;y"]]


def test_a_symbol_is_not_a_string():
    (form,) = read_cell('(f t "t")')
    assert form[1] == Sym("t")
    assert form[1] != "t"
    assert form[2] == "t"


def test_apostrophe_inside_a_symbol_is_a_character():
    assert read_cell("(f don't)") == [[Sym("f"), Sym("don't")]]


def test_first_comment_is_the_purpose_line():
    assert first_comment('\n;; read the config\n(read-file "c")') == "read the config"
    assert first_comment('(read-file "c")\n;; later') is None
    assert first_comment(";;\n(x)") is None


def test_show_form_writes_lisp_back_and_cuts_long_text():
    (form,) = read_cell('(edit-file "a" :n (1 . 2) "x\\ny")')
    assert show_form(form) == '(edit-file "a" :n (1 . 2) "x\\ny")'
    assert len(show_form(["x" * 1000])) == 80


MALFORMED = {
    "unbalanced open": ('(read-file "a"\n(list-files', 'unbalanced parentheses: expected ")"'),
    "extra close": ('(read-file "a"))', 'found ")" at line 1 column 16'),
    "mismatched": ("(a [b)", 'mismatched brackets: expected "]"'),
    "unterminated string": ('(write-file "a" "never closed)\n', "unterminated string"),
    "escape at end of string": ('(f "abc\\', "unterminated string"),
    "backslash at end": ("(f a)\\", "backslash at the end"),
    "deep nesting": ("(" * 10_000 + ")" * 10_000, "nested too deeply"),
    "deep quotes": ("(f " + "'" * 10_000 + "x)", "nested too deeply"),
    "many quoted items": ("(f " + " 'x" * 5_000 + ")", "nested too deeply"),
    "huge string": ('(write-file "a" "' + "x" * 2_000_000 + '")', "too large"),
    "misplaced dot": ("(f (1 . 2 3))", 'misplaced "."'),
    "dangling quote": ("(f ')", "quote ' must be followed"),
    "huge integer": ("(f " + "9" * 5000 + ")", "integer too long"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_cells_give_one_line_errors(name):
    code, expected = MALFORMED[name]
    with pytest.raises(CellError) as info:
        read_cell(code)
    message = str(info.value)
    assert message.startswith("cell: ")
    assert expected in message
    assert "\n" not in message
    assert len(message) < 300


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_evaluate_turns_malformed_cells_into_error_results(name, env):
    code, expected = MALFORMED[name]
    result = evaluate(code, env)
    assert result.error
    assert result.output.startswith("error: cell: ")
    assert expected in result.output


def test_unbalanced_error_counts_the_open_parentheses():
    with pytest.raises(CellError, match=r"\(3 open"):
        read_cell("(a (b (c")
