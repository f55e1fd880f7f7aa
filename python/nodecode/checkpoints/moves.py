"""Checkpoints (doc/design.md "Checkpoints"): undo, redo, continue, rewind and
fork, with file changes.

Every head move appends one ``move`` event (turn = the new head; payload
``{op, from, to, files}``) and sets the session's head, in one transaction,
under the session's lease. The context follows from the head's path (see
``context.model``); a move counts as a take, so older exports go stale.

File changes come from the turns' ``tool`` events (``changes``: path, blob
before, blob after — file verbs and, through the shadow git store, shell
commands). A move reverts the changes of the turns it leaves (newest first)
and re-applies those of the turns it enters (oldest first), netted per file.
A file whose bytes are not what the log says they should be was changed by
the person: it is skipped and reported, or with ``force`` overwritten after
its bytes are kept as a blob (``nodecode blob HASH`` prints them; ``show_blob``
names the command that shows one where the person is, ``:NodecodeBlob`` in Neovim).

A move that skips files records them (``pending``); the same command with
``force`` right after it (no move, no new turn since) finishes that move's
restores instead of moving again, logged as a ``files`` event.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nodecode.checkpoints import shadow
from nodecode.context import derived, model, rendered
from nodecode.context import take as takes
from nodecode.context.message import Message
from nodecode.errors import UserError
from nodecode.log import sessions
from nodecode.log import turns as turn_tree
from nodecode.log.leases import Lease
from nodecode.log.store import Event, Store
from nodecode.paths import Swapped, open_beneath, replace_file, unlink_beneath
from nodecode.views import tree as trees
from nodecode.workspace import Workspace

BLOB_COMMAND = "nodecode blob"  # how the command line shows a kept version
ENDINGS = ("stopped", "error")  # a turn's end, which may carry what no result recorded


@dataclass
class Moved:
    """What a move did, for the CLI and the host."""

    op: str
    source: int | None  # the head before
    target: int | None  # the head after
    lines: list[str] = field(default_factory=list)
    ask: str | None = None  # undo: the undone ask, offered back for editing
    pending: list[str] = field(default_factory=list)  # files left for a --force to finish
    finished: bool = False  # this --force finished the previous move's restores
    left: list[str] = field(default_factory=list)  # every file left as it is, pending or not
    untracked: bool = False  # a turn's shell changes were not tracked: not undone either

    @property
    def turn(self) -> int | None:
        """The turn the move is about: the one undone, or the one redone or rewound to."""
        return self.source if self.op == "undo" else self.target

    def doing(self) -> str:
        """``undoing turn 2``, ``redoing turn 2``, ``rewinding to turn 2``."""
        verb = {"undo": "undoing", "redo": "redoing", "rewind": "rewinding to"}[self.op]
        return f"{verb} {name(self.turn)}"

    def finish_hint(self, command: str) -> str | None:
        """The line that says how to finish a move that left files, or None."""
        if not self.pending:
            return None
        return (
            f"to finish {self.doing()}: {command} (overwrites {', '.join(self.pending)}; "
            "your version is kept as a blob)"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "from": self.source,
            "to": self.target,
            "lines": self.lines,
            "ask": self.ask,
            "pending": self.pending,
            "finished": self.finished,
            "left": self.left,
            "untracked": self.untracked,
        }


@dataclass
class _Step:
    """One file's net change over a move: it should hold ``expect`` and will hold ``target``."""

    path: str
    expect: str | None
    target: str | None
    workspace: str
    why: str  # what "changed" means for this file, for the skip line


# -- the plan: which turns a move leaves and enters --------------------------------------


def name(turn: int | None) -> str:
    return f"turn {turn}" if turn is not None else "the start (no turn)"


def _path_to(known: dict[int, turn_tree.Turn], number: int | None) -> list[turn_tree.Turn]:
    out = []
    while number is not None and number in known:
        out.append(known[number])
        number = known[number].parent
    return out[::-1]


def plan(
    store: Store, sid: str, target: int | None
) -> tuple[list[turn_tree.Turn], list[turn_tree.Turn]]:
    """(turns left, newest first; turns entered, oldest first) moving the head to ``target``."""
    known = turn_tree.visible(store, sid)
    here, there = turn_tree.path(store, sid), _path_to(known, target)
    common = 0
    while common < min(len(here), len(there)) and here[common].number == there[common].number:
        common += 1
    return here[common:][::-1], there[common:]


