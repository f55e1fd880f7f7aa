"""The settings reference, made from the schema: what ``nodecode config`` prints
and what ``scripts/config_help.py`` writes into ``:help nodecode-config``."""

from __future__ import annotations

import textwrap

from nodecode.config import schema
from nodecode.config.kinds import Refused, Setting, Table

WIDTH = 78
HEADING = " ~"  # a heading in a help file
COLUMN = 25  # where the text beside a name starts


def _entry(name: str, meaning: str, what: str) -> list[str]:
    """``name`` with its meaning beside it, then what it takes, wrapped under it."""
    pad = " " * COLUMN
    first = name.ljust(COLUMN) if len(name) < COLUMN - 1 else None
    body = textwrap.wrap(meaning, WIDTH - COLUMN, break_on_hyphens=False)
    body += textwrap.wrap(what, WIDTH - COLUMN, break_on_hyphens=False)
    lines = [pad + line for line in body]
    if first is None:
        return [name, *lines]
    return [first + lines[0][COLUMN:], *lines[1:]]


def _setting(s: Setting) -> list[str]:
    if isinstance(s.kind, Refused):
        return _entry(
            s.name,
            s.meaning,
            "refused (an error): a key comes from api_key_env, api_key_cmd or api_key_file",
        )
    default = "none: required" if s.required else s.default_text()
    return _entry(s.name, s.meaning, f"{s.kind.what} · default: {default}")


def _table(title: str, table: Table) -> list[str]:
    out = [f"{title}{HEADING}"]
    for s in table.settings:
        out += _setting(s)
    return out


def lines() -> list[str]:
    """Every setting of config.jsonc, by where it goes, then the environment."""
    out = _table('config.jsonc, at the top (e.g. "max_rounds": 50)', schema.SETTINGS)
    out += [""] + _table(
        "Each provider: providers.ID (built in: anthropic, openai)", schema.PROVIDER
    )
    out += [""] + _table("Each model: providers.ID.models[] (an object per model)", schema.MODEL)
    out += ["", f"The environment (unset or empty: not set){HEADING}"]
    for v in schema.ENVIRONMENT:
        if not v.internal:
            out += _entry(v.name, v.meaning, v.kind.what)
    return out


def text(markup: bool = False) -> str:
    """The reference as ``nodecode config`` prints it; ``markup``: as the help file
    has it (headings end in `` ~``)."""
    body = "\n".join(lines()) + "\n"
    return body if markup else body.replace(HEADING + "\n", "\n")
