"""Replace secret values (provider keys) with ``[redacted:NAME]`` before anything is kept.

A key is known by its core: the value trimmed of whitespace and invisible
characters (a stray carriage return, a space, a BOM, a zero-width space), so
whatever surrounds it, the key itself is blanked. The core is blanked in each
form of ``FORMS`` below, and each form is also matched in any letter case, in
full-width letters (``ｓｋ－ａｎｔ``) and with whitespace or invisible
characters between its characters: lines wrapped by an encoder, letters
separated by spaces, ``od``-style hex, zero-width joiners. The README's
security section lists the same, and what no redactor can promise.

Matching works on a skeleton of the text: gap characters dropped, full-width
and upper-case letters folded to ASCII lower case. A form is looked for in
the skeleton first (the text's UTF-8 bytes through one ``bytes.translate``,
then a substring test per form: C speed, whatever the text holds; only a text
with non-ASCII gaps or full-width letters takes the slower ``str.translate``),
and only a form found there is replaced in the text itself, by a pattern
allowing the same folds and gaps.

Values shorter than MIN_SECRET characters are ignored: a short value ("1",
"true", a port number) would turn ordinary text into noise, and a real API
key is always longer.
"""

from __future__ import annotations

import base64
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from nodecode.bounded import Bounded

MIN_SECRET = 8
MAX_GAP = 16  # gap characters allowed between two characters of a form

# Whitespace (what str.isspace calls so, as the regex \s does) and the
# invisible format characters: these may stand between a form's characters.
_INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f"
    "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\u206a\u206b\u206c\u206d\u206e\u206f"
    "\u3164\ufe0f\ufeff\uffa0"
)
GAPS = frozenset(chr(c) for c in range(0x3001) if chr(c).isspace()) | frozenset(_INVISIBLE)
_FULL_WIDTH = 0xFEE0  # U+FF01..U+FF5E are U+0021..U+007E in full width


def _fold_table() -> dict[int, int | None]:
    table: dict[int, int | None] = {ord(ch): None for ch in GAPS}
    for code in range(0x21, 0x7F):
        folded = ord(chr(code).lower())
        table[code + _FULL_WIDTH] = folded
        if folded != code:
            table[code] = folded
    return table


_FOLD = _fold_table()
_NON_ASCII = re.compile(r"([^\x00-\x7f]+)")
# The same fold on UTF-8 bytes, for a text with no non-ASCII gap or full-width letter.
_BYTE_FOLD = bytes(ord(chr(code).lower()) if code < 0x80 else code for code in range(256))
_BYTE_GAPS = bytes(code for code in range(0x80) if chr(code) in GAPS)
_WIDE = re.compile(
    b"|".join(
        re.escape(ch.encode())
        for ch in sorted(ch for ch in (*GAPS, *map(chr, range(0xFF01, 0xFF5F))) if ch >= "\x80")
    )
)
_GAP = "[" + "".join(re.escape(ch) for ch in sorted(GAPS)) + f"]{{0,{MAX_GAP}}}"


def skeleton(text: str) -> str:
    """``text`` with gap characters dropped and letters folded (see the module doc)."""
    if text.isascii():
        return text.translate(_FOLD)  # CPython's fast path: ASCII in, ASCII out
    # The slow path only for the non-ASCII runs; the ASCII between them keeps the fast one.
    return "".join(piece.translate(_FOLD) for piece in _NON_ASCII.split(text))


def _folded(text: str) -> str:
    """``skeleton(text)``, made faster: through bytes, unless the text holds a
    non-ASCII gap or full-width letter (str.translate is slow past ASCII, and
    costs a microsecond even on a short ASCII text: a stream's delta)."""
    if text.isascii():
        return text.encode("ascii").translate(_BYTE_FOLD, _BYTE_GAPS).decode("ascii")
    data = text.encode("utf-8", "surrogatepass")
    if _WIDE.search(data):
        return skeleton(text)
    return data.translate(_BYTE_FOLD, _BYTE_GAPS).decode("utf-8", "surrogatepass")


