"""The context in an order every provider accepts (doc/design.md "The request"), and
a request's arranged messages with what is derived of them, made incrementally.

``arrange``: call batches whole, results after their calls, a note never last,
a user message first, empty texts dropped. ``Arranged`` is one request's
arrangement: it reuses the previous request's for the leading messages both
hold as the very same objects (the context only grew: the state keeps its
message objects), so a request at 2,000 messages arranges, counts, hashes and
encodes only its new ones.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, islice
from typing import Any

from nodecode.context.message import Message

CONTEXT_BEGINS = "(context begins)"
USER_SIDE = ("user", "stub", "notice")
ASSISTANT_SIDE = ("assistant", "note", "call", "thinking")


def missing_result(call: Message) -> Message:
    """The result a call gets when none was logged (a stopped turn): one object per
    call, so that requests made of the same messages hold the same objects."""
    made = call.memo.get("missing-result")
    if made is None:
        text = f"[no result: the turn stopped before this call ran] [seq {call.id}]"
        made = Message(-call.id, "tool", text, call.turn, {"call": call.id, "error": True})
        call.memo["missing-result"] = made
    return made


BEGINS = Message(0, "user", CONTEXT_BEGINS)  # one object, for the same reason


def carried(m: Message) -> bool:
    """Whether a request carries ``m``: a call, a result or thinking, or a message
    whose text is not blank (isspace() tests what strip() would remove, copying nothing)."""
    text = m.text
    return m.role in ("call", "tool", "thinking") or (bool(text) and not text.isspace())


def sendable(
    messages: list[Message],
    carries: Callable[[Message], bool],
    previous: Arranged | None = None,
    key: Hashable = None,
) -> list[Message]:
    """``messages`` without those a request does not carry (``carries`` says, given
    by the wire format: the thinking it does not send back); the same list object
    when none is dropped, so the next request's reuse sees it unchanged. Given the
    session's ``previous`` arrangement made for the same ``key`` (the wire format
    and setting ``carries`` stands for), whose messages these begin with (the
    context only grew), only the new ones are tested."""
    start, head, source = 0, None, None
    if previous is not None and previous.wire_format == key:
        source = previous.source
        if source is not None and _same_objects(source, messages) == len(source):
            start, head = len(source), previous.messages
    tail = [m for m in islice(messages, start, None) if m.role != "thinking" or carries(m)]
    if head is None:
        return messages if len(tail) == len(messages) else tail
    if head is source and len(tail) == len(messages) - start:
        return messages  # nothing dropped, before or now
    return head + tail


def arrange(messages: list[Message]) -> list[Message]:
    """The messages in an order every provider accepts."""
    return _Batched.of(messages, None).arranged()


@dataclass
class _Batched:
    """``_batches`` of the kept messages, with what lets the next request resume it:
    the positions (in ``kept``) where the batching started afresh, with how long its
    output was there, and the calls that found no result anywhere."""

    messages: list[Message]
    kept: list[Message]
    positions: list[int]  # each kept message's index in ``messages``
    result_at: dict[int, int]  # call id → index in ``kept`` of its first result
    out: list[Message]
    clean: list[tuple[int, int]] = field(default_factory=list)  # (kept index, len(out))
    open: list[tuple[int, int]] = field(default_factory=list)  # (kept index, call id)

    @classmethod
    def of(cls, messages: list[Message], old: _Batched | None) -> _Batched:
        same = _same_objects(old.messages, messages) if old is not None else 0
        start = bisect.bisect_left(old.positions, same) if old is not None else 0
        if old is None or start == 0:
            return cls._fresh(messages)
        kept = old.kept[:start]
        positions = old.positions[:start]
        for i in range(same, len(messages)):
            if carried(messages[i]):
                kept.append(messages[i])
                positions.append(i)
        values = old.result_at.values()
        if max(values, default=-1) < start:
            result_at = dict(old.result_at)
        else:
            result_at = {c: k for c, k in old.result_at.items() if k < start}
        _results(kept, start, result_at)
        cut = old._resume_point(start, result_at)
        if cut is None:
            return cls._fresh(messages)
        at, length = old.clean[cut]
        made = cls(
            messages,
            kept,
            positions,
            result_at,
            old.out[:length],
            old.clean[:cut],
            [o for o in old.open if o[0] < at],
        )
        made._run(at)
        return made

    @classmethod
    def _fresh(cls, messages: list[Message]) -> _Batched:
        positions = [i for i, m in enumerate(messages) if carried(m)]  # each tested once
        kept = [messages[i] for i in positions]
        result_at: dict[int, int] = {}
        _results(kept, 0, result_at)
        made = cls(messages, kept, positions, result_at, [])
        made._run(0)
        return made

    def _resume_point(self, start: int, result_at: dict[int, int]) -> int | None:
        """The last clean position at or before ``start`` (an index into ``clean``)
        whose batching cannot change: not inside a run of calls that may go on
        after ``start``, and no call before it that found no result has one now."""
        limit = start - 1 if start and self.kept[start - 1].role == "call" else start
        while True:
            cut = bisect.bisect_right(self.clean, (limit, float("inf"))) - 1
            if cut < 0:
                return None
            at = self.clean[cut][0]
            found = [k for k, call in self.open if k < at and call in result_at]
            if not found:
                return cut
            limit = min(found)  # that call's batch now takes its result: start before it

    def _run(self, i: int) -> None:
        """The batching from kept index ``i`` (a clean position) to the end: each run
        of calls followed at once by all its results, in call order; whatever stood
        between a batch's calls and its last result moves after it."""
        msgs, out, result_at = self.kept, self.out, self.result_at
        n = len(msgs)
        used: set[int] = set()
        far = -1  # the furthest result taken ahead: a position before it is not clean
        while i < n:
            if far < i:
                self.clean.append((i, len(out)))
            m = msgs[i]
            if i in used or m.role == "tool":  # a result already placed, or an orphan
                i += 1
                continue
            if m.role != "call":
                out.append(m)
                i += 1
                continue
            j = i
            while j < n and msgs[j].role == "call":
                j += 1
            out.extend(msgs[i:j])
            for k in range(i, j):
                call = msgs[k]
                at = result_at.get(call.id)
                if at is not None and at > i and at not in used:
                    used.add(at)
                    far = max(far, at)
                    out.append(msgs[at])
                else:
                    if at is None:
                        self.open.append((k, call.id))
                    out.append(missing_result(call))
            i = j
        self.clean.append((n, len(out)))

    def arranged(self) -> list[Message]:
        """The batches with no note last and a user-side message first (a new list)."""
        out = self.out
        notes = 0
        while notes < len(out) and out[-1 - notes].role == "note":
            notes += 1
        if notes:
            body, tail = out[:-notes], out[-notes:]
            last_user = next(
                (k for k in range(len(body) - 1, -1, -1) if body[k].role in USER_SIDE), -1
            )
            at = max(last_user if last_user == len(body) - 1 else last_user + 1, 0)
            out = body[:at] + tail + body[at:]
        if not out or out[0].role not in USER_SIDE:
            return [BEGINS, *out]
        return list(out)


