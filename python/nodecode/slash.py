"""Slash commands: a message that starts with ``/NAME`` runs a command instead
of asking the model (``:help nodecode-slash``).

``COMMANDS`` is the one table: each command's name, its arguments, its line of
``/help``, and what it runs — the ``nodecode`` command in ``nodecode ask``
(``cli/slash.py`` parses its words with that command's own parser) and the
``:Nodecode…`` command in Neovim's chat (the host hands it to Lua, which runs
it as the command does). ``/help`` and the chat's completion read it too.

What a message is (``read``):
  ``/NAME words…``  NAME in the table: that command, with the rest as its words
  ``//text``        the message ``/text`` (the escape)
  ``/NAME …``       NAME a word that is in no table: an error naming it
  anything else     the message as typed: ``a/b``, ``/etc/hosts is broken``
                    (a slash after the word makes it a path, not a command)
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from nodecode.errors import UserError

# The word right after the slash, ended by a space or the end of the text.
_NAME = re.compile(r"/([A-Za-z][A-Za-z0-9_-]*)(?=\s|$)")


def _same(words: list[str]) -> list[str]:
    return words


def _budget_cli(words: list[str]) -> list[str]:
    """``/budget N`` is ``nodecode budget set N``."""
    return ["set", *words] if words and words[0] not in ("set", "clear") else words


def _fork_cli(words: list[str]) -> list[str]:
    """``/fork TURN`` is ``nodecode fork --at TURN``."""
    return ["--at", *words] if words and not words[0].startswith("-") else words


@dataclass(frozen=True)
class Slash:
    """``/NAME ARGS``: its line of help and what it runs. ``cli``: the
    ``nodecode`` command (its words made that command's by ``cli_words``);
    ``nvim``: the ``:Nodecode…`` command, ``bang`` to run it with ``!``, and
    ``force``: the word that adds the ``!`` (``--force``, as in the CLI).
    ``nargs``: how many words Neovim takes besides ``force``, as a user
    command's -nargs ("0", "?" or "*")."""

    name: str
    args: str
    help: str
    cli: str | None
    nvim: str | None
    nargs: str = "0"
    aliases: tuple[str, ...] = ()
    cli_words: Callable[[list[str]], list[str]] = _same
    bang: bool = False
    force: str | None = None

    @property
    def usage(self) -> str:
        return f"/{self.name} {self.args}".rstrip()


COMMANDS: tuple[Slash, ...] = (
    Slash(
        "context",
        "",
        "the budget report: window, fill and what fills it",
        "status",
        "NodecodeStatus",
    ),
    Slash(
        "evict",
        "[PERCENT | through TURN]",
        "evict old turns now, with a receipt",
        "evict",
        "NodecodeEvict",
        nargs="*",
        aliases=("compact",),
    ),
    Slash("tree", "", "the session's turn tree", "tree", "NodecodeTree"),
    Slash(
        "undo",
        "[--force]",
        "undo the last turn and its file changes",
        "undo",
        "NodecodeUndo",
        force="--force",
    ),
    Slash(
        "redo",
        "[--force]",
        "redo the turn the last undo took back",
        "redo",
        "NodecodeRedo",
        force="--force",
    ),
    Slash(
        "fork",
        "[TURN]",
        "fork a new session here (or at TURN) and work in it",
        "fork",
        "NodecodeFork",
        nargs="?",
        cli_words=_fork_cli,
    ),
    Slash(
        "recall",
        "WORDS…",
        "search every session's log for WORDS",
        "recall-search",
        "NodecodeRecall",
        nargs="*",
        bang=True,
    ),
    Slash(
        "model",
        "[PROVIDER/MODEL]",
        "the model of the next request: list them, or switch",
        None,
        "NodecodeModel",
        nargs="?",
    ),
    Slash(
        "budget",
        "[N | clear]",
        "the window and the budget; N tokens as the window, or clear it",
        "budget",
        "NodecodeBudget",
        nargs="?",
        cli_words=_budget_cli,
    ),
    Slash("help", "", "these commands", None, None),
)

BY_NAME: dict[str, Slash] = {n: c for c in COMMANDS for n in (c.name, *c.aliases)}


@dataclass(frozen=True)
class Call:
    """A message that is a slash command: the command and the text after its name."""

    command: Slash
    rest: str

    def words(self) -> list[str]:
        """The words after the name, split as a shell splits them (ValueError:
        an unclosed quote)."""
        return shlex.split(self.rest)


def read(text: str) -> Call | str:
    """``text`` typed as a message: a ``Call``, or the text to send the model
    (as typed, or without the escape's first slash); an unknown ``/NAME`` is a
    UserError naming it."""
    if text.startswith("//"):
        return text[1:]
    found = _NAME.match(text)
    if found is None:
        return text
    name = found.group(1)
    command = BY_NAME.get(name)
    if command is None:
        raise UserError(unknown(name))
    return Call(command, text[found.end() :].strip())


def unknown(name: str) -> str:
    """The one line for ``/NAME`` that is no command."""
    close = difflib.get_close_matches(name, BY_NAME, n=1)
    hint = f" (did you mean /{close[0]}?)" if close else ""
    return f"/{name} is not a command{hint}: /help lists them, //{name} sends it as text"


def help_lines() -> list[str]:
    """``/help``: one line per command, then the escape."""
    rows = [(c.usage, c.help + _also(c)) for c in COMMANDS]
    rows.append(("//TEXT", "send /TEXT to the model as it is"))
    width = max(len(u) for u, _ in rows)
    return [f"{u.ljust(width)}  {h}" for u, h in rows]


def _also(c: Slash) -> str:
    return "".join(f" (also /{a})" for a in c.aliases)


def completions() -> list[dict[str, str]]:
    """Every name the chat completes, aliases too: {name, args, help}."""
    return [
        {"name": n, "args": c.args, "help": c.help if n == c.name else f"alias of /{c.name}"}
        for c in COMMANDS
        for n in (c.name, *c.aliases)
    ]


def in_neovim(call: Call) -> dict[str, object]:
    """What Neovim's chat runs for ``call``: {name, command, args, bang}, or
    {name, lines} for /help. Words it cannot take are a UserError."""
    c = call.command
    try:
        words = call.words()
    except ValueError as e:
        raise UserError(f"{c.usage}: {e} (got {call.rest!r})") from None
    bang = c.bang
    if c.force is not None and c.force in words:
        words.remove(c.force)
        bang = True
    _check_count(c, words)
    if c.nvim is None:
        return {"name": c.name, "lines": help_lines()}
    return {"name": c.name, "command": c.nvim, "args": " ".join(words), "bang": bang}


def _check_count(c: Slash, words: list[str]) -> None:
    most = {"0": 0, "?": 1}.get(c.nargs)
    if most is not None and len(words) > most:
        expected = f"{c.usage}: expected " + ("no arguments" if most == 0 else c.args)
        raise UserError(f"{expected} (got {' '.join(words)!r}); /help lists the commands")
