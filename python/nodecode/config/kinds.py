"""What a setting's value may be, and the walk that checks a config object against a
table of settings: unknown keys become warnings naming the nearest known key, a
wrong value one ConfigError line naming the key, what was expected and what was
found. Nothing is coerced but a whole number written as one (``50.0``).

A ``Kind`` checks one value and returns what the config keeps; ``what`` is the
phrase both its errors and the settings reference (``nodecode config``) use.

Plain classes, not dataclasses: every command and Neovim's first ``:Nodecode``
import this, and a dataclass costs 0.3-1 ms to make; these cost microseconds.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nodecode.errors import ConfigError

FILE = "config.jsonc"
MAX_TOKENS = 2**63 - 1  # the store's integers are 64-bit: a larger count cannot be logged

Context = Mapping[str, Any]  # "warnings": the list unknown keys go to; "type": the wire's


# -- where a value sits -----------------------------------------------------------


class Where:
    """A value's place in config.jsonc: ``"max_rounds"`` at the top (quoted, as
    nodecode's messages always named those), ``providers.x.models[y].max_tokens``
    below it; an environment variable is ``$NAME``."""

    __slots__ = ("parts", "variable")

    def __init__(self, parts: tuple[str, ...] = (), variable: bool = False):
        self.parts, self.variable = parts, variable

    def __truediv__(self, key: str) -> Where:
        return Where((*self.parts, key))

    def item(self, label: str) -> Where:
        """The list element ``label`` (a model's id, else its index) of this value."""
        return Where((*self.parts[:-1], f"{self.parts[-1]}[{label}]"))

    def up(self) -> Where:
        return Where(self.parts[:-1])

    def __str__(self) -> str:
        if self.variable:
            return f"${self.parts[0]}"
        if len(self.parts) == 1:
            return f'"{self.parts[0]}"'
        return ".".join(self.parts)


def shown(value: Any, limit: int = 60) -> str:
    """A value as it is written in config.jsonc (``Infinity``, ``null``, ``"x"``), cut
    short; a variable's as Python quotes a string."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def wrong(where: Where, what: str, value: Any) -> ConfigError:
    if where.variable:
        return ConfigError(f"{where} must be {what} (found {value!r})")
    return ConfigError(f"{FILE}: {where} must be {what} (found {shown(value)})")


# -- kinds ---------------------------------------------------------------------------


class Kind:
    """One setting's type. ``check`` returns the value the config keeps, or raises."""

    __slots__ = ()
    what = "a value"

    def check(self, value: Any, where: Where, context: Context) -> Any:
        raise NotImplementedError


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Whole(Kind):
    """A count: a whole number from ``least`` (to ``most``); ``50.0`` is 50, ``0.5``
    and ``Infinity`` are errors, and so are true and false."""

    __slots__ = ("least", "most", "what")

    def __init__(self, least: int = 1, most: int | None = None, unit: str = ""):
        self.least, self.most = least, most
        of = f" of {unit}" if unit else ""
        at_most = f", at most {most}" if most is not None else ""
        self.what = f"a whole number{of} ≥ {least}{at_most}"

    def check(self, value: Any, where: Where, context: Context) -> int:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if not (_is_number(value) and isinstance(value, int)) or not self.fits(value):
            raise wrong(where, self.what, value)
        return value

    def fits(self, n: int) -> bool:
        return n >= self.least and (self.most is None or n <= self.most)


class Number(Kind):
    """A finite number (seconds, megabytes) ≥ ``least``, or > it when ``above``."""

    __slots__ = ("least", "above", "what")

    def __init__(self, least: float = 0, above: bool = False, unit: str = ""):
        self.least, self.above = least, above
        of = f" of {unit}" if unit else ""
        self.what = f"a number{of} {'>' if above else '≥'} {least:g}"

    def check(self, value: Any, where: Where, context: Context) -> float:
        ok = _is_number(value) and math.isfinite(value)
        if not ok or value < self.least or (self.above and value == self.least):
            raise wrong(where, self.what, value)
        return float(value)


class Text(Kind):
    """A non-empty string."""

    __slots__ = ()
    what = "a non-empty string"

    def check(self, value: Any, where: Where, context: Context) -> str:
        if not isinstance(value, str) or not value.strip():
            raise wrong(where, self.what, value)
        return value


class AnyText(Kind):
    """Any string (an environment variable's name, path or id)."""

    __slots__ = ()
    what = "text"

    def check(self, value: Any, where: Where, context: Context) -> str:
        if not isinstance(value, str):
            raise wrong(where, self.what, value)
        return value


class Url(Kind):
    """An http:// or https:// URL."""

    __slots__ = ()
    what = "an http:// or https:// URL"

    def check(self, value: Any, where: Where, context: Context) -> str:
        if not isinstance(value, str) or not re.match(r"https?://[^\s/]", value):
            raise wrong(where, self.what, value)
        return value


class OneOf(Kind):
    """One of a few strings."""

    __slots__ = ("choices", "what")

    def __init__(self, choices: tuple[str, ...]):
        self.choices = choices
        self.what = f"one of {', '.join(choices)}"

    def check(self, value: Any, where: Where, context: Context) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise wrong(where, self.what, value)
        return value


class TrueOrSome(Kind):
    """``true`` (every choice) or a list of some of the choices, or of strings
    ``also`` accepts (its forms named by ``also_what``); kept as a frozenset."""

    __slots__ = ("choices", "also", "what")

    def __init__(
        self,
        choices: tuple[str, ...],
        also: Callable[[str], bool] | None = None,
        also_what: tuple[str, ...] = (),
    ):
        self.choices, self.also = choices, also
        self.what = f"true or a list of {' / '.join(choices + also_what)}"

    def check(self, value: Any, where: Where, context: Context) -> frozenset[str]:
        if value is True:
            return frozenset(self.choices)
        if not isinstance(value, list) or not all(self._one(v) for v in value):
            raise wrong(where, self.what, value)
        return frozenset(value)

    def _one(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        return value in self.choices or (self.also is not None and self.also(value))


class Flag(Kind):
    """true or false."""

    __slots__ = ()
    what = "true or false"

    def check(self, value: Any, where: Where, context: Context) -> bool:
        if not isinstance(value, bool):
            raise wrong(where, self.what, value)
        return value


class Texts(Kind):
    """A list of non-empty strings (``what`` says of what); kept as a tuple."""

    __slots__ = ("what",)

    def __init__(self, what: str = "a list of non-empty strings"):
        self.what = what

    def check(self, value: Any, where: Where, context: Context) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise wrong(where, self.what, value)
        return tuple(value)


class OrNull(Kind):
    """``kind``, or null (the setting's default)."""

    __slots__ = ("kind", "what")

    def __init__(self, kind: Kind):
        self.kind = kind
        self.what = f"{kind.what} or null"

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if value is None:
            return None
        try:
            return self.kind.check(value, where, context)
        except ConfigError:
            raise wrong(where, self.what, value) from None


class Digits(Kind):
    """A whole number written in ASCII digits only, read from text (a variable):
    ``str.isdigit`` takes ``²`` and Arabic-Indic digits, and ``int`` reads the latter."""

    __slots__ = ("whole", "what")

    def __init__(self, whole: Whole):
        self.whole = whole
        self.what = f"{whole.what}, in ASCII digits"

    def check(self, value: Any, where: Where, context: Context) -> int:
        text = value.strip()
        digits = text.isascii() and text.isdigit() and len(text) <= 30
        if not digits or not self.whole.fits(int(text)):
            raise wrong(where, self.what, value)
        return int(text)


class Seconds(Kind):
    """A finite number of seconds above 0, read from text (a variable) in ASCII."""

    __slots__ = ()
    what = "a number of seconds > 0"

    def check(self, value: Any, where: Where, context: Context) -> float:
        try:
            n = float(value) if value.isascii() else math.nan
        except ValueError:
            n = math.nan
        if not 0 < n < math.inf:
            raise wrong(where, self.what, value)
        return n


class Hook(Kind):
    """A value another part of nodecode checks: ``run(value, where, context)``
    raises one ConfigError line, or returns what the config keeps."""

    __slots__ = ("what", "run")

    def __init__(self, what: str, run: Callable[[Any, Where, Context], Any]):
        self.what, self.run = what, run

    def check(self, value: Any, where: Where, context: Context) -> Any:
        return self.run(value, where, context)


class Refused(Kind):
    """A key nodecode never reads, for a reason the error gives."""

    __slots__ = ("why",)
    what = "never set"

    def __init__(self, why: str):
        self.why = why

    def check(self, value: Any, where: Where, context: Context) -> Any:
        raise ConfigError(f"{FILE}: {where} is not read: {self.why}")


class Setting:
    """One key: its kind, its default (what an absent key means) and one line saying
    what it does. ``shown_default`` is the default in words when it is worked out
    (the provider whose key variable is set)."""

    __slots__ = ("name", "kind", "default", "meaning", "shown_default", "required")

    def __init__(
        self,
        name: str,
        kind: Kind,
        default: Any,
        meaning: str,
        shown_default: str | None = None,
        required: bool = False,
    ):
        self.name, self.kind, self.default, self.meaning = name, kind, default, meaning
        self.shown_default, self.required = shown_default, required

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None:
            return "none"
        if isinstance(self.default, frozenset):
            return shown(sorted(self.default))
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return shown(self.default)


class Table(Kind):
    """An object of declared settings. A key not declared is a warning (it is left
    out of what the config keeps); a required key that is absent is an error."""

    __slots__ = ("settings", "by_name")
    what = "an object"

    def __init__(self, settings: tuple[Setting, ...]):
        self.settings = settings
        self.by_name = {s.name: s for s in settings}

    def check(self, value: Any, where: Where, context: Context) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise wrong(where, self.what, value)
        out: dict[str, Any] = {}
        for key, item in value.items():
            setting = self.by_name.get(key)
            if setting is None:
                context["warnings"].append(unknown(where / key, self.by_name))
                continue
            out[key] = setting.kind.check(item, where / key, context)
        for s in self.settings:
            if s.required and s.name not in value:
                raise ConfigError(f"{FILE}: {where / s.name} must be {s.kind.what} (found nothing)")
        return out


class ListOf(Kind):
    """A list; each element is named by its ``label`` key when it has one (a model's id)."""

    __slots__ = ("kind", "label", "what")

    def __init__(self, kind: Kind, label: str = "id"):
        self.kind, self.label = kind, label
        self.what = "a list of objects" if isinstance(kind, Table) else "a list"

    def check(self, value: Any, where: Where, context: Context) -> list[Any]:
        if not isinstance(value, list):
            raise wrong(where, self.what, value)
        return [
            self.kind.check(v, where.item(_label(v, i, self.label)), context)
            for i, v in enumerate(value)
        ]


def _label(value: Any, index: int, key: str) -> str:
    name = value.get(key) if isinstance(value, dict) else None
    return name if isinstance(name, str) and name.strip() else str(index)


# -- unknown keys --------------------------------------------------------------------


def _words(name: str) -> str:
    """``maxRounds``, ``Max-Rounds`` → ``max_rounds``: how a key is compared."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[-\s]", "_", name).lower()


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known key ``name`` was most likely meant to be, if any is close."""
    plain = {_words(k): k for k in known}
    if _words(name) in plain:
        return plain[_words(name)]
    import difflib  # only when a key is unknown: the common path never pays for it

    found = difflib.get_close_matches(_words(name), list(plain), n=1, cutoff=0.75)
    return plain[found[0]] if found else None


def unknown(where: Where, known: Mapping[str, Setting]) -> str:
    """The warning for a key no setting declares."""
    settable = [k for k, s in known.items() if not isinstance(s.kind, Refused)]
    meant = nearest(where.parts[-1], settable)
    if meant is not None:
        return f"{FILE}: {where} is not a setting; did you mean {where.up() / meant}?"
    return f"{FILE}: {where} is not a setting (ignored; `nodecode config` lists them)"
