"""A message: one block of the context, and what is computed from it.

A message is immutable and made of its id (the seq of the event that logged
it), role, text, turn and payload. Values computed from those hold for the
object's life, so they are kept on it, in one declared place: ``digest`` (a
cached attribute) and ``memo``, a dict whose keys name what each value is
("tokens:cl100k_base", "wire:anthropic:block", …; each key belongs to the
module that makes it). Messages read from the same row are the very same
object in any App of the process (``of_row``), so a new App finds all of that
already made.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from nodecode.bounded import Bounded
from nodecode.log.store import Event, unpack_payload

_FIELDS = ("id", "role", "text", "turn", "rewritten", "restored")


class _once:
    """``functools.cached_property`` without the lock Python 3.11 takes at every first
    read (a new App reads 2,000 digests): a message is immutable, so two threads
    reading at once compute the same value."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.name = fn, fn.__name__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class _Payload:
    """``Message.payload`` of a message read from a row: its stored bytes, decoded at
    the first read and kept in the instance (which then shadows this). Most are never
    read on the way to a request (a call's block and digest are found by those bytes)."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__["payload"] = unpack_payload(obj.__dict__["_packed"])
        return value


class Message:
    """One block of the context. ``id`` is the seq of the event that made it.
    Equal messages have the same id, role, text, turn and flags (the payload
    follows from the id)."""

    id: int
    role: str
    text: str
    turn: int | None
    rewritten: bool
    restored: bool
    memo: dict[str, Any]
    payload: Any = _Payload()  # dict[str, Any]; decoded at first read when read from a row

    def __init__(
        self,
        id: int,
        role: str,
        text: str,
        turn: int | None = None,
        payload: dict[str, Any] | None = None,
        rewritten: bool = False,
        restored: bool = False,
    ) -> None:
        self.__dict__.update(
            id=id,
            role=role,
            text=text,
            turn=turn,
            payload={} if payload is None else payload,
            rewritten=rewritten,
            restored=restored,
            memo={},
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Message is immutable (cannot set {name!r})")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Message:
            return NotImplemented
        a, b = self.__dict__, other.__dict__
        return (
            a["id"] == b["id"]
            and a["role"] == b["role"]
            and a["text"] == b["text"]
            and a["turn"] == b["turn"]
            and a["rewritten"] == b["rewritten"]
            and a["restored"] == b["restored"]
        )

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__[f] for f in _FIELDS))

    def __repr__(self) -> str:
        flags = "".join(f", {f}=True" for f in ("rewritten", "restored") if self.__dict__[f])
        return f"Message({self.id}, {self.role!r}, {self.text!r}, {self.turn!r}{flags})"

    @property
    def call_id(self) -> int | None:
        """For a ``tool`` result, the seq of its call."""
        return self.payload.get("call") if self.role == "tool" else None

    @_once
    def digest(self) -> str:
        """A short hash of what the model reads of this message (computed once; a
        message made of the same id, role and text as one this process hashed
        before, in any App, is looked up instead)."""
        role = self.role
        seen = (self.id, role, self.text)
        key: tuple | None = seen
        if role == "call" or role == "thinking":  # hashed with their payload: known by
            packed = self.__dict__.get("_packed")  # its stored bytes, when read
            key = (*seen, packed) if packed is not None else None  # from a row
        if key is not None:
            hit = _DIGESTS.get(key)
            if hit is not None:
                return hit
        value = self._hash()
        if key is not None:
            _DIGESTS.keep(key, value)
        return value

    def _hash(self) -> str:
        h = hashlib.sha256()
        h.update(f"{self.id}\0{self.role}\0".encode())
        h.update(self.text.encode("utf-8", "surrogatepass"))
        if self.role == "call":
            h.update(repr((self.payload.get("name"), self.payload.get("input"))).encode())
        elif self.role == "thinking":  # sent as the block it arrived as, fields and signature
            h.update(json.dumps(self.payload.get("block"), sort_keys=True).encode())
        return h.hexdigest()[:16]


# Digests for the process by (id, role, text): a new App on a store this process
# has read reads thousands of messages, and a dict lookup of text already in
# memory costs a fifth of hashing it. Calls and thinking are hashed with their
# payload, and looked up with the payload's stored bytes when the message was read
# from a row (the same bytes decode to the same payload; one made otherwise is hashed).
_DIGESTS = Bounded(100_000)


def message_of(event: Event) -> Message:
    """The message an event logged, its fields set directly (see ``store._event``)."""
    m = object.__new__(Message)
    m.__dict__.update(
        id=event.seq,
        role=event.role or event.kind,
        text=event.text,
        turn=event.turn,
        payload=event.payload,
        rewritten=False,
        restored=False,
        memo={},
    )
    return m


def of_row(row: tuple) -> Message:
    """The message a (seq, role, turn, text, packed payload) row logged, made as
    ``message_of`` makes it, without the Event between; the very object made of
    the same row before, in any App of the process (see ``_ROWS``)."""
    hit = _ROWS.get(row)
    if hit is not None:
        return hit
    m = object.__new__(Message)
    m.__dict__.update(
        id=row[0], role=row[1], text=row[3], turn=row[2], rewritten=False, restored=False, memo={}
    )
    if row[4] is None:
        m.__dict__["payload"] = {}
    else:  # decoded when read (see _Payload); a call's digest's key (see Message.digest)
        m.__dict__["_packed"] = row[4]
    return _ROWS.keep(row, m)


# Messages for the process by the row they were read from: a message is immutable
# and all that is kept on it (digest, token counts, encoded blocks, prefix hashes)
# is made of its id, role, turn, text and payload, which the row is. An App opening
# a store this process has read (a host's App for a second directory, a state read
# again after a take) gets the objects with all of that already made.
_ROWS = Bounded(20_000)  # ten sessions of 2,000 messages; each holds its text and blocks


_ODD_CALL = re.compile(r"\(([^\s()]+) (.*)\)", re.DOTALL)


def rewritten(m: Message, text: str, **flags: bool) -> Message:
    """``m`` with ``text`` as its rewritten body. A call's name and input follow
    the text, because the file shows a call as its text and whatever the file
    shows is what the model reads."""
    payload = m.payload
    if m.role == "call":
        payload = {**payload, **_call_of(text, payload.get("name", "eval"))}
    return Message(m.id, m.role, text, m.turn, payload, rewritten=True, **flags)


def _call_of(text: str, name: str) -> dict[str, Any]:
    """The name and input a call's text stands for: an ``eval`` cell, or the
    ``(NAME {JSON})`` form a call of another tool is shown as (see
    ``agent.texts.call_text``); any other text is read as a cell."""
    odd = _ODD_CALL.fullmatch(text) if name != "eval" else None
    try:
        value = json.loads(odd.group(2)) if odd else None
    except ValueError:
        value = None
    if isinstance(value, dict) and odd is not None:
        return {"name": odd.group(1), "input": value}
    return {"name": "eval", "input": {"code": text}}
