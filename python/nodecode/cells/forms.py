"""The plain Python values a cell reads into, and how to show them back as Lisp.

The reader turns sexpdata's objects into these so that verbs never see a
sexpdata type: a symbol is ``Sym``, a keyword ``:from`` is ``Keyword("from")``,
a dotted pair ``(a . b)`` is ``Pair(a, b)``; strings, integers, floats and
lists are the Python built-ins.
"""

from __future__ import annotations

import json
from typing import NamedTuple


class Sym(str):
    """A symbol such as ``read-file``, ``t`` or ``nil``; never equal to a plain string."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        # A verb must not take the string "t" for the symbol t, so the class counts.
        return type(other) is type(self) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str.__repr__(self)})"


class Keyword(Sym):
    """A keyword such as ``:from``, holding its name without the colon."""

    __slots__ = ()


class Pair(NamedTuple):
    """A dotted pair ``(first . second)``, e.g. a seq span ``(12 . 40)``."""

    first: object
    second: object


Form = Sym | Keyword | Pair | str | int | float | list

NIL = Sym("nil")
T = Sym("t")

_TYPE_NAMES: dict[type, str] = {
    bool: "t or nil",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    Pair: "a dotted pair (A . B)",
    Keyword: "a keyword",
    Sym: "a symbol",
}


def type_name(kind: type) -> str:
    """'an integer', 'a string', …: the words an error message uses for a type."""
    return _TYPE_NAMES.get(kind, f"a {kind.__name__}")


def kind_of(value: object) -> str:
    """The type words for a read value (Keyword and Sym before str: they are strings)."""
    for kind in (Keyword, Sym, Pair, bool, int, float, str, list):
        if isinstance(value, kind):
            return type_name(kind)
    return f"a {type(value).__name__}"


def show_form(form: object, limit: int = 80) -> str:
    """Write a read value back as Lisp text, cut to ``limit`` characters with '…'."""
    text = _show(form, limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(value: object) -> str:
    """'"x", a string': the value and its kind, for 'must be …' messages."""
    return f"{show_form(value, 40)}, {kind_of(value)}"


def _show(form: object, limit: int) -> str:
    if isinstance(form, Keyword):
        return ":" + form
    if isinstance(form, Sym):
        return str.__str__(form)
    if isinstance(form, str):
        # Cut before quoting so a megabyte string is not rendered to show 80 characters.
        return json.dumps(form[: limit + 1], ensure_ascii=False)
    if isinstance(form, Pair):
        return f"({_show(form.first, limit)} . {_show(form.second, limit)})"
    if isinstance(form, list):
        return _show_list(form, limit)
    return repr(form)


def _show_list(items: list, limit: int) -> str:
    parts: list[str] = []
    size = 0
    for item in items:
        if size > limit:
            parts.append("…")
            break
        part = _show(item, limit)
        parts.append(part)
        size += len(part) + 1
    return "(" + " ".join(parts) + ")"
