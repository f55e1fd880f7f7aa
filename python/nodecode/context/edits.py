"""An edit of the context as changes: read from a saved file or a (context …) form,
checked against the rules of doc/design.md "The context", and applied to an order of messages.

Reading never changes anything; ``apply`` returns a new order and a summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodecode.context.fileformat import NOTE_LINE, Block, Split, split, split_like
from nodecode.context.message import Message, rewritten
from nodecode.context.model import State

SIGNED = "a thinking block is signed by the provider: keep it or delete it"


@dataclass
class Edit:
    """What an edit asks for. ``line`` numbers errors for the file; forms have none."""

    deleted: list[int] = field(default_factory=list)  # as asked, before pairs
    rewrites: dict[int, str] = field(default_factory=dict)
    notes: list[tuple[int | None, str]] = field(default_factory=list)  # (after id, text)
    restores: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    errors: list[tuple[int | None, str]] = field(default_factory=list)

    def error(self) -> str | None:
        """The first refusal reason, naming its line."""
        if not self.errors:
            return None
        line, reason = self.errors[0]
        return f"line {line}: {reason}" if line else reason


@dataclass(frozen=True)
class Pair:
    """One half of a call/result pair that went with the other: deleting 5 took
    its call 4, restoring 5 brought back its call 4."""

    verb: str  # deleting | restoring
    id: int
    what: str  # its call | its result
    other: int

    def said(self, ahead: bool = False) -> str:
        """As the receipt says it (done), or ``ahead`` of the take (the :w summary)."""
        if self.verb == "deleting":
            did = "takes" if ahead else "took"
        else:
            did = "brings back" if ahead else "brought back"
        return f"{self.verb} {self.id} {did} {self.what} {self.other}"


@dataclass
class Applied:
    """What a take did, for the receipt."""

    kept: int = 0
    deleted: list[int] = field(default_factory=list)
    rewrote: list[int] = field(default_factory=list)
    noted: list[int] = field(default_factory=list)
    restored: list[int] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)


# -- reading a file -----------------------------------------------------------


def split_notes(body: str, original: str) -> tuple[str, list[str]]:
    """A body's own text and the notes added under it. ``[[note]]`` lines the
    exported text already had are body text; the first extra one starts notes."""
    if body == original or NOTE_LINE not in body:  # no extra [[note]] line possible
        return body, []
    lines = body.split("\n")
    had = sum(1 for line in original.split("\n") if line.rstrip() == NOTE_LINE)
    at = [i for i, line in enumerate(lines) if line.rstrip() == NOTE_LINE]
    if len(at) <= had:
        return body, []
    starts = at[had:]
    notes = [
        "\n".join(lines[a + 1 : b]) for a, b in zip(starts, starts[1:] + [len(lines)], strict=True)
    ]
    return "\n".join(lines[: starts[0]]), notes


def read_file_edit(
    text: str, export_text: str, nonce: str, st: State, exported: Split | None = None
) -> Edit:
    """Compare a saved file with its export: the changes, and every rule broken.
    ``exported`` is ``split(export_text, nonce)`` when the caller has it (from
    ``rendered_split``, the file is read against it: see ``split_like``)."""
    edit = Edit()
    exported = exported or split(export_text, nonce)
    first = text.split("\n", 1)[0]
    if first != exported.first:
        edit.errors.append(
            (1, f"first line changed: expected {exported.first!r} (found {first[:80]!r})")
        )
        return edit
    now = split_like(text, nonce, exported, export_text)
    edit.errors += now.errors
    _compare(edit, now.blocks, exported.blocks, st)
    return edit


def _compare(edit: Edit, blocks: list[Block], exported: list[Block], st: State) -> None:
    position = {b.id: k for k, b in enumerate(exported)}
    removed = {m.id: m for m in st.removed()}
    seen: dict[int, int] = {}
    last: tuple[int, int] | None = None  # (export position, id) of the previous kept block
    kept = edit.kept
    for b in blocks:
        if b.id in seen:
            edit.errors.append(
                (b.line, f"message {b.id} appears twice (first at line {seen[b.id]})")
            )
            continue
        seen[b.id] = b.line
        pos = position.get(b.id)
        if pos is not None:
            orig = exported[pos]
            if b.body == orig.body and b.role == orig.role and (last is None or pos > last[0]):
                kept.append(b.id)  # the common case, inline: what _kept does with it
                last = pos, b.id
            else:
                last = _kept(edit, b, orig, pos, last)
        elif b.id in removed:
            _restored(edit, b, removed[b.id])
        else:
            edit.errors.append(
                (
                    b.line,
                    f"unknown ID {b.id}: not a message of this export "
                    "nor a removed one that can be restored",
                )
            )
    edit.deleted = [b.id for b in exported if b.id not in seen]
    _check_deleted_calls(edit, exported, st)
    check_running_thinking(edit, st)


def _kept(
    edit: Edit, b: Block, orig: Block, pos: int, last: tuple[int, int] | None
) -> tuple[int, int]:
    if b.role != orig.role:
        edit.errors.append(
            (b.line, f"role of message {b.id} changed: expected {orig.role} (found {b.role})")
        )
    if last is not None and pos < last[0]:
        edit.errors.append(
            (
                b.line,
                f"blocks reordered: message {b.id} comes after {last[1]} "
                "but the export has it before",
            )
        )
    body, notes = split_notes(b.body, orig.body)
    if body != orig.body and orig.role == "thinking":
        edit.errors.append((b.line, SIGNED))
    elif body != orig.body:
        edit.rewrites[b.id] = body
    else:
        edit.kept.append(b.id)
    edit.notes += [(b.id, n) for n in notes]
    return (max(pos, last[0]) if last else pos), b.id


def _restored(edit: Edit, b: Block, m: Message) -> None:
    if b.role != m.role:
        edit.errors.append(
            (b.line, f"role of message {b.id} changed: expected {m.role} (found {b.role})")
        )
    body, notes = split_notes(b.body, m.text)
    edit.restores.append(b.id)
    if body.strip() and body != m.text and m.role == "thinking":
        edit.errors.append((b.line, SIGNED))
    elif body.strip() and body != m.text:
        edit.rewrites[b.id] = body
    edit.notes += [(b.id, n) for n in notes]


def _check_deleted_calls(edit: Edit, exported: list[Block], st: State) -> None:
    in_export = {b.id for b in exported}
    results = {m.call_id: m.id for m in st.path_messages.values() if m.role == "tool"}
    for i in edit.deleted:
        m = st.path_messages.get(i)
        if m is not None and m.role == "call" and i in results and results[i] not in in_export:
            edit.errors.append(
                (
                    None,
                    f"deleting call {i} whose result {results[i]} was logged "
                    "after this export: that pair is newer than the file",
                )
            )


def check_running_thinking(edit: Edit, st: State) -> None:
    """The newest round's thinking goes back with its calls (the provider refuses
    a tool result whose round lost it): it cannot be deleted while that round is
    the newest. Once the turn moves on, it can."""
    if not any(st.path_messages[i].role == "call" for i in st.newest if i in st.path_messages):
        return
    for i in edit.deleted:
        m = st.path_messages.get(i)
        if m is not None and m.role == "thinking" and i in st.newest:
            edit.errors.append(
                (
                    None,
                    f"deleting thinking {i} of the running turn's newest round: the provider "
                    "needs it back with that round's calls; delete it once the turn has moved on",
                )
            )


# -- reading a form -----------------------------------------------------------


def read_form_edit(
    form: dict[str, Any], order: list[Message], st: State, made_at: int | None = None
) -> Edit:
    """``(context :drop SPANS :keep IDS :note TEXT)`` against the current order. Seqs
    and spans reach only messages older than the form (``made_at``, its event's seq):
    the ask that follows an idle form is newer than it, like messages after an export."""
    edit = Edit()
    older = [m for m in order if made_at is None or m.id < made_at]
    present = {m.id: m for m in order}
    drop: set[int] = set()
    spec = form.get("drop")
    if spec == "t":
        drop = {m.id for m in order if m.id not in st.newest}
    elif spec:
        for item in spec:
            hit = _containing(item, older)
            if not hit:
                edit.errors.append(
                    (None, f":drop {_show(item)}: no message of the context contains it")
                )
            drop |= hit
    drop -= set(form.get("keep") or [])
    edit.deleted = [m.id for m in order if m.id in drop]
    if made_at is not None:
        _check_newer_results(edit, st, made_at)
    check_running_thinking(edit, st)
    note = form.get("note")
    if isinstance(note, str) and note.strip():
        edit.notes.append((order[-1].id if order else None, note))
    edit.kept = [i for i in present if i not in drop]
    return edit


def _check_newer_results(edit: Edit, st: State, made_at: int) -> None:
    """As for a file: a call whose result was logged after the form (the cell that
    ran it, say) is newer than the form and cannot be dropped by it."""
    results = {m.call_id: m.id for m in st.path_messages.values() if m.role == "tool"}
    for i in edit.deleted:
        m = st.path_messages.get(i)
        if m is not None and m.role == "call" and results.get(i, 0) > made_at:
            edit.errors.append(
                (
                    None,
                    f"deleting call {i} whose result {results[i]} was "
                    "logged after this form: that pair is newer than the form",
                )
            )


def _containing(item: Any, order: list[Message]) -> set[int]:
    lo, hi = (item, item) if isinstance(item, int) else (item[0], item[1])
    hit = set()
    for m in order:
        a, b = m.payload.get("span", (m.id, m.id)) if m.role == "stub" else (m.id, m.id)
        if a <= hi and lo <= b:
            hit.add(m.id)
    return hit


def _show(item: Any) -> str:
    return str(item) if isinstance(item, int) else f"({item[0]} . {item[1]})"


# -- applying -----------------------------------------------------------------


def pair_of(m: Message, st: State) -> int | None:
    """The other half of a call/result pair, if it is on the path."""
    if m.role == "tool":
        return m.call_id
    if m.role == "call":
        for other in st.path_messages.values():
            if other.role == "tool" and other.call_id == m.id:
                return other.id
    return None


def edited_tool_text(m: Message, body: str) -> str:
    mark = f"[edited · original: (recall-entry {m.id})]"
    if body.rstrip("\n").split("\n")[-1] == mark:
        return body
    return (body.rstrip("\n") + "\n" if body.strip() else "") + mark


def apply(
    order: list[Message], edit: Edit, st: State, new_note: Callable[[str], Message]
) -> tuple[list[Message], Applied]:
    """The order after ``edit``; notes become messages through ``new_note``."""
    done = Applied()
    drop = _with_pairs(edit.deleted, st, done, "deleting")
    out = [m for m in order if m.id not in drop]
    done.deleted = sorted(drop & {m.id for m in order})
    out = _rewrite(out, edit, st, done)
    out = _restore(out, edit, st, done)
    out = _insert_notes(out, edit, new_note, done)
    kept = set(edit.kept)
    done.kept = sum(1 for m in out if m.id in kept)
    return out, done


def _with_pairs(
    ids: list[int], st: State, done: Applied, verb: str, present: set[int] | None = None
) -> set[int]:
    """``ids`` with the other half of each pair; ``done.pairs`` says which went
    along (a half already ``present`` is no news for a restore)."""
    out = set(ids)
    for i in ids:
        m = st.path_messages.get(i)
        if m is None:
            continue  # not on the path: no other half to bring along
        other = pair_of(m, st)
        if other is not None and other not in out:
            out.add(other)
            if present is None or other not in present:
                what = "its call" if m.role == "tool" else "its result"
                done.pairs.append(Pair(verb, i, what, other))
    return out


def _rewrite(out: list[Message], edit: Edit, st: State, done: Applied) -> list[Message]:
    result = []
    for m in out:
        body = edit.rewrites.get(m.id)
        if body is not None and m.id not in edit.restores:
            text = edited_tool_text(m, body) if m.role == "tool" else body
            m = rewritten(m, text, restored=m.restored)
            done.rewrote.append(m.id)
        result.append(m)
    return result


def _restore(out: list[Message], edit: Edit, st: State, done: Applied) -> list[Message]:
    present = {m.id for m in out}
    wanted = _with_pairs(edit.restores, st, done, "restoring", present) - present
    for i in sorted(wanted, key=lambda k: st.key.get(k, (0, k))):
        m = st.path_messages[i]
        body = edit.rewrites.get(i)
        if body is not None:
            text = edited_tool_text(m, body) if m.role == "tool" else body
            m = rewritten(m, text)
            done.rewrote.append(i)
        m = Message(m.id, m.role, m.text, m.turn, m.payload, rewritten=m.rewritten, restored=True)
        out.insert(_place(out, st.key.get(i, (0, i)), st), m)
        done.restored.append(i)
    return out


def _place(out: list[Message], key: tuple[int, int], st: State) -> int:
    """Just after the last message that preceded it in the log; a stub whose
    span starts before it counts as preceding, so it returns after the stub."""
    at = 0
    for k, m in enumerate(out):
        anchor = (
            st.key.get(m.payload.get("span", (m.id,))[0], st.key.get(m.id))
            if m.role == "stub"
            else st.key.get(m.id)
        )
        if anchor is not None and anchor <= key:
            at = k + 1
    return at


def _insert_notes(
    out: list[Message], edit: Edit, new_note: Callable[[str], Message], done: Applied
) -> list[Message]:
    """Each note just after the block it was written under, after the notes written
    there before it; a note whose block is gone goes after the last message. One
    pass over ``out`` whatever the number of notes (each note used to look up its
    block and walk the notes before it: 3,000 notes took 53 s)."""
    present = {m.id for m in out}
    last = out[-1].id if out else None
    under: dict[int | None, list[Message]] = {}
    for after, text in edit.notes:
        if not text.strip():
            continue
        note = new_note(text)
        under.setdefault(after if after in present else last, []).append(note)
        done.noted.append(note.id)
    if not under:
        return out
    result = list(under.get(None, ())) if not out else []
    for m in out:
        result.append(m)
        result.extend(under.get(m.id, ()))
    return result