def turn_changes(
    store: Store, turn: turn_tree.Turn
) -> tuple[list[tuple[dict[str, Any], str | None]], list[str]]:
    """The turn's file changes in order (each with the workspace it ran in) and the
    reasons its shell changes were not tracked, if any. A turn killed during a
    shell command has that command's changes on its ``stopped`` event; one whose
    result the store could not write, on its ``error`` event."""
    events = store.context_events(
        turn.session, [turn.number], upto=None, kinds=ENDINGS, turnless=False
    )
    changes, untracked = [], []
    for e in events:
        if e.role != "tool" and e.kind not in ENDINGS:
            continue
        changes += [(c, e.payload.get("workspace")) for c in e.payload.get("changes", [])]
        if e.payload.get("shell_untracked"):
            untracked.append(str(e.payload["shell_untracked"]))
    return changes, untracked


def _steps(
    store: Store, sid: str, leave: list[turn_tree.Turn], enter: list[turn_tree.Turn], cwd: str
) -> tuple[list[_Step], list[tuple[str, bool]]]:
    """Each file's net change (reverting ``leave`` newest first, then applying ``enter``
    oldest first), by path; and the report's notes (untracked shell, inherited turns),
    each with whether it says that shell changes were not tracked."""
    notes: list[tuple[str, bool]] = []
    flat: list[tuple[dict[str, Any], str, bool, str]] = []
    for turns, back in ((leave, True), (enter, False)):
        for t in turns:
            changes, untracked = turn_changes(store, t)
            if t.session != sid:  # a fork's inherited turn: its files are the parent's
                if changes:
                    notes.append(
                        (
                            f"files of turn {t.number} were left as they are: it ran in "
                            f"session {t.session}, which this one forked from",
                            False,
                        )
                    )
                continue
            notes += [
                (f"shell changes of turn {t.number} were not tracked: {reason}", True)
                for reason in dict.fromkeys(untracked)
            ]
            why = (
                f"changed since turn {t.number}"
                if back
                else f"differs from its state before turn {t.number}"
            )
            ordered = changes[::-1] if back else changes
            flat += [(c, ws or cwd, back, why) for c, ws in ordered]
    net: dict[str, _Step] = {}
    for c, ws, back, why in flat:
        before, after = (c["after"], c["before"]) if back else (c["before"], c["after"])
        if c["path"] in net:
            net[c["path"]].target = after
        else:
            net[c["path"]] = _Step(c["path"], before, after, ws, why)
    return sorted((s for s in net.values() if s.expect != s.target), key=lambda s: s.path), notes


# -- files ----------------------------------------------------------------------------


