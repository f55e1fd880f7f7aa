"""Read a cell's text into forms with sexpdata, or fail with a one-line CellError.

sexpdata parses recursively and reports malformed input with exceptions that
are not meant for people (an AttributeError for an unterminated string), so a
quick structural scan runs first: it finds unbalanced brackets, unterminated
strings and nesting too deep for the parser, and names the line.
"""

from __future__ import annotations

import re

import sexpdata

from nodecode.cells.forms import Form, Keyword, Pair, Sym
from nodecode.errors import CellError

MAX_CELL_BYTES = 1024 * 1024
MAX_DEPTH = 200

_CLOSERS = {"(": ")", "[": "]"}
_OPENERS = {v: k for k, v in _CLOSERS.items()}
_SYNTAX = re.compile(r"[\"();\[\]\\']")
_STRING_END = re.compile(r'["\\]')
_QUOTE_AFTER = frozenset(" \t\n\r\x0b\x0c()[]'\"")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")


def read_cell(code: str) -> list[Form]:
    """Parse a cell into its top-level forms as plain Python values."""
    size = len(code.encode("utf-8", "surrogatepass"))
    if size > MAX_CELL_BYTES:
        raise CellError(f"cell: too large: expected at most 1 MiB, found {size:,} bytes")
    _check_structure(code)
    try:
        forms = _Parser(code, nil=None, true=None).parse()
    except CellError:
        raise
    except RecursionError:
        raise CellError(f"cell: nested too deeply: expected at most {MAX_DEPTH} levels") from None
    except sexpdata.ExpectSExp:
        raise CellError("cell: a quote ' must be followed by a form") from None
    except Exception as e:  # noqa: BLE001 — sexpdata's other failures are not meant for people
        message = " ".join(str(e).split())
        raise CellError(f"cell: could not be read: {type(e).__name__}: {message}") from None
    return [_convert(form) for form in forms]


def first_comment(code: str) -> str | None:
    """The text of the cell's leading ';;' comment line, which says what the cell is for."""
    for line in code.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith(";"):
            return None
        return stripped.lstrip(";").strip() or None
    return None


class _Parser(sexpdata.Parser):
    """sexpdata's parser with our atoms: Sym, Keyword, ASCII integers and floats."""

    def atom(self, token: str) -> Form:
        if _INT.fullmatch(token):
            try:
                return int(token)
            except ValueError:  # beyond Python's digit limit for int()
                raise CellError(f"cell: integer too long ({len(token)} digits)") from None
        if _FLOAT.fullmatch(token):
            return float(token)
        if token.startswith(":") and len(token) > 1:
            return Keyword(token[1:])
        return Sym(token)


def _convert(form: object) -> Form:
    """Turn a parsed sexpdata value into a plain one (depth is bounded by the scan)."""
    if isinstance(form, sexpdata.Quoted):
        # Arguments are data and never evaluated, so '(1 2) is just (1 2).
        return _convert(form.x)
    if isinstance(form, sexpdata.Delimiters):
        return _convert_list(list(form.I))
    if isinstance(form, list):
        return _convert_list(form)
    # Ignored: mypy sees an object, but sexpdata hands back what _Parser.atom made
    # or a string literal, each a Form.
    return form  # type: ignore[return-value]


def _convert_list(items: list) -> Form:
    dots = [i for i, item in enumerate(items) if isinstance(item, Sym) and item == Sym(".")]
    if not dots:
        return [_convert(item) for item in items]
    if dots == [1] and len(items) == 3:
        return Pair(_convert(items[0]), _convert(items[2]))
    raise CellError('cell: misplaced ".": expected a dotted pair written (A . B)')


def _check_structure(code: str) -> None:
    """Find unbalanced brackets, unterminated strings and too deep nesting, naming the line."""
    stack: list[tuple[str, int]] = []
    quotes = [0]  # sexpdata recurses once per quote until the enclosing list closes
    i = 0
    while (match := _SYNTAX.search(code, i)) is not None:
        i = match.start()
        c = code[i]
        if c == '"':
            i = _skip_string(code, i)
            continue
        if c == ";":
            end = code.find("\n", i)
            i = len(code) if end < 0 else end + 1
            continue
        if c == "\\":
            if i + 1 >= len(code):
                raise CellError("cell: a backslash at the end of the cell escapes nothing")
            i += 2
            continue
        if c in _CLOSERS:
            stack.append((c, i))
            quotes.append(0)
        elif c in _OPENERS:
            _close(code, stack, c, i)
            quotes.pop()
        elif i == 0 or code[i - 1] in _QUOTE_AFTER:
            quotes[-1] += 1  # a quote inside an atom (don't) is just a character
        if len(stack) + sum(quotes) > MAX_DEPTH:
            raise CellError(
                f"cell: nested too deeply at {_where(code, i)}: "
                f"expected at most {MAX_DEPTH} levels of brackets and quotes"
            )
        i += 1
    if stack:
        opener, at = stack[-1]
        raise CellError(
            f'cell: unbalanced parentheses: expected "{_CLOSERS[opener]}" before the end '
            f'of the cell ({len(stack)} open, the last "{opener}" at {_where(code, at)})'
        )


def _skip_string(code: str, start: int) -> int:
    """Index just past the string that opens at ``start``."""
    i = start + 1
    while (match := _STRING_END.search(code, i)) is not None:
        if match.group() == '"':
            return match.end()
        i = match.end() + 1  # the escaped character, whatever it is
    raise CellError(
        f"cell: unterminated string: expected a closing '\"' for the string opened at "
        f"{_where(code, start)}, found the end of the cell"
    )


def _close(code: str, stack: list[tuple[str, int]], closer: str, at: int) -> None:
    if not stack:
        raise CellError(
            f'cell: unbalanced parentheses: found "{closer}" at {_where(code, at)} '
            f'with no "{_OPENERS[closer]}" open'
        )
    opener, opened = stack.pop()
    if _CLOSERS[opener] != closer:
        raise CellError(
            f'cell: mismatched brackets: expected "{_CLOSERS[opener]}" for the "{opener}" at '
            f'{_where(code, opened)}, found "{closer}" at {_where(code, at)}'
        )


def _where(code: str, index: int) -> str:
    """'line 3 column 7' for an index into the cell (both 1-based)."""
    line = code.count("\n", 0, index) + 1
    column = index - (code.rfind("\n", 0, index) + 1) + 1
    return f"line {line} column {column}"