def _results(kept: list[Message], start: int, result_at: dict[int, int]) -> None:
    for i in range(start, len(kept)):
        m = kept[i]
        if m.role == "tool" and m.call_id is not None:
            result_at.setdefault(m.call_id, i)


def _same_objects(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading messages of ``a`` and ``b`` are the same: first as a whole
    (a list comparison, the very same objects at C speed: the one list grew from the
    other), else object by object. The whole compares equal messages that are other
    objects too, only when the state was read again from the log: messages equal in
    id, role, text and turn hold the same payload, so what is derived of them is too."""
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo]; the answer is at most hi
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 32:  # halve by comparing slices (C loops), then walk the rest
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return next(compress(count(lo), map(operator.is_not, a[lo:hi], b[lo:hi])), hi)


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items of ``a`` and ``b`` are equal: first by identity, then
    by value, both at C speed (no Python-level loop over the items)."""
    n = min(len(a), len(b))
    k = _same_objects(a, b)
    if k == n:
        return n
    return next(compress(count(k), map(operator.ne, islice(a, k, n), islice(b, k, n))), n)


class Arranged:
    """The messages of one request in the order they are sent, and what is derived
    from them position by position (ids and digests, cumulative tokens, cache prefix
    hashes, wire messages). Each reuses the previous request's values for the leading
    positions that hold the very same message objects."""

    def __init__(
        self,
        messages: list[Message],
        previous: Arranged | None = None,
        *,
        source: list[Message] | None = None,
        wire_format: Hashable = None,
    ):
        self.messages = messages
        # What ``sendable`` made ``messages`` of, and for which wire format (given by
        # ``arranged``): the next request tests only the messages added to it.
        self.source, self.wire_format = source, wire_format
        self.batched: _Batched = _Batched.of(
            messages, previous.batched if previous is not None else None
        )
        self.out = self.batched.arranged()
        self.previous = previous
        self.same = _same_objects(previous.out, self.out) if previous is not None else 0
        if previous is not None:
            previous.previous = None  # a chain of two at most: its values are made
        self.memo: dict[Hashable, Any] = {}

    def series(self, key: Hashable, first: Any, step: Callable[[Any, Message], Any]) -> list[Any]:
        """``[first, step(first, out[0]), step(that, out[1]), …]``: entry i + 1 depends
        on ``out[:i + 1]`` and ``first`` only, so the previous request's entries through
        ``same`` are kept when it started from the same ``first``."""
        values = self.memo.get(key)
        if values is not None:
            return values
        old = self.previous.memo.get(key) if self.previous is not None else None
        values = old[: self.same + 1] if old is not None and old[0] == first else [first]
        last = values[-1]
        for m in islice(self.out, len(values) - 1, None):
            last = step(last, m)
            values.append(last)
        self.memo[key] = values
        return values

    @property
    def sent(self) -> list[tuple[int, str]]:
        """(id, digest) of each message, as the request event records them."""
        return self.series("sent", None, lambda _, m: (m.id, m.digest))[1:]


def arranged_after(
    previous: Arranged | None,
    messages: list[Message],
    carries: Callable[[Message], bool],
    key: Hashable,
) -> Arranged:
    """``messages`` as a request carries them (``sendable``: ``carries`` and ``key``
    from the wire format), arranged, reusing the ``previous`` request's values for
    what both hold."""
    kept = sendable(messages, carries, previous, key)
    return Arranged(kept, previous, source=messages, wire_format=key)
