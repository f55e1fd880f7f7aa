"""Verbs: how a module declares the verbs a cell can call, and how calls are checked.

A module declares each verb with ``@verb(...)`` and lists them, with a short
paragraph the system prompt gives them, in its ``Family``; ``table(*families)``
assembles a ``Table`` (the agent's is ``nodecode.verbs.table.VERBS``), which
the caller hands the evaluator in its env, so nothing registers by being
imported. A verb function is called as
``fn(env, *positionals, **keywords)`` and returns the text the agent reads.
Keyword ``:match-case`` arrives as ``match_case`` and a Python keyword gets a
trailing underscore (``:from`` → ``from_``). Arguments are data, never
evaluated: ``(write-file "a" (read-file "b"))`` passes a list.

Types are Python types (or a tuple of them): ``str``, ``int``, ``float`` (an
integer is accepted too), ``bool`` (``t`` or ``nil``), ``list``, ``Pair``,
``Sym``, ``Keyword``, or ``object`` for any value. ``nil`` given for an
optional argument or keyword means "not given", unless its type is ``bool``.
"""

from __future__ import annotations

import keyword as pykeyword
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from nodecode.cells.forms import NIL, Keyword, Sym, T, describe, type_name
from nodecode.errors import CellError

INT_LIMIT = 2**63
TypeSpec = type | tuple[type, ...]
ParamSpec = Mapping[str, TypeSpec] | Iterable[str | tuple[str, TypeSpec]]
VerbFn = Callable[..., str]


@dataclass(frozen=True)
class Param:
    """One argument of a verb: its name, accepted type(s) and the word shown in usage."""

    name: str
    kind: TypeSpec
    metavar: str

    def check(self, value: object, usage: str, label: str) -> object:
        """The value converted for the verb, or CellError naming what was found."""
        if _is(self.kind, bool) and isinstance(value, Sym) and value in (T, NIL):
            return value == T
        if _matches(value, self.kind):
            if type(value) is int and not -INT_LIMIT <= value < INT_LIMIT and _is(self.kind, int):
                raise CellError(  # the store (SQLite, msgpack) holds 64-bit integers only
                    f"{usage}: {label} must be a whole number from {-INT_LIMIT} to "
                    f"{INT_LIMIT - 1} (got {value})"
                )
            return float(value) if _is(self.kind, float) and type(value) is int else value
        expected = _kind_words(self.kind)
        raise CellError(f"{usage}: {label} must be {expected} (got {describe(value)})")


@dataclass(frozen=True)
class Verb:
    """A registered verb: its parameters, one-line doc, and the function that runs it."""

    name: str
    fn: VerbFn
    args: tuple[Param, ...]
    optional: tuple[Param, ...]
    keywords: Mapping[str, Param]
    doc: str
    usage: str
    rest: str | None = None  # the parameter any other keyword goes to, as data (``verb``)

    def __call__(self, env: Any, items: list) -> str:
        """Validate the form's arguments (everything after the verb) and run the verb."""
        positionals, keywords, rest = self._split(items)
        values = self._positionals(positionals)
        options = {_py_name(k): v for k, v in keywords.items()}
        if self.rest is not None:
            options[self.rest] = rest
        result = self.fn(env, *values, **options)
        return result if isinstance(result, str) else str(result)

    def _split(self, items: list) -> tuple[list, dict[str, object], dict[str, object]]:
        positionals: list = []
        keywords: dict[str, object] = {}
        rest: dict[str, object] = {}
        it = iter(items)
        for item in it:
            if not isinstance(item, Keyword):
                positionals.append(item)
                continue
            param = self._keyword(item)
            value = next(it, _MISSING)
            if value is _MISSING:
                raise CellError(f"{self.usage}: :{item} needs a value after it")
            if str(item) in keywords or str(item) in rest:
                raise CellError(f"{self.usage}: :{item} is given twice")
            if param is None:
                rest[str(item)] = as_data(value, f"{self.usage}: :{item}")
            elif not (value == NIL and not _is(param.kind, bool)):
                keywords[str(item)] = param.check(value, self.usage, f":{item}")
        return positionals, keywords, rest

    def _keyword(self, item: Keyword) -> Param | None:
        param = self.keywords.get(str(item))
        if param is None and self.rest is not None:
            return None
        if param is None:
            allowed = ", ".join(f":{k}" for k in self.keywords) or "no keywords"
            raise CellError(f"{self.usage}: unknown keyword :{item}; allowed: {allowed}")
        return param

    def _positionals(self, given: list) -> list:
        low, high = len(self.args), len(self.args) + len(self.optional)
        if not low <= len(given) <= high:
            names = " ".join(
                [p.metavar for p in self.args] + [f"[{p.metavar}]" for p in self.optional]
            )
            raise CellError(
                f"{self.usage}: expected {_count(low, high)} ({names or 'none'}), got {len(given)}"
            )
        values = []
        for index, (param, value) in enumerate(zip(self.args + self.optional, given, strict=False)):
            if index >= low and value == NIL and not _is(param.kind, bool):
                break  # nil for an optional argument means "not given"; later ones too
            values.append(param.check(value, self.usage, param.metavar))
        return values


_MISSING = object()


