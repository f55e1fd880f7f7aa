"""The context: the ordered messages the next request reads.

This is the one place that computes it, from the log on the head's path
(plus, as features land, the edits taken and the evictions). Everything
else — the request builder, the export, the budget — reads it from here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from nodecode import turns as turn_tree
from nodecode.store import Event, Store


@dataclass(frozen=True)
class Message:
    """One block of the context. ``id`` is the seq of the event that made it."""

    id: int
    role: str
    text: str
    turn: int | None = None
    payload: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def call_id(self) -> int | None:
        """For a ``tool`` result, the seq of its call."""
        return self.payload.get("call") if self.role == "tool" else None

    def digest(self) -> str:
        """A short hash of what the model reads of this message."""
        h = hashlib.sha256()
        h.update(f"{self.id}\0{self.role}\0".encode())
        h.update(self.text.encode("utf-8", "surrogatepass"))
        if self.role == "call":
            h.update(repr((self.payload.get("name"), self.payload.get("input"))).encode())
        return h.hexdigest()[:16]


def message_of(event: Event) -> Message:
    return Message(event.seq, event.role or event.kind, event.text, event.turn, event.payload)


def build(store: Store, sid: str) -> list[Message]:
    """The messages of every turn on the head's path, in log order."""
    out: list[Message] = []
    for turn in turn_tree.path(store, sid):
        out.extend(message_of(e) for e in store.turn_messages(turn.session, turn.number))
    return out
