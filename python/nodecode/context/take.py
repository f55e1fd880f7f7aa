"""Exports, pending edits, and the take at the start of every request (doc/design.md "The context").

An export writes context.txt and logs an ``export`` event: the digest of its
bytes and the order it rendered (a snapshot payload; the bytes are rendered
again when needed, never stored). A changed file, or a (context …) form,
becomes an ``edit`` event: a pending edit with a base (the number of takes
when it was made). At the next request ``take`` refuses stale or invalid
edits and takes the rest together, logging one ``receipt`` event that carries
the new order (a snapshot). A file edit's bytes are a blob kept as a delta
against its export's bytes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodecode.context import derived, fileformat
from nodecode.context.derived import Read
from nodecode.context.edits import Applied, Edit, apply, read_file_edit, read_form_edit
from nodecode.context.message import Message, message_of
from nodecode.context.model import State, snapshot
from nodecode.context.rendered import export_bytes, export_split, keep_export
from nodecode.errors import UserError
from nodecode.log import sessions
from nodecode.log.store import Event, Store
from nodecode.paths import write_private, write_private_over
from nodecode.workspace import Workspace

STALE = "made before another edit was taken: run (context) again"


@dataclass(frozen=True)
class Room:
    """What one written block (a note, a rewrite) may hold: ``tokens``, all the
    budget leaves beside the system prompt and tools; ``over(text, tokens)`` tells
    whether a text holds more, counting no more of it than it takes to tell."""

    tokens: int
    budget: int
    over: Callable[[str, int], bool]

    def refusal(self, edit: Edit) -> str | None:
        """Why ``edit`` could never be sent (a block it writes cannot fit), or None."""
        written = [
            (f"the note under message {after}" if after is not None else "the note", text)
            for after, text in edit.notes
        ] + [(f"the rewrite of message {i}", text) for i, text in edit.rewrites.items()]
        for what, text in written:
            if self.over(text, self.tokens):
                return (
                    f"{what} holds more than {self.tokens:,} tokens, all the budget of "
                    f"{self.budget:,} leaves beside the system prompt and tools: it could "
                    "never be sent; write less"
                )
        return None


@dataclass
class TakeReport:
    """What a take did, for the agent (notices) and the person (receipts)."""

    receipts: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    taken: bool = False


def context_file(ws: Workspace, sid: str) -> Path:
    return ws.context_file(sid)


def receipt_file(ws: Workspace, sid: str) -> Path:
    return ws.receipt_file(sid)


def latest_export(store: Store, sid: str) -> Event | None:
    return derived.read(store, sid).takes.latest_export


def head_turn(store: Store, sid: str) -> int | None:
    return sessions.get(store, sid).head


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def context_stat(path: Path) -> os.stat_result | None:
    """The context file's stat, or None when there is none. Anything but a
    regular file (a directory put in its place, a FIFO that would block the
    read) is the person's to fix, so it fails with one line saying so."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        found = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise UserError(f"{path}: expected the context file, a regular file (found {found})")
    return st


# -- export -------------------------------------------------------------------


EXPORT_TRIES = 3


def export(ws: Workspace, sid: str) -> Path:
    """Write the context to context.txt (a new export) and return its path. A
    changed, untaken file is first recorded as a pending edit. The file is
    replaced only while it holds bytes the log has (an export's, a recorded
    edit's): a save that lands while the export runs is recorded by the next
    try, never overwritten unrecorded."""
    path = context_file(ws, sid)
    for _ in range(EXPORT_TRIES):
        r, raw = _log_export(ws, sid)
        # Written once the export is committed: a crash in between must not leave
        # a file naming an export the log does not have.
        if write_private_over(path, raw, functools.partial(_known_file, r)):
            return path
    raise UserError(
        f"{path}: saved again while each of {EXPORT_TRIES} exports was being written "
        "(each save is recorded as a pending edit): export again"
    )


def _log_export(ws: Workspace, sid: str) -> tuple[Read, bytes]:
    """Log a new export (a changed file recorded first): the session as read before
    it, and the bytes to write."""
    store = ws.store
    with store.atomic():
        r = derived.read(store, sid)
        if record_file_edit(ws, r) is not None:
            r = derived.read(store, sid)  # with the edit just recorded
        st, log = r.state, r.takes
        number = len(log.exports) + 1
        nonce = fileformat.choose_nonce(st.messages)
        text = fileformat.render(ws.store_name, sid, number, nonce, st.messages)
        first = fileformat.first_line(ws.store_name, sid, number, nonce)
        raw = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(raw).hexdigest()
        store.append(
            sid,
            "export",
            turn=r.head,
            text=first,
            payload={
                "number": number,
                "nonce": nonce,
                "base": log.takes,
                "blob": digest,
                "context": snapshot(store, st.messages, st),
            },
        )
        keep_export(store, digest, raw, first, st.messages)
    return r, raw


