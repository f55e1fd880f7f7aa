"""The (context …) verb: export the context, or record an edit as a form."""

from __future__ import annotations

from typing import Any

from nodecode.cells.env import CellEnv
from nodecode.cells.forms import Pair, Sym, T
from nodecode.cells.registry import Family, verb
from nodecode.context import take as takes
from nodecode.context.derived import state
from nodecode.context.edits import Applied, apply, read_form_edit
from nodecode.context.message import Message
from nodecode.errors import CellError
from nodecode.verbs.env import in_session
from nodecode.words import plural


def _span(item: Any) -> int | list[int]:
    if isinstance(item, bool) or not isinstance(item, (int, Pair)):
        raise CellError(
            f"(context :drop SPANS): each span must be a seq or (from . to) (got {item!r})"
        )
    if isinstance(item, Pair):
        lo, hi = item
        if not isinstance(lo, int) or not isinstance(hi, int) or lo > hi:
            raise CellError(
                f"(context :drop SPANS): (from . to) needs integers with from ≤ to "
                f"(got ({lo} . {hi}))"
            )
        return [lo, hi]
    return item


def form_of(drop: Any, keep: Any, note: Any) -> dict[str, Any]:
    """The form's arguments as a plain, loggable edit."""
    form: dict[str, Any] = {}
    if drop is not None:
        if isinstance(drop, Sym) and drop == T:
            form["drop"] = "t"
        else:
            items = drop if isinstance(drop, list) else [drop]
            form["drop"] = [_span(i) for i in items]
    if keep is not None:
        items = keep if isinstance(keep, list) else [keep]
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
            raise CellError(f"(context :keep IDS): IDS must be seqs (got {keep!r})")
        form["keep"] = items
    if note is not None:
        form["note"] = note
    return form


@verb(
    "context",
    keywords={"drop": (Sym, list, int, Pair), "keep": (list, int), "note": str},
    metavars={"drop": "SPANS", "keep": "IDS", "note": "TEXT"},
)
def context_verb(env: CellEnv, drop: Any = None, keep: Any = None, note: Any = None) -> str:
    """Edit your own context (see below).

    No arguments: export the context to a file; else record the edit as a form."""
    session = in_session(env, "(context …): this cell runs outside a session (no context to edit)")
    ws, sid = session.ws, session.session
    if drop is None and keep is None and note is None:
        return str(takes.export(ws, sid))
    if isinstance(note, str):
        note = env.redact(note)  # the note is logged and sent: never with a key
    form = form_of(drop, keep, note)
    st = state(ws.store, sid)
    edit = read_form_edit(form, st.messages, st)
    if edit.errors:
        raise CellError(f"(context …): {edit.error()}")
    takes.record_form_edit(ws.store, sid, form, session.turn or takes.head_turn(ws.store, sid))
    said = preview(st.messages, edit, st)
    if session.foresee is not None:
        line = session.foresee(st.messages, takes.dry_run(st.messages, edit, st)[0])
        said += f"\nCost: {line}." if line else ""
    return said


def preview(order: list[Message], edit: Any, st: Any) -> str:
    """One paragraph: what the next request will take."""
    counter = iter(range(-1, -(10**6), -1))
    after, done = apply(order, edit, st, lambda text: Message(next(counter), "note", text))
    parts = [
        f"Pending until your next request: the context goes from {len(order)} to "
        f"{plural(len(after), 'message')}"
    ]
    if done.deleted:
        parts.append(f"dropping {len(done.deleted)} ({_ids(done.deleted)})")
    if done.pairs:
        parts.append("; ".join(p.said(ahead=True) for p in done.pairs))
    if done.noted:
        parts.append("adding a note at the end")
    return ", ".join(parts) + ". A receipt will say what was taken."


def _ids(ids: list[int]) -> str:
    shown = " ".join(map(str, ids[:12]))
    return shown + (" …" if len(ids) > 12 else "")


FAMILY = Family("context", (context_verb,))

__all__ = ["FAMILY", "Applied", "context_verb", "form_of", "preview"]
