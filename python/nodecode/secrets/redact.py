"""Replace secret values (provider keys) with ``[redacted:NAME]`` before anything is kept.

A key is blanked in every spelling a command easily prints: as is, reversed
(``rev``), base64 at each of the three alignments inside a longer stream (the
edge characters that also encode neighbouring bytes stripped), hex in lower and
upper case, and percent-encoded. Encoders wrap long lines (``base64``,
``xxd -p``), so a spelling also matches with line breaks between its characters.

Values shorter than MIN_SECRET characters are ignored: a short value ("1",
"true", a port number) would turn ordinary text into noise, and a real API
key is always longer.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar
from urllib.parse import quote

MIN_SECRET = 8

S = TypeVar("S", str, bytes)


def spellings(value: str) -> list[str]:
    """The forms of ``value`` that are redacted, without duplicates."""
    raw = value.encode("utf-8", "surrogatepass")
    forms = [value, value[::-1], *_base64_forms(raw), raw.hex(), raw.hex().upper()]
    quoted = quote(value, safe="")
    forms += [quoted, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quoted)]
    forms += ["".join(f"%{b:02x}" for b in raw), "".join(f"%{b:02X}" for b in raw)]
    return list(dict.fromkeys(forms))


def _base64_forms(raw: bytes) -> list[str]:
    """The characters that encode only ``raw`` when it starts at offset 0, 1 or 2
    (mod 3) of a longer stream, in the standard and the URL-safe alphabet."""
    forms = []
    for pad in range(3):
        text = base64.b64encode(b"\0" * pad + raw).decode()
        # A character carrying a bit of the bytes before or after the key is dropped.
        inner = text[(8 * pad + 5) // 6 : 8 * (pad + len(raw)) // 6]
        forms += [inner, inner.replace("+", "-").replace("/", "_")]
    return forms


class _Table(Generic[S]):
    """Spellings and their marks, as str or as bytes, longest first (so a key
    that contains another is replaced whole)."""

    def __init__(self, pairs: list[tuple[S, S]], empty: S):
        self.pairs = sorted(pairs, key=lambda pair: -len(pair[0]))
        self._empty = empty
        self._nl, self._cr = _as(empty, "\n"), _as(empty, "\r")
        self._mark_of = dict(reversed(self.pairs))  # the longest secret's mark wins a shared form
        self._pattern: re.Pattern[S] | None = None

    def apply(self, text: S) -> S:
        for value, mark in self.pairs:
            if value in text:
                text = text.replace(value, mark)
        if self._nl in text:
            flat = self._unwrap(text)  # once, not per spelling: each is a copy of the text
            if any(value in flat for value, _ in self.pairs):
                text = self._wrapped().sub(lambda m: self._mark_of[self._unwrap(m.group())], text)
        return text

    def _unwrap(self, text: S) -> S:
        return text.replace(self._cr, self._empty).replace(self._nl, self._empty)

    def _wrapped(self) -> re.Pattern[S]:
        """One pattern for every spelling, a line break allowed between its characters."""
        if self._pattern is None:
            gap = _as(self._empty, "(?:\r?\n)?")
            alternatives = [
                gap.join(re.escape(value[i : i + 1]) for i in range(len(value)))
                for value, _ in self.pairs
            ]
            self._pattern = re.compile(_as(self._empty, "|").join(alternatives))
        return self._pattern


def _as(kind: S, text: str) -> S:
    return text.encode() if isinstance(kind, bytes) else text  # type: ignore[return-value]


class Redactor:
    """Knows the secret values by name and blanks them out of text and payloads."""

    def __init__(self, secrets: Mapping[str, str] | None = None):
        self._secrets = {
            name: value
            for name, value in (secrets or {}).items()
            if value and len(value) >= MIN_SECRET
        }
        self._build()

    @classmethod
    def from_env(cls, names: Iterable[str], environ: Mapping[str, str] = os.environ) -> Redactor:
        """A redactor for the values these variables hold (unset, empty and short ones skipped)."""
        return cls({name: environ.get(name, "") for name in names})

    def add(self, name: str, value: str | None) -> None:
        """Also blank ``value``: a key learned later (from a command or a file)."""
        if value and len(value) >= MIN_SECRET and self._secrets.get(name) != value:
            self._secrets[name] = value
            self._build()

    def _build(self) -> None:
        pairs = [(f, f"[redacted:{n}]") for n, v in self._secrets.items() for f in spellings(v)]
        # Replaced whole, never mutated: a reader in another thread sees old or new.
        self._text = _Table(pairs, "")
        self._bytes = _Table(
            [(f.encode("utf-8", "surrogatepass"), m.encode()) for f, m in pairs], b""
        )
        self._firsts = frozenset(f[0] for f, _ in pairs)
        self.longest = max((len(f) for f, _ in pairs), default=0)
        self.names = frozenset(self._secrets)

    def apply(self, text: str) -> str:
        """The text with every secret value replaced by its ``[redacted:NAME]`` mark."""
        return self._text.apply(text)

    __call__ = apply  # so a Redactor can be passed wherever a str -> str function is wanted

    def apply_obj(self, obj: Any) -> Any:
        """A copy of a payload (dicts, lists, tuples, str, bytes) with its strings redacted."""
        if not self._secrets:
            return obj
        if isinstance(obj, str):
            return self.apply(obj)
        if isinstance(obj, bytes):
            return self._bytes.apply(obj)
        if isinstance(obj, dict):
            return {key: self.apply_obj(value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self.apply_obj(item) for item in obj]
        if isinstance(obj, tuple):
            items = [self.apply_obj(item) for item in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
        return obj

    def open_tail(self, text: str) -> int:
        """Where the longest tail of ``text`` that could still grow into a spelling
        of a secret starts (``len(text)`` when none could)."""
        pairs = self._text.pairs
        for at in range(max(0, len(text) - self.longest + 1), len(text)):
            if text[at] in self._firsts and any(f.startswith(text[at:]) for f, _ in pairs):
                return at
        return len(text)

    def stream(self) -> StreamRedactor:
        """A redactor for text that arrives in pieces (a streamed reply)."""
        return StreamRedactor(self)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __repr__(self) -> str:
        # Never the values: a repr can end up in a log or a traceback.
        return f"Redactor(names={sorted(self.names)})"


class StreamRedactor:
    """Redaction that holds across chunk boundaries: a tail that could begin a
    secret is held back (it is shorter than the longest spelling) until the next
    chunk completes or clears it, or ``flush`` ends the stream.

    A spelling wrapped over lines is caught when it arrives within one window."""

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