def _known_file(r: Read, path: Path, st: os.stat_result) -> bool:
    """Whether the file at ``path`` holds bytes the log has: an export's or a
    recorded edit's (anything else is a save no event recorded yet)."""
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(path)  # a link the person made: judged by what it points to
    if not stat.S_ISREG(st.st_mode):
        context_stat(path)  # the person's to fix: one line naming what is there
        return False
    return _file_digest(r, path, st) in r.takes.recorded


# -- pending edits ------------------------------------------------------------


def record_file_edit(ws: Workspace, r: Read) -> Event | None:
    """If context.txt differs from its export and from every recorded edit,
    log it as a pending edit (after ``r``, the session as the caller read it).
    Returns the new edit event, if any."""
    store, sid = ws.store, r.sid
    path = context_file(ws, sid)
    exp = r.takes.latest_export
    st = context_stat(path) if exp is not None else None
    if exp is None or st is None:
        return None
    raw = path.read_bytes()  # after the stat: a file changed since is a new stamp
    digest = _file_digest(r, path, st, raw)
    if digest == exp.payload["blob"] or digest in r.takes.recorded:
        return None
    clean = ws.redact(raw)
    if clean != raw:
        # A key the person wrote leaves the file too: its notes, rewrites and
        # refusal reasons all come from these bytes, so they never carry it.
        write_private(path, clean)
        raw, digest = clean, hashlib.sha256(clean).hexdigest()
        if digest == exp.payload["blob"] or digest in r.takes.recorded:
            return None
    exp = _named_export(r, raw) or exp
    base = export_bytes(store, exp, r.state.path_messages)
    store.put_blob(
        raw,
        base=(exp.payload["blob"], base) if base is not None else None,
        unit=f"\n[[m:{exp.payload['nonce']} ".encode(),  # the delta's runs are of blocks
        digest=digest,
    )
    store.fact("file-edits", 2).keep(digest, raw)  # the take reads it next, in this process
    return store.append(
        sid,
        "edit",
        turn=r.head,
        text="file edit",
        payload={
            "source": "file",
            "export": exp.payload["number"],
            "base": exp.payload["base"],
            "blob": digest,
        },
    )


def _file_changed(ws: Workspace, r: Read) -> bool:
    """Whether context.txt may hold an unrecorded edit (read-only; the file's
    digest is kept per size and mtime, so an untouched file is not re-read).
    Any export's own bytes are no edit either (``recorded``): a crash between an
    export's commit and its file write leaves the previous export on disk."""
    path = context_file(ws, r.sid)
    st = context_stat(path)
    if st is None:
        return False
    exp = r.takes.latest_export
    if exp is None:
        return False
    digest = _file_digest(r, path, st)
    return digest != exp.payload["blob"] and digest not in r.takes.recorded


