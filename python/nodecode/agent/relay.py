"""A turn the Neovim host runs as a job: its streamed text coalesced, its events
relayed in order through one batcher, the approvals it asks the person for.
Imports nothing heavy: the host loads it at start-up, the loop at the first ask."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodecode.errors import Stopped, one_line


class Batcher:
    """Coalesces streamed text (reply text or thinking, one kind at a time); any
    other event flushes the text before it, so Neovim sees events in the order
    the agent produced them."""

    def __init__(self, emit: Callable[[dict[str, Any]], None], interval: float):
        self._emit = emit
        self._interval = interval
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._kind = "text"
        self._last = 0.0
        self._timer: threading.Timer | None = None

    def text(self, chunk: str, kind: str = "text") -> None:
        with self._lock:
            if kind != self._kind:
                self._flush_locked()
                self._kind = kind
            self._parts.append(chunk)
            wait = self._interval - (time.monotonic() - self._last)
            if wait <= 0:
                self._flush_locked()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def event(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._flush_locked()
            self._emit(event)

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._parts:
            text = "".join(self._parts)
            self._parts.clear()
            self._last = time.monotonic()
            self._emit({"kind": self._kind, "text": text})


@dataclass
class Approval:
    """One approval the person is asked for, and their answer."""

    answered: threading.Event = field(default_factory=threading.Event)
    yes: bool = False
    reason: str = ""  # why the person refused (becomes the call's result)
    always: bool = False  # allow this kind for the rest of the session
    picked: Any = None  # a write's hunks the person took (cells.approval.Picked)


@dataclass
class Job:
    """One running (or finished) ask of this Neovim."""

    id: int
    app: Any
    session: str
    batcher: Batcher  # every event of the job goes out through it
    tab: int | None = None  # the tabpage whose chat asked (None: no tab, e.g. a test)
    cancel: threading.Event = field(default_factory=threading.Event)
    status: str = "running"
    thread: threading.Thread | None = None
    approvals: dict[int, Approval] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.status == "running"

    def ask_person(self, approval_id: int, request: Any) -> Approval:
        """Ask the person through Lua (an ``approve`` event) and wait for the
        answer or a stop; the answer (unanswered on a stop)."""
        pending = Approval()
        self.approvals[approval_id] = pending
        self.batcher.event(
            {
                "kind": "approve",
                "id": approval_id,
                "approval": request.kind,
                "detail": request.detail,
                "diff": request.diff,
                "cwd": request.cwd,
                "hunks": list(request.hunks),
            }
        )
        while not pending.answered.wait(0.05):
            if self.cancel.is_set():
                break
        del self.approvals[approval_id]
        return pending


class _Relay:
    """The agent's callbacks for one job: everything goes out through the batcher;
    approvals go to ``review``."""

    def __init__(self, job: Job, review: Callable[[Any], bool]):
        self._review = review
        self._out = job.batcher

    def on_text(self, chunk: str) -> None:
        self._out.text(chunk)

    def on_thinking(self, chunk: str) -> None:
        self._out.text(chunk, "thinking")

    def on_call(self, seq: int, code: str) -> None:
        self._out.event({"kind": "call", "seq": seq, "code": code})

    def on_result(self, seq: int, text: str, error: bool) -> None:
        self._out.event({"kind": "result", "seq": seq, "text": text, "error": bool(error)})

    def on_retry(self, message: str) -> None:
        self._out.event({"kind": "retry", "message": message})

    def on_discard(self, text: str) -> None:
        self._out.event({"kind": "discard", "text": text})

    def on_notice(self, text: str) -> None:
        from nodecode.views.notices import notification

        self._out.event({"kind": "notice", "text": text, **notification(text)})

    def on_receipt(self, text: str) -> None:
        from nodecode.views.notices import notification

        self._out.event({"kind": "notice", "text": text, "receipt": True, **notification(text)})

    def on_phase(self, phase: str) -> None:
        self._out.event({"kind": "phase", "phase": phase})

    def on_request(self, info: dict[str, Any]) -> None:
        self._out.event({"kind": "request", "state": "started", **info})

    def on_request_done(self, info: dict[str, Any]) -> None:
        self._out.event({"kind": "request", "state": "finished", **info})

    def review(self, request: Any) -> bool:
        return self._review(request)


@functools.cache
def _callbacks_type() -> type:
    """The relay as a TurnCallbacks subclass (imported late: the agent pulls in
    httpx, which the host should not pay for at start-up)."""
    from nodecode.agent.loop import TurnCallbacks

    return type("HostCallbacks", (_Relay, TurnCallbacks), {})


def run(job: Job, text: str, review: Callable[[Any], bool]) -> None:
    """Run the job's ask on this (worker) thread; its end is a ``done`` event."""
    callbacks = _callbacks_type()(job, review)
    try:
        from nodecode.agent.loop import Agent

        result = Agent(job.app, job.session).ask(text, callbacks, job.cancel)
        done = {
            "status": result.status,
            "turn": result.turn,
            "text": result.text or "",
            "error": result.error,
        }
    except Stopped:
        done = {"status": "stopped", "turn": None, "text": "", "error": None}
    except Exception as e:  # noqa: BLE001 -- a worker must always report back
        done = {"status": "failed", "turn": None, "text": "", "error": one_line(e)}
    job.status = str(done["status"])
    for pending in job.approvals.values():
        pending.answered.set()
    job.batcher.event({"kind": "done", **done})