def _digest(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _shown(step: _Step) -> str:
    p = Path(step.path)
    return (
        p.relative_to(step.workspace).as_posix() if p.is_relative_to(step.workspace) else step.path
    )


def _refusal(ws: Workspace, step: _Step) -> str | None:
    """Why this path must not be touched, or None."""
    root = os.path.realpath(step.workspace)
    if not Path(step.path).is_relative_to(root):
        return f"outside the workspace {root}"
    if Path(step.path).is_relative_to(os.path.realpath(ws.home)):
        return "one of nodecode's own files"
    if os.path.realpath(step.path) != step.path:
        return "now reached through a symlink"
    return None


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


class _NotRegular(Exception):
    """The path holds something other than a regular file: never opened, never replaced."""


def _kind(mode: int) -> str | None:
    """What a file of this mode is, when it is not a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


# A step's file is read and written beneath the real workspace, never following a
# symlink: one swapped in after ``_refusal`` looked makes the restore a skip.


def _read(step: _Step) -> bytes | None:
    """The file's bytes, None when there is none. Anything but a regular file is
    refused by name: looked at first (opening a device may do something), then
    opened without blocking (a FIFO would wait for a writer forever) and checked
    again on the open descriptor."""
    try:
        kind = _kind(os.lstat(step.path).st_mode)
    except FileNotFoundError:
        return None
    if kind is not None:
        raise _NotRegular(kind)
    root, rel = _beneath(step)
    try:
        fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    with open(fd, "rb") as f:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise _NotRegular(kind)
        return f.read()


def _write(step: _Step, data: bytes | None) -> None:
    root, rel = _beneath(step)
    if data is None:
        unlink_beneath(root, rel)
        return
    # A new inode, mode kept: a hard link the turn made to a file outside the
    # workspace must not carry the restore out to it.
    replace_file(root, rel, data, make_dirs=True)


def _beneath(step: _Step) -> tuple[str, Path]:
    root = os.path.realpath(step.workspace)
    return root, Path(step.path).relative_to(root)


def restore(
    ws: Workspace, step: _Step, force: bool, show_blob: str = BLOB_COMMAND, op: str = "undo"
) -> dict[str, Any] | None:
    """Bring one file to ``step.target``; the report entry, or None when it already is.
    A redo says "reapplied" where an undo or a rewind says "restored"."""
    shown = _shown(step)
    refusal = _refusal(ws, step)
    if refusal is not None:
        return {"path": step.path, "action": "skipped", "line": f"skipped {shown}: {refusal}"}
    try:
        current = _read(step)
    except _NotRegular as e:  # no --force can restore it: said once, not left pending
        line = f"skipped {shown}: {e}, not a regular file (undo restores regular files only)"
        return {"path": step.path, "action": "skipped", "line": line}
    except Swapped:
        line = f"skipped {shown}: now reached through a symlink"
        return {"path": step.path, "action": "skipped", "line": line}
    except OSError as e:
        line = f"failed {shown}: {e.strerror or e}"
        return {"path": step.path, "action": "failed", "line": line, "retry": True}
    try:
        now = _digest(current)
        if now == step.target:
            return None
        if now != step.expect and not force:
            line = f"skipped {shown}: {step.why}"
            return {"path": step.path, "action": "skipped", "line": line, "retry": True}
        kept = ws.store.put_blob(current) if now != step.expect and current is not None else None
        data = ws.store.blob(step.target) if step.target is not None else None
        if step.target is not None and data is None:
            raise OSError(f"blob {step.target[:12]} is missing from the store")
        _write(step, data)
    except Swapped:
        line = f"skipped {shown}: now reached through a symlink"
        return {"path": step.path, "action": "skipped", "line": line}
    except OSError as e:
        line = f"failed {shown}: {e.strerror or e}"
        return {"path": step.path, "action": "failed", "line": line, "retry": True}
    rewrote = "reapplied" if op == "redo" else "restored"
    action = "deleted" if data is None else "recreated" if current is None else rewrote
    line = f"{action} {shown}"
    if now != step.expect:
        line += f" (forced: {step.why}" + (
            f"; your version is kept: {show_blob} {kept[:12]})" if kept else ")"
        )
    return {"path": step.path, "action": action, "line": line, "kept": kept}


# -- moves ------------------------------------------------------------------------------


def _move(
    ws: Workspace,
    sid: str,
    target: int | None,
    op: str,
    *,
    files: bool,
    force: bool = False,
    show_blob: str = BLOB_COMMAND,
    room: takes.Room | None = None,
) -> Moved:
    """Move the head (the caller holds the lease): files, then one event and the head;
    then the saved context edits still pending, carried over the move or refused
    (``take.judge``), so the person reads what became of them here."""
    store = ws.store
    source = sessions.get(store, sid).head
    report: list[dict[str, Any]] = []
    pending: list[_Step] = []
    if files:
        leave, enter = plan(store, sid, target)
        steps, notes = _steps(store, sid, leave, enter, os.path.realpath(ws.cwd))
        report, pending = _restore_all(ws, steps, force, show_blob, op)
        report += [
            {"path": None, "action": "untracked" if untracked else "note", "line": n}
            for n, untracked in notes
        ]
    lines = [r["line"] for r in report]
    untracked = any(r["action"] == "untracked" for r in report)
    with store.atomic():
        store.append(
            sid,
            "move",
            turn=target,
            text="\n".join([f"{op}: head {name(source)} → {name(target)}", *lines]),
            payload={
                "op": op,
                "from": source,
                "to": target,
                "files": report,
                "pending": [asdict(p) for p in pending],
            },
        )
        sessions.set_head(store, sid, target)
    lines += _pending_edits(ws, sid, room)
    return Moved(
        op,
        source,
        target,
        lines,
        pending=[_shown(p) for p in pending],
        left=_left(report),
        untracked=untracked,
    )


def _pending_edits(ws: Workspace, sid: str, room: takes.Room | None) -> list[str]:
    """Take the edits of the context saved before the move (context.txt recorded
    first): each taken or refused at once, with its receipt, and said in a line."""
    try:
        return takes.said(takes.take(ws, sid, None, room=room))
    except UserError as e:  # context.txt is not a file: the move itself stands
        return [f"context edit not read: {e}"]


def _left(report: list[dict[str, Any]]) -> list[str]:
    """The files a move's report leaves as they are (skipped or failed), by path."""
    return [r["path"] for r in report if r["action"] in ("skipped", "failed") and r["path"]]


def _restore_all(
    ws: Workspace, steps: list[_Step], force: bool, show_blob: str = BLOB_COMMAND, op: str = "undo"
) -> tuple[list[dict[str, Any]], list[_Step]]:
    """Restore each step: the report, and the steps a ``--force`` could still finish
    (skipped as changed by the person, or failed; not those refused outright)."""
    report, pending = [], []
    for step in steps:
        entry = restore(ws, step, force, show_blob, op)
        if entry is None:
            continue
        report.append(entry)
        if entry.get("retry"):
            pending.append(step)
    return report, pending


def _unfinished(store: Store, sid: str, op: str, target: int | None) -> tuple[Event, list] | None:
    """The last move, when it is an ``op`` to ``target`` that left files for a --force
    and nothing happened since (no move, no new turn): it and its steps still pending."""
    last = store.last_event(sid, "move")
    if last is None or last.payload.get("op") != op or last.payload.get("to") != target:
        return None
    if sessions.get(store, sid).head != target:
        return None
    began = store.read(
        "SELECT 1 FROM turns WHERE session = ? AND first_seq > ? LIMIT 1", (sid, last.seq)
    )
    if began:
        return None
    pending = last.payload.get("pending") or []
    for e in store.events(sid, after=last.seq, kinds=("files",)):
        if e.payload.get("finishes") == last.seq:
            pending = e.payload.get("pending") or []
    return (last, pending) if pending else None


def _finish(
    ws: Workspace, sid: str, op: str, target: int | None, show_blob: str = BLOB_COMMAND
) -> Moved | None:
    """``--force`` right after a partial move: finish that move's restores, forced
    (the head stays); None when there is nothing of the kind to finish."""
    found = _unfinished(ws.store, sid, op, target)
    if found is None:
        return None
    move, pending = found
    report, left = _restore_all(ws, [_Step(**p) for p in pending], True, show_blob, op)
    lines = [r["line"] for r in report]
    source = move.payload.get("from")
    ws.store.append(
        sid,
        "files",
        turn=target,
        text="\n".join([f"{op} --force: finished the restores of seq {move.seq}", *lines]),
        payload={
            "op": op,
            "finishes": move.seq,
            "files": report,
            "pending": [asdict(p) for p in left],
        },
    )
    return Moved(
        op,
        source,
        target,
        lines,
        pending=[_shown(p) for p in left],
        finished=True,
        left=_left(report),
    )


def _turn(store: Store, sid: str, number: int, verb: str) -> turn_tree.Turn:
    known = turn_tree.visible(store, sid)
    if number not in known:
        have = f"its turns are {min(known)}–{max(known)}" if known else "it has no turns"
        raise UserError(f"{verb}: no turn {number} in session {sid} ({have})")
    return known[number]


def settle_ended(ws: Workspace) -> None:
    """Close every turn left running by a process that is gone, or whose end the
    store could not write (a full disk), with what its shell commands changed, as
    opening the store does: a long-lived host opens it once, and a move must not
    read such a turn as one that changed nothing. Before the move takes the
    session's lease, which would keep its turn from being settled."""
    turn_tree.recover(ws.store, settle=lambda sid, n: shadow.settle(ws.home, ws.store, sid, n))


def undo(
    ws: Workspace,
    sid: str,
    *,
    force: bool = False,
    show_blob: str = BLOB_COMMAND,
    room: takes.Room | None = None,
) -> Moved:
    """Rewind the head turn and its file changes; the undone ask comes back."""
    store = ws.store
    settle_ended(ws)
    with Lease(store, sid):
        head = sessions.get(store, sid).head
        finished = _finish(ws, sid, "undo", head, show_blob) if force else None
        if finished is not None:
            return finished
        if head is None:
            raise UserError(f"undo: nothing to undo in session {sid} (no turn is the head)")
        turn = _turn(store, sid, head, "undo")
        moved = _move(
            ws, sid, turn.parent, "undo", files=True, force=force, show_blob=show_blob, room=room
        )
        moved.ask = trees.ask_text(store, turn)
    return moved


def redo_stack(store: Store, sid: str) -> list[int]:
    """The turns undone since the last new turn, continue or rewind (the top is redone next)."""
    stack: list[int] = []
    starts = {row[0] for row in store.read("SELECT first_seq FROM turns WHERE session = ?", (sid,))}
    moves = {e.seq: e for e in store.events(sid, kinds=("move",))}
    for seq in sorted(starts | set(moves)):
        op = moves[seq].payload.get("op") if seq in moves else "turn"
        if op == "undo":
            stack.append(moves[seq].payload["from"])  # every move records its head
        elif op == "redo":
            stack = stack[:-1]
        else:
            stack = []
    return stack


def redo(
    ws: Workspace,
    sid: str,
    *,
    force: bool = False,
    show_blob: str = BLOB_COMMAND,
    room: takes.Room | None = None,
) -> Moved:
    """Step forward along the branch the undos left, re-applying one turn's changes."""
    store = ws.store
    settle_ended(ws)
    with Lease(store, sid):
        stack = redo_stack(store, sid)
        head = sessions.get(store, sid).head
        finished = _finish(ws, sid, "redo", head, show_blob) if force else None
        if finished is not None:
            return finished
        known = turn_tree.visible(store, sid)
        if not stack or stack[-1] not in known or known[stack[-1]].parent != head:
            raise UserError(
                f"redo: nothing to redo in session {sid} (no undo since the last "
                "ask, continue or rewind)"
            )
        return _move(
            ws, sid, stack[-1], "redo", files=True, force=force, show_blob=show_blob, room=room
        )


def continue_(ws: Workspace, sid: str, number: int, room: takes.Room | None = None) -> Moved:
    """Move the head to turn ``number``; files stay as they are."""
    with Lease(ws.store, sid):
        _turn(ws.store, sid, number, "continue")
        return _move(ws, sid, number, "continue", files=False, room=room)


def rewind(
    ws: Workspace,
    sid: str,
    number: int,
    *,
    force: bool = False,
    show_blob: str = BLOB_COMMAND,
    room: takes.Room | None = None,
) -> Moved:
    """Move the head to turn ``number`` and return files to their state after it."""
    settle_ended(ws)
    with Lease(ws.store, sid):
        _turn(ws.store, sid, number, "rewind")
        finished = _finish(ws, sid, "rewind", number, show_blob) if force else None
        if finished is not None:
            return finished
        return _move(
            ws, sid, number, "rewind", files=True, force=force, show_blob=show_blob, room=room
        )


# -- fork -------------------------------------------------------------------------------


def fork(store: Store, sid: str, at: int | None = None) -> str:
    """A child session whose context is this one's at turn ``at`` (default: the head);
    it becomes the current session. Returns its id."""
    with Lease(store, sid):
        info = sessions.get(store, sid)
        number = info.head if at is None else at
        if number is None:
            raise UserError(f"fork: session {sid} has no turn to fork at")
        turn = _turn(store, sid, number, "fork")
        if turn.last_seq is None:
            raise UserError(f"fork: turn {number} is still running; fork when it has finished")
        with store.atomic():
            order = derived.build(store, sid) if number == info.head else None
            child = sessions.create(
                store,
                title=info.title,
                parent=sid,
                fork_seq=turn.last_seq,
                fork_turn=turn_tree.next_number(store, sid) - 1,
                head=number,
            )
            if order is not None:
                _start_with(store, child, sid, number, order)
    return child


def _start_with(store: Store, child: str, parent: str, number: int, order: list[Message]) -> None:
    """Give the child exactly ``order`` as its context: a ``fork`` snapshot. Messages
    the child cannot see (logged after the fork point, e.g. notes of an idle take)
    are copied into it first as new events."""
    present = derived.state(store, child).path_messages
    own: list[Message] = []
    for m in order:
        if m.id in present:
            own.append(m)
            continue
        copy = store.append(
            child,
            m.role,
            role=m.role,
            turn=number,
            text=m.text,
            payload={**m.payload, "copy_of": [parent, m.id]},
        )
        own.append(Message(copy.seq, m.role, m.text, number, copy.payload, restored=m.restored))
    store.append(
        child,
        "fork",
        turn=number,
        text=f"forked from {parent} at turn {number}",
        payload={"context": model.snapshot(store, own), "parent": parent, "at": number},
    )


# -- blobs ------------------------------------------------------------------------------


def find_blob(store: Store, prefix: str) -> bytes:
    """A blob by its hash or a unique prefix of it (6 characters or more)."""
    if len(prefix) < 6 or any(ch not in "0123456789abcdef" for ch in prefix):
        raise UserError(f"blob: expected a hash or a prefix of 6+ hex digits (got {prefix!r})")
    rows = store.read(
        "SELECT hash FROM blobs WHERE hash >= ? AND hash < ? LIMIT 2", (prefix, prefix + "g")
    )
    found = [r[0] for r in rows]
    if not found:  # an export's bytes are rendered again, not kept
        found = rendered.export_digests(store, prefix)[:2]
    if len(set(found)) != 1:
        raise UserError(f"blob: {'no' if not found else 'more than one'} blob matches {prefix}")
    return rendered.file_bytes(store, found[0]) or b""