def _file_digest(r: Read, path: Path, st: os.stat_result, raw: bytes | None = None) -> str:
    """The sha256 of the file at ``path`` (its bytes ``raw`` when read, after
    its stat ``st``), kept per stamp: the check before a take and the take hash it once."""
    stamp = (str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    seen = r.store.fact("file-digests", 4)
    digest = seen.get(stamp)
    if digest is None:
        digest = hashlib.sha256(path.read_bytes() if raw is None else raw).hexdigest()
        seen.keep(stamp, digest)
    return digest


def _named_export(r: Read, raw: bytes) -> Event | None:
    """The export the file's first line names, when it is one of this session's:
    an edit of an older export (another process exported since) is then judged
    as that export's edit, stale if a take came after it."""
    parsed = fileformat.parse_first(raw.split(b"\n", 1)[0].decode("utf-8", "replace"))
    if parsed is None or parsed[1] != r.sid:
        return None
    e = r.takes.exports.get(parsed[2])
    return e if e is not None and e.payload.get("nonce") == parsed[3] else None


def record_form_edit(store: Store, sid: str, form: dict[str, Any], turn: int | None) -> Event:
    return store.append(
        sid,
        "edit",
        turn=turn,
        text="(context …) form",
        payload={"source": "form", "base": derived.read(store, sid).takes.takes, **form},
    )


def pending_edits(store: Store, sid: str) -> list[Event]:
    """Edits not yet taken or refused. A take processes every pending edit under
    one write lock, so they are exactly the edits logged after the last receipt."""
    return list(derived.read(store, sid).takes.pending)


# -- the take -----------------------------------------------------------------


def read_edit(r: Read, e: Event, order: list[Message], st: State) -> Edit:
    """The edit event ``e`` of the session ``r`` read, against ``order`` (the
    context so far in the take) and the state ``st`` it started from."""
    store = r.store
    if e.payload.get("source") == "form":
        return read_form_edit(e.payload, order, st, made_at=e.seq)
    exp = _export(r, e.payload["export"])
    export_raw = export_bytes(store, exp, st.path_messages)
    if export_raw is None:
        return Edit(errors=[(None, _UNRENDERED.format(exp.payload["number"]))])
    digest = exp.payload["blob"]
    recorded = store.fact("file-edits", 2).get(e.payload["blob"])
    if recorded is not None:
        raw = recorded  # recorded by this process just before: no delta to decode
    else:
        raw = store.blob(e.payload["blob"], bases=lambda d: export_raw if d == digest else None)
        raw = raw or b""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return Edit(
            errors=[
                (
                    None,
                    f"the file is not UTF-8 (byte {err.start}: {raw[err.start : err.start + 1]!r})",
                )
            ]
        )
    export_text, exported = export_split(store, exp, export_raw)
    return read_file_edit(text, export_text, exp.payload["nonce"], st, exported)


_UNRENDERED = "export {} no longer renders to the bytes it wrote: run (context) again"


def _export(r: Read, number: int) -> Event:
    e = r.takes.exports.get(number)
    if e is None:
        raise LookupError(f"export {number} of {r.sid} is not in the log")
    return e


def take(
    ws: Workspace,
    sid: str,
    turn: int | None,
    *,
    budget: int | None = None,
    count: Callable[[list[Message]], int] | None = None,
    room: Room | None = None,
    foresee: Callable[[list[Message], list[Message]], str | None] | None = None,
) -> TakeReport:
    """Process every pending edit (doc/design.md "Takes"). With no running
    turn, the take belongs to the head (changes made while it is the head).
    With ``room``, an edit writing a block larger than the budget can hold is
    refused: taken, it could never be sent, and each later request would
    evict it again. ``foresee(before, after)``: the line saying what an edit
    does to the next request's cache and cost (``App.foresee``), for its receipt."""
    store = ws.store
    report = TakeReport()
    r = derived.read(store, sid)
    if not _file_changed(ws, r) and not r.takes.pending:
        return report  # the common case: no write transaction on the request path
    with store.atomic():
        r = derived.read(store, sid)  # inside the write lock: what it reads is final
        if record_file_edit(ws, r) is not None:
            r = derived.read(store, sid)  # with the edit just recorded
        if turn is None:
            turn = r.head
        pending = list(r.takes.pending)
        if not pending:
            return report
        st = r.state
        order = list(st.messages)
        sections: list[str] = []
        taken: list[int] = []
        notices: list[Message] = []
        for e in pending:
            edit, reason, carried = judge(r, e, order, st)
            if reason is None and room is not None:
                reason = room.refusal(edit)
            if reason is not None:
                notices.append(_refuse(ws, sid, turn, e, reason, report))
                continue
            before = order
            order, done = apply(order, edit, st, lambda text: _note(store, sid, turn, text))
            section = _section(ws, sid, e, done, before, order, budget, count, carried)
            cost = foresee(before, order) if foresee is not None else None
            sections.append(section + ("\ncost: " + cost if cost else ""))
            taken.append(e.seq)
        if taken:  # refusal notices logged before the snapshot stay in it, at the end
            _log_take(ws, sid, turn, taken, sections, order + notices, report, st)
    _write_receipts(ws, sid, report)
    return report


def judge(
    r: Read, e: Event, order: list[Message], st: State
) -> tuple[Edit, str | None, str | None]:
    """The pending edit ``e`` read against ``order``: (the edit, why it is refused or
    None, the line saying what it was carried over or None). An edit made before
    another edit was taken is refused as stale. One made before moves in the tree
    or evictions only (no edit taken since) is carried over them when every block
    it changes is still in the context, else refused naming them."""
    since = r.takes.history[max(e.payload.get("base", -1), 0) :]
    if any(kind == "receipt" for kind, _ in since):
        return Edit(), STALE, None
    edit = read_edit(r, e, order, st)
    if not since:
        return edit, edit.error(), None
    return (edit, *carry(r, since, edit, order, form=e.payload.get("source") == "form"))


def carry(
    r: Read, since: list[tuple[str, int]], edit: Edit, order: list[Message], form: bool = False
) -> tuple[str | None, str | None]:
    """An edit made before the moves and evictions ``since`` (no edit taken since),
    against ``order``: (why it is refused or None, the receipt's line saying what it
    was carried over). A form's spans reach what the context held when it ran, so a
    form is never carried."""
    what = _made_before(r, since)
    if form:
        return f"made before {what}: run (context) again", None
    if edit.error() is not None:
        return f"made before {what}, and against the context since: {edit.error()}", None
    present = {m.id for m in order}
    touched = [
        *edit.deleted,
        *(i for i in edit.rewrites if i not in edit.restores),
        *(after for after, text in edit.notes if after is not None and text.strip()),
    ]
    missing = sorted({i for i in touched if i not in present})
    if not missing:
        return None, f"carried over {what}: every block it changes is still in the context"
    which = (
        f"message {missing[0]} it changes is"
        if len(missing) == 1
        else f"messages {', '.join(map(str, missing))} it changes are"
    )
    reason = f"made before {what}, after which {which} no longer in the context"
    return reason + ": run (context) again", None


def _made_before(r: Read, since: list[tuple[str, int]]) -> str:
    """What a stale edit came before: ``the undo at seq 41``, ``the eviction at seq 50``…"""
    names = []
    for kind, seq in since:
        e = r.store.event(r.sid, seq) if kind == "move" else None
        what = {"evict": "eviction"}.get(kind, kind)
        if e is not None:
            what = str(e.payload.get("op") or "move")
        names.append(f"the {what} at seq {seq}")
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def said(report: TakeReport) -> list[str]:
    """One line per edit a take processed, for the command it ran on the way (an
    undo, an eviction): ``context edit (export 3): taken at seq 45: kept 9 · …``."""
    lines, where = [], ""
    for receipt in report.receipts:
        for line in receipt.split("\n"):
            if line.startswith("[[receipt "):
                where = line.removesuffix("]]").split(" ", 2)[2]
            elif line.startswith(("taken at seq ", "refused at seq ", "carried over ")):
                lines.append(f"context edit ({where}): {line}")
    return lines


def _note(store: Store, sid: str, turn: int | None, text: str) -> Message:
    return message_of(store.append(sid, "note", role="note", turn=turn, text=text))


def _refuse(
    ws: Workspace, sid: str, turn: int | None, e: Event, reason: str, report: TakeReport
) -> Message:
    head = _receipt_head(ws, sid, e)
    event = ws.store.append(
        sid,
        "receipt",
        turn=turn,
        payload={"edits": [e.seq]},
        text=lambda seq: f"{head}\nrefused at seq {seq}: {reason}",
    )
    report.receipts.append(event.text)
    notice = f"Your context edit ({_what(e)}) was refused: {reason}"
    report.notices.append(notice)
    return message_of(ws.store.append(sid, "notice", role="notice", turn=turn, text=notice))


def _what(e: Event) -> str:
    if e.payload.get("source") == "file":
        return f"context.txt of export {e.payload.get('export')}"
    return "a (context …) form"


def _receipt_head(ws: Workspace, sid: str, e: Event) -> str:
    where = (
        f"export {e.payload.get('export')}"
        if e.payload.get("source") == "file"
        else f"form at seq {e.seq}"
    )
    return f"[[receipt {ws.store_name}/{sid} {where}]]"


def _section(
    ws: Workspace,
    sid: str,
    e: Event,
    done: Applied,
    before: list[Message],
    after: list[Message],
    budget: int | None,
    count: Callable[[list[Message]], int] | None,
    carried: str | None = None,
) -> str:
    lines = [_receipt_head(ws, sid, e), "taken at seq {seq}: " + _counts(done)]
    if carried:
        lines.append(carried)
    if done.pairs:
        lines.append("pairs: " + "; ".join(p.said() for p in done.pairs))
    if count is not None:
        a, b = count(before), count(after)
        tail = f" of {budget} ({round(100 * b / budget)}%)" if budget else ""
        lines.append(f"tokens: {a} → {b}{tail}")
    lines.append(_cache_line(before, after))
    return "\n".join(lines)


def _counts(done: Applied) -> str:
    def part(word: str, ids: list[int]) -> str:
        return f"{word} {len(ids)}" + (f" ({' '.join(map(str, ids))})" if ids else "")

    return " · ".join(
        [
            f"kept {done.kept}",
            part("deleted", done.deleted),
            part("rewrote", done.rewrote),
            part("noted", done.noted),
            part("restored", done.restored),
        ]
    )


def _cache_line(before: list[Message], after: list[Message]) -> str:
    last = None
    for a, b in zip(before, after, strict=False):
        if a.id != b.id or a.text != b.text:
            break
        last = a.id
    if last is None:
        return "cache: changed from the first message"
    return f"cache: unchanged through {last}"


def _log_take(
    ws: Workspace,
    sid: str,
    turn: int | None,
    taken: list[int],
    sections: list[str],
    order: list[Message],
    report: TakeReport,
    base: State | None = None,
) -> None:
    """The receipt of the edits taken, with the new order (a delta against the
    snapshot ``base``, the state the take started from, starts from)."""
    store = ws.store
    event = store.append(
        sid,
        "receipt",
        turn=turn,
        payload={"edits": taken, "context": snapshot(store, order, base)},
        text=lambda seq: "\n".join(s.replace("{seq}", str(seq)) for s in sections),
    )
    report.receipts.append(event.text)
    report.taken = True


def _write_receipts(ws: Workspace, sid: str, report: TakeReport) -> None:
    if report.receipts:
        write_private(receipt_file(ws, sid), "\n\n".join(report.receipts) + "\n")


def validate(ws: Workspace, sid: str, text: str) -> dict[str, Any]:
    """A dry run of taking ``text`` as an edit of the latest export (for :w)."""
    return check_file(ws, sid, text)[0]


def check_file(ws: Workspace, sid: str, text: str) -> tuple[dict[str, Any], list[Message] | None]:
    """``validate``'s answer, and the context the take would make (None when refused)."""
    store = ws.store
    r = derived.read(store, sid)
    exp = r.takes.latest_export
    if exp is None:
        return {"ok": False, "errors": [[1, "no export yet: run (context) first"]]}, None
    st = r.state
    export_raw = export_bytes(store, exp, st.path_messages)
    if export_raw is None:
        return {"ok": False, "errors": [[1, _UNRENDERED.format(exp.payload["number"])]]}, None
    export_text, exported = export_split(store, exp, export_raw)
    edit = read_file_edit(text, export_text, exp.payload["nonce"], st, exported)
    errors = [[line or 1, reason] for line, reason in edit.errors]
    since = r.takes.history[exp.payload["base"] :]
    if any(kind == "receipt" for kind, _ in since):
        errors.insert(0, [1, STALE])
    elif since and not errors:  # a move or an eviction since the export: carried over?
        reason, _ = carry(r, since, edit, st.messages)
        if reason is not None:
            errors.insert(0, [1, reason])
    if errors:
        return {"ok": False, "errors": errors, "summary": {}}, None
    order, done = dry_run(st.messages, edit, st)
    return {
        "ok": True,
        "errors": [],
        "summary": {
            "deleted": done.deleted,
            "rewrote": sorted(done.rewrote),
            "notes": len(done.noted),
            "restored": done.restored,
            "pairs": [p.said(ahead=True) for p in done.pairs],
        },
    }, order


def next_order(r: Read) -> list[Message]:
    """The context the next request will read if its take goes as the pending
    edits say (each applied in a dry run: nothing is logged), of the session as
    ``r`` read it. A saved, unrecorded context.txt counts only once something
    records it."""
    st = r.state
    order = list(st.messages)
    for e in list(r.takes.pending):
        edit, reason, _ = judge(r, e, order, st)
        if reason is None:
            order, _ = dry_run(order, edit, st)
    return order


def dry_run(order: list[Message], edit: Edit, st: State) -> tuple[list[Message], Applied]:
    """What taking ``edit`` would make of ``order``, pairs included, logging
    nothing (its notes get ids below zero)."""
    ids = iter(range(-1, -(10**9), -1))
    return apply(list(order), edit, st, lambda text: Message(next(ids), "note", text))
