"""The system prompt and the one tool definition, made from a verb table.

The prompt's list of verbs is each verb's usage and one-line doc, family by
family in the table's order, then each family's guidance: a new family (MCP
tools) adds itself. A request must start with the same bytes every time
(prompt caching), so both are pure functions of the table, made once per
table; ``SYSTEM_PROMPT`` and ``TOOLS`` are the agent's (``verbs.table.VERBS``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nodecode.cells.evaluate import TOOL_NAME
from nodecode.cells.registry import Family, Table, spec_of
from nodecode.context import instructions
from nodecode.context.instructions import Instruction
from nodecode.verbs.table import VERBS

_BEFORE_VERBS = """\
You are nodecode, a coding agent working in the person's workspace through one tool, `eval`.

# The eval tool
Its input is {"code": "<cell>"}: a cell of Lisp forms, evaluated in order. Start every cell
with a `;;` comment line saying what it is for; that line is what survives in history
summaries. Strings use double quotes with backslash escapes. Keywords look like `:from`.
Verbs:
"""

_AFTER_VERBS = """\
Every tool result ends with `[seq N]`: N is its number in the session log. A long result is
cut; (recall-entry N) shows the whole of it.

# Your context is a file
What you read on each request is your context: the messages of this session. (context)
writes it to a file and returns the path. The file's first line names the export; keep it.
Each message is a block under a line `[[m:NONCE ID ROLE]]`. Edit the file with the file verbs
or shell to manage your own memory: delete a block to drop a message (deleting a tool result
drops its call too), rewrite a body to shorten it, add a `[[note]]` line followed by text to
leave yourself a note there, or write a removed message's header back to restore it.
(context :drop SPANS :keep IDS :note TEXT) makes the same edit without the file. Edits are
taken at your next request and a receipt says what happened; an edit made before another
was taken is refused. Messages before the first change stay cached, so edit old history
rarely and in one go. Nothing is ever lost: recall reads every original.

# Budget
Your context has a token budget. Near 85% you get a notice; past it, the oldest finished
turns are evicted into a stub that keeps each cell's `;;` line and your notes, and says how
to recall them. Keep notes of what matters; drop what no longer does.

# Working
Be direct. Read before you edit. Prefer small, checked steps. When the task is done, answer
in plain text without calling the tool.
"""


@dataclass(frozen=True)
class Prompt:
    """What every request of a session starts with: the system prompt (the verbs'
    part, then the project's instructions) and the tool definitions."""

    system: str
    tools: list[dict[str, Any]]
    base: str  # the system prompt without the instructions
    instructions: tuple[Instruction, ...] = ()

    @property
    def instructions_text(self) -> str:
        return self.system[len(self.base) :]


def prompt(verbs: Table, found: Sequence[Instruction] = ()) -> Prompt:
    """The prompt for a cell that may call ``verbs``, carrying the instructions
    ``found``: the same object for the same table and texts (made once)."""
    return _prompt(verbs.families, tuple(found))


@functools.lru_cache(maxsize=16)
def _prompt(families: tuple[Family, ...], found: tuple[Instruction, ...]) -> Prompt:
    base = _system(families)
    extra = instructions.section(found)
    system = base + ("\n" + extra if extra else "")
    return Prompt(system, _tools(families), base, found)


def system_prompt(verbs: Table) -> str:
    """The system prompt for a cell that may call ``verbs`` (no instructions)."""
    return _system(verbs.families)


def tools(verbs: Table) -> list[dict[str, Any]]:
    """The tool definitions (the one ``eval``) for ``verbs``; the same list every
    call, not to be changed."""
    return _tools(verbs.families)


@functools.lru_cache(maxsize=16)
def _system(families: tuple[Family, ...]) -> str:
    lines = [_line(fn) for family in families for fn in family.verbs]
    lines += [family.guidance for family in families if family.guidance]
    return _BEFORE_VERBS + "\n".join(lines) + "\n" + _AFTER_VERBS


def _line(fn: Any) -> str:
    verb = spec_of(fn)
    return f"- {verb.usage} - {verb.doc}"


@functools.lru_cache(maxsize=16)
def _tools(families: tuple[Family, ...]) -> list[dict[str, Any]]:
    return [
        {
            "name": TOOL_NAME,
            "description": (
                f"Evaluate a cell of Lisp forms (verbs for {_listed(families)}). "
                "The first line is a ;; comment saying what the cell is for."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The cell: one or more Lisp forms."}
                },
                "required": ["code"],
            },
        }
    ]


def _listed(families: tuple[Family, ...]) -> str:
    """'files, shell, context and recall'."""
    names = [family.name for family in families]
    return " and ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))


SYSTEM_PROMPT = system_prompt(VERBS)
TOOLS = tools(VERBS)
DEFAULT = prompt(VERBS)  # the prompt of a session with no instructions
