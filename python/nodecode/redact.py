"""Replace secret values (provider keys) with ``[redacted:ENVNAME]`` before anything is kept.

Values shorter than MIN_SECRET characters are ignored: a short value ("1",
"true", a port number) would turn ordinary text into noise, and a real API
key is always longer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

MIN_SECRET = 8


class Redactor:
    """Knows the secret values by variable name and blanks them out of text and payloads."""

    def __init__(self, secrets: Mapping[str, str] | None = None):
        kept = {
            name: value
            for name, value in (secrets or {}).items()
            if value and len(value) >= MIN_SECRET
        }
        # Longest first, so a key that contains another is replaced whole.
        self._pairs = sorted(
            ((v, f"[redacted:{n}]") for n, v in kept.items()), key=lambda pair: -len(pair[0])
        )
        self.names = frozenset(kept)

    @classmethod
    def from_env(cls, names: Iterable[str], environ: Mapping[str, str] = os.environ) -> Redactor:
        """A redactor for the values these variables hold (unset, empty and short ones skipped)."""
        return cls({name: environ.get(name, "") for name in names})

    def apply(self, text: str) -> str:
        """The text with every secret value replaced by its ``[redacted:NAME]`` mark."""
        for value, mark in self._pairs:
            if value in text:
                text = text.replace(value, mark)
        return text

    __call__ = apply  # so a Redactor can be passed wherever a str -> str function is wanted

    def apply_obj(self, obj: Any) -> Any:
        """A copy of a payload (dicts, lists, tuples, str, bytes) with its strings redacted."""
        if not self._pairs:
            return obj
        if isinstance(obj, str):
            return self.apply(obj)
        if isinstance(obj, bytes):
            return self._apply_bytes(obj)
        if isinstance(obj, dict):
            return {key: self.apply_obj(value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self.apply_obj(item) for item in obj]
        if isinstance(obj, tuple):
            items = [self.apply_obj(item) for item in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
        return obj

    def _apply_bytes(self, data: bytes) -> bytes:
        for value, mark in self._pairs:
            raw = value.encode("utf-8", "surrogatepass")
            if raw in data:
                data = data.replace(raw, mark.encode())
        return data

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __repr__(self) -> str:
        # Never the values: a repr can end up in a log or a traceback.
        return f"Redactor(names={sorted(self.names)})"
