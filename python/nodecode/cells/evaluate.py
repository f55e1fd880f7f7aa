"""Evaluate a cell form by form into the text the agent reads; never crash the turn.

This is a boundary: every failure becomes an error result (``error: …``),
except KeyboardInterrupt, SystemExit, Stopped (the person stopping the turn,
e.g. from an approval prompt) and StoreError (the log cannot be written, so
nothing more may run), which the agent loop must see.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from nodecode.cells.env import CellEnv
from nodecode.cells.forms import Keyword, Sym, kind_of, show_form
from nodecode.cells.reader import read_cell
from nodecode.cells.registry import unknown_verb
from nodecode.errors import CellError, Stopped, StoreError, UserError
from nodecode.words import plural

TOOL_NAME = "eval"
_EXAMPLE = '(read-file "README.md")'


@dataclass(frozen=True)
class CellResult:
    """The output the agent reads for one call, and whether it ended in an error."""

    output: str
    error: bool


def evaluate(code: str, env: CellEnv) -> CellResult:
    """Read and run every form of a cell in order, stopping at the first failure
    or at the turn's stop (``env.cancel``): a form after the stop never starts."""
    try:
        output, error = _evaluate(code, env)
    except (Stopped, StoreError):
        raise
    except Exception as e:  # noqa: BLE001 — a bug in the reader must not end the turn either
        output, error = f"error: internal error reading the cell: {_exc(e)}", True
    return _result(output, error, env)


def _evaluate(code: str, env: CellEnv) -> tuple[str, bool]:
    try:
        forms = read_cell(code)
        if not forms:
            raise CellError(f"cell: no forms to evaluate; expected one like {_EXAMPLE}")
    except CellError as e:
        return f"error: {e}", True
    echo = len(forms) > 1
    parts: list[str] = []
    for k, form in enumerate(forms):
        if env.cancel.is_set():  # the person stopped the turn: no later form runs
            parts.append(f"[stopped by the person: {plural(len(forms) - k, 'form')} not run]")
            return "\n\n".join(parts), False
        output, failed = _run_form(form, env)
        # With several forms each result is echoed by its form so the agent can tell them apart.
        parts.append(f";; {show_form(form)}\n" + output.rstrip("\n") if echo else output)
        if failed:
            return "\n\n".join(parts), True
    return "\n\n".join(parts), False


def evaluate_call(name: str, input: Any, env: CellEnv) -> CellResult:
    """Run one tool call of the agent: only ``eval`` with ``{"code": "<cell>"}`` exists."""
    if name != TOOL_NAME:
        return _result(
            f'error: unknown tool "{name}": the only tool is eval, '
            'whose input is {"code": "<cell>"}',
            True,
            env,
        )
    code = _code_of(input)
    if not isinstance(code, str):
        return _result(f"error: {code}", True, env)
    return evaluate(code, env)


def _code_of(input: Any) -> str | CellError:
    """The cell in a call's input, or the error naming what was found instead."""
    if isinstance(input, str):
        try:
            input = json.loads(input)  # some providers hand over the arguments as JSON text
        except ValueError:
            return CellError(
                f'eval input must be an object {{"code": "<cell>"}}, '
                f"found a string that is not JSON: {show_form(input, 60)}"
            )
    if not isinstance(input, dict):
        return CellError(
            f'eval input must be an object {{"code": "<cell>"}}, found {_json_kind(input)}'
        )
    if "code" not in input:
        keys = ", ".join(json.dumps(str(k)) for k in sorted(map(str, input)))
        return CellError(
            'eval input must have a "code" string, found '
            + (f"only the keys {keys}" if keys else "an empty object")
        )
    if not isinstance(input["code"], str):
        return CellError(f'eval input "code" must be a string, found {_json_kind(input["code"])}')
    return input["code"]


def _run_form(form: object, env: CellEnv) -> tuple[str, bool]:
    """One top-level form's output and whether it failed."""
    if not isinstance(form, list) or not form:
        what = "an empty form ()" if form == [] else f"{kind_of(form)} {show_form(form, 40)}"
        return f"error: expected a form like {_EXAMPLE} at the top level, found {what}", True
    head = form[0]
    if not isinstance(head, Sym) or isinstance(head, Keyword):
        return (
            f"error: a form starts with a verb, like {_EXAMPLE}; "
            f"found {kind_of(head)} {show_form(head, 40)}"
        ), True
    entry = env.verbs.get(str(head))
    try:
        if entry is None:
            raise unknown_verb(str(head), env.verbs)
        return entry(env, form[1:]), False
    except (Stopped, StoreError):
        raise
    except (CellError, UserError) as e:  # a verb's domain code may refuse the person's input
        return f"error: {e}", True
    except OSError as e:
        return f"error: {head}: {_os_message(e)}", True
    except Exception as e:  # noqa: BLE001 — a bug in a verb must not end the turn
        return f"error: internal error in ({head} …): {_exc(e)}", True


def _exc(e: BaseException) -> str:
    return f"{type(e).__name__}: " + " ".join(str(e).split())


def _os_message(e: OSError) -> str:
    text = e.strerror or str(e)
    return f"{text}: {e.filename}" if e.filename else text


def _json_kind(value: object) -> str:
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(value), f"a {type(value).__name__}")


def _result(output: str, error: bool, env: CellEnv) -> CellResult:
    return CellResult(_redact(output, env), error)


def _redact(output: str, env: CellEnv) -> str:
    try:
        return env.redact(output)
    except Exception as e:  # noqa: BLE001 — a failing redactor must not leak the unredacted text
        return f"error: the output could not be redacted ({type(e).__name__})"