def verb(
    name: str,
    *,
    args: ParamSpec = (),
    optional: ParamSpec = (),
    keywords: Mapping[str, TypeSpec] | None = None,
    doc: str | None = None,
    usage: str | None = None,
    metavars: Mapping[str, str] | None = None,
    rest: str | None = None,
) -> Callable[[VerbFn], VerbFn]:
    """Declare the decorated function as the verb ``name`` (its spec is ``spec_of(fn)``).

    ``args``/``optional`` are names (a bare name is a string argument), ``(name,
    type)`` pairs or a name → type mapping; ``keywords`` maps a keyword name
    (without colon) to its type. ``doc`` defaults to the docstring's first line
    and ``usage`` to ``(name ARG [OPT] :key KEY)``; ``metavars`` renames the
    words usage shows (``{"from": "L"}``). With ``rest``, any other keyword is
    accepted and the function gets them as a dict under that parameter's name,
    keyed by the keyword as written, each value as plain data (``as_data``).
    """
    names = dict(metavars or {})

    def declare(fn: VerbFn) -> VerbFn:
        required = _params(args, names)
        opts = _params(optional, names)
        kws = {k: Param(k, t, names.get(k, k.upper())) for k, t in (keywords or {}).items()}
        line = doc if doc is not None else (fn.__doc__ or "").strip().split("\n")[0]
        shown = usage or _usage(name, required, opts, kws)
        spec = Verb(name, fn, required, opts, kws, line, shown, rest)
        # Ignored: a function takes any attribute, but its Callable type declares none.
        fn.__verb__ = spec  # type: ignore[attr-defined]
        return fn

    return declare


def as_data(value: object, label: str) -> object:
    """A form's value as JSON-like data: strings, numbers, ``t``/``nil`` as true and
    false, lists of these; anything else is CellError naming ``label``."""
    if isinstance(value, Sym) and not isinstance(value, Keyword):
        if value == T:
            return True
        if value == NIL:
            return False
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        if type(value) is int and not -INT_LIMIT <= value < INT_LIMIT:
            raise CellError(f"{label} must be a whole number from {-INT_LIMIT} to {INT_LIMIT - 1}")
        return value
    elif isinstance(value, list):
        return [as_data(v, label) for v in value]
    raise CellError(f"{label} must be a string, a number, t, nil or a list (got {describe(value)})")


def spec_of(fn: VerbFn) -> Verb:
    """The verb a function was declared as with ``@verb``."""
    spec = getattr(fn, "__verb__", None)
    if not isinstance(spec, Verb):
        raise TypeError(f"{_origin(fn)} is not declared with @verb")
    return spec


@dataclass(frozen=True)
class Family:
    """Verbs declared together (one module's, or one MCP server's) and the short
    paragraph of guidance the system prompt gives after the list of verbs."""

    name: str
    verbs: tuple[VerbFn, ...]
    guidance: str = ""


class Table(Mapping[str, Verb]):
    """Verbs by name, and the families they came from in order (the system prompt
    lists them so). Built once; a name declared twice is a bug."""

    def __init__(self, families: Iterable[Family]):
        self.families = tuple(families)
        self._verbs: dict[str, Verb] = {}
        for family in self.families:
            for fn in family.verbs:
                self._add(spec_of(fn))

    def _add(self, entry: Verb) -> None:
        old = self._verbs.get(entry.name)
        if old is not None:
            raise ValueError(
                f"verb {entry.name!r} is declared by {_origin(old.fn)} and by {_origin(entry.fn)}"
            )
        self._verbs[entry.name] = entry

    def __getitem__(self, name: str) -> Verb:
        return self._verbs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._verbs)

    def __len__(self) -> int:
        return len(self._verbs)

    def __repr__(self) -> str:
        return f"Table({', '.join(f.name for f in self.families)})"


def table(*families: Family) -> Table:
    """One verb table from the families, in the order given."""
    return Table(families)


def unknown_verb(name: str, verbs: Mapping[str, Verb]) -> CellError:
    """The error for a verb name the table does not have, listing the known ones."""
    known = ", ".join(sorted(verbs)) or "none"
    return CellError(f'unknown verb "{name}": known verbs are {known}')


def _origin(fn: VerbFn) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _params(spec: ParamSpec, metavars: Mapping[str, str]) -> tuple[Param, ...]:
    pairs = spec.items() if isinstance(spec, Mapping) else spec
    params = []
    for item in pairs:
        name, kind = (item, str) if isinstance(item, str) else item
        params.append(Param(name, kind, metavars.get(name, name.upper())))
    return tuple(params)


def _usage(
    name: str, required: tuple[Param, ...], opts: tuple[Param, ...], kws: Mapping[str, Param]
) -> str:
    words = [name, *(p.metavar for p in required), *(f"[{p.metavar}]" for p in opts)]
    words += [f":{k} {p.metavar}" for k, p in kws.items()]
    return "(" + " ".join(words) + ")"


def _py_name(key: str) -> str:
    name = key.replace("-", "_")
    return name + "_" if pykeyword.iskeyword(name) else name


def _kinds(spec: TypeSpec) -> tuple[type, ...]:
    return spec if isinstance(spec, tuple) else (spec,)


def _is(spec: TypeSpec, kind: type) -> bool:
    return kind in _kinds(spec)


def _matches(value: object, spec: TypeSpec) -> bool:
    return any(_matches_one(value, kind) for kind in _kinds(spec))


def _matches_one(value: object, kind: type) -> bool:
    if kind is object:
        return True
    if kind is str:  # symbols are str subclasses but are not strings to a verb
        return isinstance(value, str) and not isinstance(value, Sym)
    if kind is Sym:
        return isinstance(value, Sym) and not isinstance(value, Keyword)
    if kind is int:
        return type(value) is int
    if kind is float:
        return type(value) in (int, float)
    return isinstance(value, kind)


def _kind_words(spec: TypeSpec) -> str:
    words = [type_name(kind) for kind in _kinds(spec)]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _count(low: int, high: int) -> str:
    def args(n: int) -> str:
        return f"{n} argument" + ("" if n == 1 else "s")

    if low == high:
        return args(low)
    return f"{low} to {args(high)}"