def core(value: str) -> str:
    """The key without the whitespace, control and invisible characters around it."""
    start, end = 0, len(value)
    while start < end and _stray(value[start]):
        start += 1
    while end > start and _stray(value[end - 1]):
        end -= 1
    return value[start:end]


def _stray(ch: str) -> bool:
    return ch in GAPS or unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp")


# -- the forms of a key ------------------------------------------------------------------


def _base_forms(raw: bytes, bits: int, encode: Any) -> list[str]:
    """The characters that encode only ``raw`` when it starts at each byte offset
    of a longer stream (base64: 6 bits a character, base32: 5)."""
    group = 3 if bits == 6 else 5  # bytes per full group: the offsets that differ
    forms = []
    for pad in range(group):
        text = encode(b"\0" * pad + raw).decode()
        # A character carrying a bit of the bytes before or after the key is dropped.
        forms.append(text[-(-8 * pad // bits) : 8 * (pad + len(raw)) // bits])
    return forms


def _base64(raw: bytes) -> list[str]:
    forms = _base_forms(raw, 6, base64.b64encode)
    return forms + [f.replace("+", "-").replace("/", "_") for f in forms]


FORMS = {
    "as is": lambda value, raw: [value],
    "reversed": lambda value, raw: [value[::-1]],
    "base64": lambda value, raw: _base64(raw),
    "base32": lambda value, raw: _base_forms(raw, 5, base64.b32encode),
    "hex": lambda value, raw: [raw.hex()],
    "percent-encoded": lambda value, raw: [
        quote(value, safe=""),
        "".join(f"%{b:02x}" for b in raw),
    ],
    "\\u escapes": lambda value, raw: ["".join(f"\\u{ord(ch):04x}" for ch in value)],
    "\\x escapes": lambda value, raw: ["".join(f"\\x{b:02x}" for b in raw)],
}


def spellings(value: str) -> list[str]:
    """The skeletons of the forms of ``value`` that are redacted, without duplicates."""
    raw = value.encode("utf-8", "surrogatepass")
    found = (skeleton(form) for make in FORMS.values() for form in make(value, raw))
    return list(dict.fromkeys(form for form in found if form))


def _char(ch: str) -> str:
    """A pattern for one skeleton character: its upper case and full width too."""
    if not "\x21" <= ch <= "\x7e":
        return re.escape(ch)
    alternatives = {ch, ch.upper(), chr(ord(ch) + _FULL_WIDTH), chr(ord(ch.upper()) + _FULL_WIDTH)}
    return "[" + "".join(re.escape(a) for a in sorted(alternatives)) + "]"


def _pattern(form: str) -> str:
    return _GAP.join(_char(ch) for ch in form)


# -- the redactor --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    """Every form's skeleton with its mark, longest first (a key that contains
    another is replaced whole), and what a stream needs to hold a tail back."""

    forms: tuple[tuple[str, str], ...]
    prefixes: frozenset[str]
    firsts: frozenset[str]
    longest: int

    @classmethod
    def of(cls, secrets: Mapping[str, str]) -> _Table:
        marks: dict[str, str] = {}
        # The longest secret first, so its mark wins a form two secrets share.
        for name, value in sorted(secrets.items(), key=lambda item: -len(item[1])):
            for form in spellings(value):
                marks.setdefault(form, f"[redacted:{name}]")
        ordered = sorted(marks, key=lambda form: -len(form))
        return cls(
            tuple((form, marks[form]) for form in ordered),
            frozenset(form[:n] for form in ordered for n in range(1, len(form) + 1)),
            frozenset(form[0] for form in ordered),
            max((len(form) for form in ordered), default=0),
        )


_COMPILED = Bounded(64)  # forms found together → their pattern: the same few recur


def _compile(forms: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern with a group per form."""
    pattern = _COMPILED.get(forms)
    if pattern is None:
        pattern = _COMPILED.keep(forms, re.compile("|".join(f"({_pattern(f)})" for f in forms)))
    return pattern


class Redactor:
    """Knows the secret values by name and blanks them out of text and payloads."""

    def __init__(self, secrets: Mapping[str, str] | None = None):
        self._secrets: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            kept = _kept(value)
            if kept:
                self._secrets[name] = kept
        self._build()

    @classmethod
    def from_env(cls, names: Iterable[str], environ: Mapping[str, str] = os.environ) -> Redactor:
        """A redactor for the values these variables hold (unset, empty and short ones skipped)."""
        return cls({name: environ.get(name, "") for name in names})

    def add(self, name: str, value: str | None) -> None:
        """Also blank ``value``: a key learned later (from a command or a file)."""
        kept = _kept(value)
        if kept and self._secrets.get(name) != kept:
            self._secrets[name] = kept
            self._build()

    def _build(self) -> None:
        # Replaced whole, never mutated: a reader in another thread sees old or new.
        self._table = _Table.of(self._secrets)
        self.longest = self._table.longest
        self.names = frozenset(self._secrets)

    def apply(self, text: str) -> str:
        """The text with every secret value replaced by its ``[redacted:NAME]`` mark."""
        table = self._table
        if not table.forms:
            return text
        folded = _folded(text)
        found = [(form, mark) for form, mark in table.forms if form in folded]
        if not found:
            return text
        marks = [mark for _, mark in found]
        pattern = _compile(tuple(form for form, _ in found))

        def mark(m: re.Match[str]) -> str:
            group = m.lastindex  # each form is a group of its own: the one that matched
            assert group is not None
            return marks[group - 1]

        return pattern.sub(mark, text)

    __call__ = apply  # so a Redactor can be passed wherever a str -> str function is wanted

    def apply_obj(self, obj: Any) -> Any:
        """A copy of a payload (dicts, lists, tuples, str, bytes) with its strings redacted."""
        if not self._secrets:
            return obj
        if isinstance(obj, str):
            return self.apply(obj)
        if isinstance(obj, bytes):
            # surrogateescape: bytes that are not UTF-8 come back exactly as they were.
            text = obj.decode("utf-8", "surrogateescape")
            done = self.apply(text)
            return obj if done is text else done.encode("utf-8", "surrogateescape")
        if isinstance(obj, dict):
            return {key: self.apply_obj(value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self.apply_obj(item) for item in obj]
        if isinstance(obj, tuple):
            items = [self.apply_obj(item) for item in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
        return obj

    def open_tail(self, text: str) -> int:
        """Where the longest tail of ``text`` that could still grow into a form of
        a secret starts (``len(text)`` when none could)."""
        table = self._table
        window = text[-table.longest * (MAX_GAP + 1) :] if table.longest else ""
        folded = _folded(window)
        for at in range(max(0, len(folded) - table.longest + 1), len(folded)):
            if folded[at] in table.firsts and folded[at:] in table.prefixes:
                return _start_of(text, len(folded) - at)
        return len(text)

    def stream(self) -> StreamRedactor:
        """A redactor for text that arrives in pieces (a streamed reply)."""
        return StreamRedactor(self)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __repr__(self) -> str:
        # Never the values: a repr can end up in a log or a traceback.
        return f"Redactor(names={sorted(self.names)})"


def _kept(value: str | None) -> str | None:
    """The core of a value worth redacting, or None."""
    kept = core(value) if value else ""
    return kept if len(skeleton(kept)) >= MIN_SECRET else None


def _start_of(text: str, count: int) -> int:
    """Where the last ``count`` characters that are not gaps begin in ``text``."""
    at = len(text)
    while count:
        at -= 1
        if text[at] not in GAPS:
            count -= 1
    return at


class StreamRedactor:
    """Redaction that holds across chunk boundaries: a tail that could begin a
    secret is held back (it is shorter than the longest form, gaps aside)
    until the next chunk completes or clears it, or ``flush`` ends the stream."""

    def __init__(self, redactor: Redactor):
        self._redactor = redactor
        self._held = ""

    def feed(self, chunk: str) -> str:
        """The text that can be shown now."""
        text = self._redactor.apply(self._held + chunk)
        cut = self._redactor.open_tail(text)
        self._held = text[cut:]
        return text[:cut]

    def flush(self) -> str:
        """The held-back tail (the stream ended, stopped or failed)."""
        text, self._held = self._redactor.apply(self._held), ""
        return text
