"""The bridge the Neovim remote plugin calls: pure Python, never imports pynvim.

One ``Host`` lives in the plugin's host process, i.e. one per Neovim. It opens
an App per (home, store, workspace) lazily, pins the session each tabpage of
this Neovim works in (``agent.tabs``: a chat per tab), and runs each ask as a
job on a daemon worker thread; two tabs' turns run at once, each in its session. The worker reaches
Neovim only through ``Port.emit``, which the rplugin shim implements with
``nvim.async_call``; streamed text is coalesced so a fast stream costs one
buffer update per ``flush_interval``, not one per token.

Events emitted (each a dict with ``job`` and ``kind``):
  text {text} · thinking {text} (the model's reasoning as it streams)
  · call {seq, code} · result {seq, text, error} · retry {message}
  · discard {text} (the text an attempt streamed before it failed: not logged)
  · notice {text, about, level, say, receipt?} (``say``: the one line the person is
  told, see ``nodecode.views.notices``; receipt: true for a take's receipt)
  · approve {id, approval, detail, diff, cwd} · done {status, turn, text, error}
  · phase {phase} (sending, thinking, streaming, retrying, running, approval)
  · request {state: started | finished, round, provider, model; when finished:
    status, seq, usage {input, output, cache_read, cache_write, prompt}, cost (dollars), error}
Events of no job (``job`` None): warning {text} (config.jsonc names a key that
is not a setting; told once per key while the host runs); history {token, part,
rows, last} or {token, part, error, last}: a part of the chat's history, newest
first (``Host.history``); context {token, value} or {token, error}: the export
:NodecodeContext asked for (``Host.context_open``); evict {token, summary} then
{token, value} or {token, error}: an eviction by hand (``agent.evicting``);
title {session, title, failed, line}: a session's automatic title (``agent.title``)."""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from nodecode import devtrace
from nodecode.agent import evicting, relay, warm
from nodecode.agent.relay import Job
from nodecode.agent.tabs import Pins, Place, tab_of
from nodecode.errors import UserError, one_line

FLUSH_INTERVAL = 0.025  # seconds between streamed-text updates sent to Neovim
SHOW_BLOB = ":NodecodeBlob"  # how Neovim shows a file version a forced move kept
BUSY = "a turn is running — :NodecodeStop to stop it"
HISTORY_PART = 150  # transcript rows per part of the chat's history (Neovim draws one at a time)


class Port(Protocol):
    """How the host reaches Neovim. ``emit`` must be callable from any thread,
    must not block, and must deliver events in the order they were emitted."""

    def emit(self, event: dict[str, Any]) -> None: ...


def _moved(moved: Any, command: str) -> dict[str, Any]:
    """A move as plain values; its lines end with how to finish it, when files were left."""
    out = moved.as_dict()
    hint = moved.finish_hint(command)
    if hint:
        out["lines"] = [*out["lines"], hint]
    return out


def _room(app: Any) -> Any:
    """What a block a pending context edit writes may hold, for the take a move
    makes (``take.Room``); None when the config gives no window."""
    from nodecode.budget import evict as evictions

    try:
        return evictions.take_room(app.workspace, app.config)
    except UserError:
        return None


def _open_app(place: Place) -> Any:
    from nodecode.app import App

    return App.open(home=place.home, store=place.store, cwd=place.cwd)


class Host:
    """Everything the rplugin can ask of the core, as plain values."""

    def __init__(
        self,
        port: Port,
        *,
        open_app: Callable[[Place], Any] = _open_app,
        flush_interval: float = FLUSH_INTERVAL,
    ):
        self._port = port
        self._open_app = open_app
        self._flush_interval = flush_interval
        self._apps: dict[Place, Any] = {}
        self._pins = Pins()  # (home, store, tab) → session
        self._jobs: dict[int, Job] = {}
        self._job_ids = itertools.count(1)
        self._approval_ids = itertools.count(1)
        self._always: dict[str, set[str]] = {}  # session → kinds the person always allows
        self._models: dict[tuple[Path, str], tuple[str, str]] = {}  # (home, store) → choice
        self._warmed: set[tuple[int, str]] = set()  # (id of an App, session) warmed for
        self._history: dict[int | None, tuple[int, list[list[dict[str, Any]]]]] = {}  # tab →
        self._lock = threading.Lock()
        self._evictions = evicting.Evictions(port.emit)  # :NodecodeEvict's, by session

    # --- what the rplugin calls (on Neovim's loop thread) -------------------

    def ask(self, ctx: Any, text: str) -> int:
        """Start a turn on a worker thread; returns its job id at once."""
        if not isinstance(text, str) or not text.strip():
            raise UserError("ask: expected some text to send (got nothing)")
        place = Place.from_lua(ctx)
        app = self._app(place)
        session = self._session(app, place, tab_of(ctx), open_chat=True)
        with self._lock:
            self._refuse_busy(session)
            job_id = next(self._job_ids)
            batcher = relay.Batcher(functools.partial(self._emit, job_id), self._flush_interval)
            job = Job(id=job_id, app=app, session=session, batcher=batcher, tab=tab_of(ctx))
            job.thread = threading.Thread(
                target=self._run, args=(job, text), name=f"nodecode-job-{job.id}", daemon=True
            )
            # A finished job is done with: its done event told Neovim all of it.
            # Kept, each held its thread, batcher and events for the host's life.
            self._jobs = {i: j for i, j in self._jobs.items() if j.running}
            self._jobs[job.id] = job
        job.thread.start()
        return job.id

    def stop(self, job_id: int | None = None) -> list[int]:
        """Ask a running job (or every job and eviction) to stop; returns the ids asked."""
        if job_id is None:
            self._evictions.stop()
        with self._lock:
            jobs = (
                [self._jobs.get(int(job_id))] if job_id is not None else list(self._jobs.values())
            )
        stopped = [j.id for j in jobs if j is not None and j.running]
        for job in jobs:
            if job is not None and job.running:
                job.cancel.set()
        return stopped

    def answer(self, job_id: int, approval_id: int, yes: bool, extra: Any = None) -> bool:
        """Deliver the person's answer to a pending approval prompt; ``extra`` may
        hold ``reason`` (why not: the call's result says it), ``always`` (allow
        this kind for the rest of the session in this Neovim) and ``hunks`` (the
        write's hunks the person took or left, ``cells.approval.Picked``)."""
        from nodecode.cells.approval import Picked

        job = self._jobs.get(int(job_id))
        if job is None:
            raise UserError(f"approval: no job {job_id} in this Neovim")
        pending = job.approvals.get(int(approval_id))
        if pending is None:
            raise UserError(f"approval: job {job_id} has no pending approval {approval_id}")
        extra = extra if isinstance(extra, dict) else {}
        pending.reason = str(extra.get("reason") or "")
        pending.always = bool(extra.get("always"))
        pending.picked = Picked.from_lua(extra["hunks"]) if "hunks" in extra else None
        pending.yes = bool(yes)
        pending.answered.set()
        return pending.yes

    def messages(self, ctx: Any) -> list[dict[str, Any]]:
        """The pinned session's transcript for the chat buffer: what happened, from
        the log, with markers ({seq, role, text, and a turn's ask its spent}; see
        ``nodecode.views.transcript``)."""
        from nodecode.views import transcript

        place = Place.from_lua(ctx)
        app = self._app(place)
        rows = transcript.rows(app.store, self._session(app, place, tab_of(ctx), open_chat=True))
        return [
            {
                "seq": int(m["seq"] or 0),
                "role": str(m["role"]),
                "text": str(m.get("text") or ""),
                **({"spent": m["spent"]} if "spent" in m else {}),
            }
            for m in rows
        ]

    def history(self, ctx: Any, token: int, part: int) -> None:
        """The chat's history in parts, newest first, each a ``history`` event
        {token, part, rows, last} (or {token, part, error, last}). Part 1 reads
        the whole transcript (as ``messages``); Neovim asks for each next part
        once it has drawn one, so no part waits behind another in its queue."""
        from nodecode.views import transcript

        tab = tab_of(ctx)
        if part <= 1:
            try:
                parts = transcript.parts(self.messages(ctx), HISTORY_PART)
            except Exception as e:  # noqa: BLE001 -- the chat says it, as the request would
                self._history.pop(tab, None)
                self._emit_history(token, part, last=True, error=one_line(e))
                return
            self._history[tab] = (token, parts)
        held = self._history.get(tab)
        if held is None or held[0] != token or part > len(held[1]):
            self._emit_history(token, part, last=True, rows=[])  # a load since replaced
            return
        last = part >= len(held[1])
        if last:
            self._history.pop(tab, None)
        self._emit_history(token, part, last=last, rows=held[1][part - 1])

    def _emit_history(self, token: int, part: int, **event: Any) -> None:
        self._port.emit({"job": None, "kind": "history", "token": token, "part": part, **event})

    def session(self, ctx: Any) -> dict[str, Any]:
        """Where this tab works and what it is doing (job: its session's running turn)."""
        from nodecode.views.titles import title_of

        place = Place.from_lua(ctx)
        app = self._app(place)
        session = self._session(app, place, tab_of(ctx))
        running = [j.id for j in self._jobs.values() if j.running and j.session == session]
        return {
            "id": session,
            "title": title_of(app.store, session),
            "home": str(place.home),
            "store": place.store,
            "cwd": str(place.cwd),
            "job": running[0] if running else None,
        }

    def jobs(self) -> list[dict[str, Any]]:
        """Every job of this Neovim: [{id, session, tab, status}]."""
        return [
            {"id": j.id, "session": j.session, "tab": j.tab, "status": j.status}
            for j in self._jobs.values()
        ]

    def close_tab(self, tab: int) -> list[int]:
        """A tabpage closed: its running turn is stopped (it ends as stopped, logged)
        and its pins are forgotten; the ids of the jobs asked to stop."""
        with self._lock:
            jobs = [j.id for j in self._jobs.values() if j.running and j.tab == int(tab)]
            self._history.pop(int(tab), None)
        self._pins.forget(int(tab))
        return [i for j in jobs for i in self.stop(j)]

    # --- the context buffer, recall and sessions (ui/context.lua, picker, tree)

    def context(self, ctx: Any) -> dict[str, Any]:
        """Export the context (a new context.txt) and describe it for the buffer:
        {path, session, first, nonce, export, blocks: [{id, role, tokens, line,
        prefix, cached}], cache: {through, system, tokens, last}}."""
        from nodecode.views import context as view

        app, sid = self._pinned(ctx)
        return view.open_export(app.workspace, sid, app.basis(), app.encoding_name())

    def context_open(self, ctx: Any, token: int) -> None:
        """``context`` on a worker thread, its value (or error) a ``context`` event
        {token, value} or {token, error}: neither :NodecodeContext nor the open
        buffer's re-export after a turn waits for the export, and the host's loop
        stays free for Neovim's requests meanwhile."""

        def run() -> None:
            event: dict[str, Any]
            try:
                event = {"value": self.context(ctx)}
            except Exception as e:  # noqa: BLE001 -- a worker must always report back
                event = {"error": one_line(e)}
            self._port.emit({"job": None, "kind": "context", "token": token, **event})

        threading.Thread(target=run, name="nodecode-context", daemon=True).start()

    def describe(self, ctx: Any, first: str) -> dict[str, Any]:
        """What ``context`` says, for the export whose line 1 is ``first`` (the
        buffer reloaded context.txt from disk): no new export."""
        from nodecode.views import context as view

        app, sid = self._pinned(ctx)
        return view.describe(app.workspace, sid, str(first), app.basis(), app.encoding_name())

    def validate(self, ctx: Any, text: str) -> dict[str, Any]:
        """A dry run of taking ``text`` as the saved context.txt: {ok, errors,
        summary} (summary.cache: what the next request can then read from cache;
        summary.cost: what the edit does to its cost, ``views.cost.edit_cost``)."""
        from nodecode.context import derived, take
        from nodecode.views import context as view
        from nodecode.views import cost as cost_view
        from nodecode.views.notices import for_person

        app, sid = self._pinned(ctx)
        result, order = take.check_file(app.workspace, sid, str(text))
        if order is not None:
            r = derived.read(app.store, sid)
            basis = app.basis()
            cache = view.cache_view(r, basis, order)
            del cache["prefix"], cache["cached"]
            result["summary"]["cache"] = cache
            rates = cost_view.config_rates(app.home, basis.config)
            found = cost_view.edit_cost(r, basis, r.state.messages, order, rates)
            result["summary"]["cost"] = found
        result["errors"] = [[line, for_person(str(why))] for line, why in result["errors"]]
        return result

    def removed(self, ctx: Any) -> list[dict[str, Any]]:
        """Messages a restore can bring back: [{id, role, turn, first_line}]."""
        from nodecode.views import context as view

        app, sid = self._pinned(ctx)
        return view.removed(app.store, sid)

    def recall(
        self, ctx: Any, query: str | None, everywhere: bool, every_kind: bool = False
    ) -> list[dict[str, Any]]:
        """Picker rows: this session's log matching ``query`` (exports and requests
        only with ``every_kind``), or (everywhere) a search."""
        from nodecode.recall import recall_items

        app, sid = self._pinned(ctx)
        return recall_items(
            app.store,
            sid,
            query=query or None,
            everywhere=bool(everywhere),
            every_kind=bool(every_kind),
        )

    def recall_entry(self, ctx: Any, seq: int, session: str | None = None) -> str:
        """``(recall-entry N)`` of this session, or of ``session`` (a search hit's)."""
        from nodecode.recall import recall_entry

        app, sid = self._pinned(ctx)
        return recall_entry(app.store, session or sid, int(seq))

    def turn_messages(self, ctx: Any, turn: int) -> list[dict[str, Any]]:
        """One turn's messages (undone turns too), for the tree's open action."""
        from nodecode.views import context as view

        app, sid = self._pinned(ctx)
        return view.turn_messages(app.store, sid, int(turn))

    def sessions(self, ctx: Any) -> list[dict[str, Any]]:
        """The store's sessions, newest first, the pinned one marked; ``tab``: the
        tab page whose chat works in it, when another tab's (else None)."""
        from nodecode.views import context as view

        app, sid = self._pinned(ctx)
        place = Place.from_lua(ctx)
        others = self._pins.others((place.home, place.store), tab_of(ctx))
        return [{**r, "tab": others.get(r["id"])} for r in view.session_rows(app.store, sid)]

    def use_session(self, ctx: Any, sid: str | None) -> dict[str, Any]:
        """Pin session ``sid`` (None: a new one) for this tab and make it the
        store's current session; refused while a turn runs in the tab's session,
        or when another tab works in ``sid``."""
        from nodecode.log import sessions

        place, tab = Place.from_lua(ctx), tab_of(ctx)
        app = self._app(place)
        if any(j.running and j.tab == tab for j in self._jobs.values()):
            raise UserError(BUSY)
        if sid:
            sessions.get(app.store, str(sid))
            self._pins.pin((place.home, place.store), tab, str(sid))
            sessions.set_current(app.store, str(sid))
        else:
            sid = app.new_session()
            self._pins.pin((place.home, place.store), tab, str(sid))
        return self.session(ctx)

    def rename_session(self, ctx: Any, sid: str, text: str) -> str:
        """Give session ``sid`` the title ``text``; returns it as shown."""
        return self._app(Place.from_lua(ctx)).rename_session(str(sid), str(text))

    def delete_session(self, ctx: Any, sid: str) -> dict[str, Any]:
        """Delete session ``sid`` (refused while a turn runs in it): {session, events,
        blobs, pinned} (pinned: it was this Neovim's, which ``_session`` then replaces)."""
        place = Place.from_lua(ctx)
        self._refuse_busy(str(sid))
        pinned = self._pins.get((place.home, place.store), tab_of(ctx)) == sid
        return {**asdict(self._app(place).delete_session(str(sid))), "pinned": pinned}

    # --- checkpoints: undo, redo, the tree, fork (doc/design.md "Checkpoints") ---

    def undo(self, ctx: Any, force: bool = False) -> dict[str, Any]:
        """Undo the head turn: {op, from, to, lines, ask} (ask: for the input area)."""
        from nodecode.checkpoints import moves as checkpoints

        app, sid = self._idle(ctx)
        moved = checkpoints.undo(
            app.workspace, sid, force=bool(force), show_blob=SHOW_BLOB, room=_room(app)
        )
        return _moved(moved, ":NodecodeUndo!")

    def redo(self, ctx: Any, force: bool = False) -> dict[str, Any]:
        from nodecode.checkpoints import moves as checkpoints

        app, sid = self._idle(ctx)
        moved = checkpoints.redo(
            app.workspace, sid, force=bool(force), show_blob=SHOW_BLOB, room=_room(app)
        )
        return _moved(moved, ":NodecodeRedo!")

    def tree(self, ctx: Any) -> list[dict[str, Any]]:
        """The turn tree: [{number, parent, session, ask, first_seq, last_seq, span,
        status, on_path, head, cost, spent}] by number (spent: its cost as shown)."""
        from nodecode.views import tree

        app, sid = self._pinned(ctx)
        return [n.as_dict() for n in tree.nodes(app.store, sid)]

    def continue_(self, ctx: Any, turn: int) -> dict[str, Any]:
        from nodecode.checkpoints import moves as checkpoints

        app, sid = self._idle(ctx)
        return checkpoints.continue_(app.workspace, sid, int(turn), _room(app)).as_dict()

    def rewind(self, ctx: Any, turn: int, force: bool = False) -> dict[str, Any]:
        from nodecode.checkpoints import moves as checkpoints

        app, sid = self._idle(ctx)
        moved = checkpoints.rewind(
            app.workspace, sid, int(turn), force=bool(force), show_blob=SHOW_BLOB, room=_room(app)
        )
        return _moved(moved, "a forced rewind to it in the tree")

    def blob(self, ctx: Any, prefix: str) -> str:
        """:NodecodeBlob HASH: a file version a forced move kept, as text."""
        from nodecode.checkpoints import moves as checkpoints

        app, _ = self._pinned(ctx)
        data = checkpoints.find_blob(app.store, str(prefix or "").strip().lower())
        return data.decode("utf-8", errors="replace")

    def fork(self, ctx: Any, turn: int | None = None) -> dict[str, Any]:
        """Fork here (or at ``turn``); this Neovim then works in the child: {id, parent}."""
        from nodecode.checkpoints import moves as checkpoints

        place = Place.from_lua(ctx)
        app, sid = self._idle(ctx)
        child = checkpoints.fork(app.store, sid, int(turn) if turn is not None else None)
        self._pins.pin((place.home, place.store), tab_of(ctx), child)
        return {"id": child, "parent": sid}

    # --- the budget: /context, /evict, /budget (doc/design.md "Budget and eviction")

    def status(self, ctx: Any) -> dict[str, Any]:
        """The /context report (:NodecodeStatus): {window, source, reply, budget,
        fill, percent, parts, per_turn, last_request, warn_at, evict_to, pending, text}."""
        from nodecode.views import status

        app, sid = self._pinned(ctx)
        report = status.report(app.workspace, app.basis(strict=True), sid)
        return {**report, "text": status.render(report)}

    def budget(self, ctx: Any, n: Any = None) -> dict[str, Any]:
        """:NodecodeBudget [N | clear]: set or clear the store's override, then
        {window, source, reply, budget, ceiling, sources, lines}."""
        from nodecode import budget as budgets
        from nodecode.views import status

        app, _ = self._pinned(ctx)
        if isinstance(n, str) and n.strip() == "clear":
            budgets.clear_override(app.store, app.config)
        elif n not in (None, ""):
            text = str(n).strip()
            digits = text.isascii() and text.isdigit() and len(text) <= 30  # not ² nor ١٢٣
            budgets.set_override(app.workspace, app.config, int(text) if digits else n)
        plan = budgets.of(app.workspace, app.config)
        return {**plan.as_dict(), "lines": status.budget_lines(plan)}

    def evict(self, ctx: Any, token: int, arg: Any = None) -> None:
        """:NodecodeEvict / :NodecodeCompact [PERCENT | through TURN] on a worker
        thread: returns at once, its receipt an ``evict`` event (``agent.evicting``).
        Refused while a turn or an eviction runs in this session."""
        app, sid = self._idle(ctx)
        words = str(arg) if arg not in (None, "") else None
        self._evictions.start(app, sid, words, int(token))

    def stop_evict(self, ctx: Any) -> bool:
        """:NodecodeStop while an eviction runs: its summary request ends at once."""
        return self._evictions.stop(self._pinned(ctx)[1])

    # --- the model: :NodecodeModel ------------------------------------------

    def models(self, ctx: Any) -> list[dict[str, Any]]:
        """The models to switch to: [{name, provider, model, source, window, current}]."""
        from nodecode.budget import models

        app = self._app(Place.from_lua(ctx))
        return models.available(app.workspace, app.config)

    def use_model(self, ctx: Any, name: str) -> dict[str, Any]:
        """Work with ``PROVIDER/MODEL`` from the next request of this Neovim on;
        logged in the pinned session: {provider, model, previous, lines}."""
        from nodecode import budget as budgets
        from nodecode.budget import models

        place = Place.from_lua(ctx)
        app, sid = self._pinned(ctx)
        old = app.config
        pid, model = models.parse(app.workspace, old, name)
        previous = f"{old.provider.id}/{old.model}" if old.provider else None
        app.use_model(pid, model)
        with self._lock:
            self._models[(place.home, place.store)] = (pid, model)
        text = f"model {pid}/{model} from the next request (was {previous}), chosen in Neovim"
        app.store.append(
            sid,
            "model",
            text=text,
            payload={"provider": pid, "model": model, "previous": previous},
        )
        plan = budgets.of(app.workspace, app.config)
        window = (
            f"window {plan.window} ({plan.source}) · budget {plan.tokens}"
            if plan.window is not None
            else "window unknown"
        )
        lines = [f"model: {pid}/{model} from the next request · {window}"]  # one line: no prompt
        return {"provider": pid, "model": model, "previous": previous, "lines": lines}

    # --- slash commands typed in the chat (nodecode.slash) -------------------

    def slash(self, text: str) -> dict[str, Any]:
        """A message typed in the chat that starts with ``/``: {send} (the text to
        ask: no command, or the ``//`` escape), {name, lines} (/help), or {name,
        command, args, bang}: the :Nodecode… command Lua runs for it. An unknown
        command, or words its command cannot take, is one UserError."""
        from nodecode import slash

        found = slash.read(text)
        return {"send": found} if isinstance(found, str) else slash.in_neovim(found)

    def slash_commands(self) -> list[dict[str, str]]:
        """What the chat's input completes after ``/``: [{name, args, help}]."""
        from nodecode import slash

        return slash.completions()

    # --- internals ----------------------------------------------------------

    def _app(self, place: Place) -> Any:
        with self._lock:
            app = self._apps.get(place)
            choice = self._models.get((place.home, place.store))
        if app is None:
            app = self._open_app(place)
            app.on_warning = self._warn  # config.jsonc's unknown keys, each once
            with self._lock:
                app = self._apps.setdefault(place, app)
        if choice is not None:
            current = app.config
            if current.provider is None or (current.provider.id, current.model) != choice:
                app.use_model(*choice)  # chosen while this Neovim worked in another place
        return app

    def _pinned(self, ctx: Any) -> tuple[Any, str]:
        """The App and the pinned session for a Lua ``ctx``."""
        place = Place.from_lua(ctx)
        app = self._app(place)
        return app, self._session(app, place, tab_of(ctx))

    def _idle(self, ctx: Any) -> tuple[Any, str]:
        """``_pinned``, refused while a turn of this Neovim runs in that session
        (the lease would say so too, but as another process's)."""
        app, sid = self._pinned(ctx)
        self._refuse_busy(sid)
        return app, sid

    def _refuse_busy(self, sid: str) -> None:
        """One line when a turn of this Neovim or an eviction runs in session ``sid``."""
        if any(j.running and j.session == sid for j in self._jobs.values()):
            raise UserError(BUSY)
        self._evictions.refuse(sid)

    def _session(self, app: Any, place: Place, tab: int | None, open_chat: bool = False) -> str:
        """The session ``tab`` of this Neovim works in for (home, store); resolved
        at its first call (``agent.tabs.Pins.resolve``; a new one only to open a chat)."""
        session = self._pins.resolve(
            (place.home, place.store),
            tab,
            app.resume_session,  # a session deleted meanwhile is not kept
            app.new_session,
            open_chat=open_chat,
        )
        with self._lock:
            fresh = (id(app), session) not in self._warmed
            self._warmed.add((id(app), session))
        if fresh:  # what its first ask would load and count, while the person types
            warm.start(app, session)
        return session

    def _warn(self, line: str) -> None:
        """A warning that belongs to no job (config.jsonc's unknown keys): Neovim
        shows it once, as a warning."""
        self._port.emit({"job": None, "kind": "warning", "text": line})

    def _emit(self, job_id: int, event: dict[str, Any]) -> None:
        self._port.emit({"job": job_id, **event})

    def _run(self, job: Job, text: str) -> None:
        with devtrace.turn(job.id):
            relay.run(job, text, functools.partial(self._review, job))
        from nodecode.agent import title  # after a first reply, on a thread of its own

        title.start(job.app, job.session, lambda t: self._port.emit(t.event()))

    def _review(self, job: Job, request: Any) -> Any:
        """Called on the worker thread: allowed already (config, or "always" for
        this session), else ask the person through Lua and wait for
        NodecodeApproval (or a stop). A refusal with a reason raises Refused; a
        write answered hunk by hunk returns the Picked."""
        from nodecode.cells.approval import Refused

        kind = request.kind
        if kind in job.app.config.auto_approve or kind in self._always.get(job.session, ()):
            return True
        pending = job.ask_person(next(self._approval_ids), request)
        yes = pending.yes and not job.cancel.is_set()
        if yes and pending.always:
            with self._lock:
                self._always.setdefault(job.session, set()).add(kind)
        if not yes and pending.reason and not job.cancel.is_set():
            raise Refused(pending.reason)
        return pending.picked if yes and pending.picked is not None else yes


# --- what Neovim may call ---------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A Host method Neovim calls by name. A request (rpc.call) returns its
    value to the waiting caller; a notification (rpc.notify) returns at once,
    and its error is shown as a message."""

    method: Callable[..., Any]
    notify: bool = False


# The one list of what Neovim may call: the rplugin's NodecodeCall and
# NodecodeNotify dispatch by these names, and Lua calls rpc.call(name, ...) or
# rpc.notify(name, ...). A first parameter named ``ctx`` gets the place Lua
# sends with every call; the others take the call's arguments, decoded by their
# type hints (rplugin/python3/nodecode_nvim).
ENDPOINTS: dict[str, Endpoint] = {
    "ask": Endpoint(Host.ask),
    "stop": Endpoint(Host.stop, notify=True),
    "approval": Endpoint(Host.answer),
    "messages": Endpoint(Host.messages),
    "history": Endpoint(Host.history, notify=True),
    "info": Endpoint(Host.session),
    "jobs": Endpoint(Host.jobs),
    "close_tab": Endpoint(Host.close_tab, notify=True),
    # the context buffer, recall and sessions
    "context": Endpoint(Host.context),
    "context_open": Endpoint(Host.context_open, notify=True),
    "describe": Endpoint(Host.describe),
    "validate": Endpoint(Host.validate),
    "removed": Endpoint(Host.removed),
    "recall": Endpoint(Host.recall),
    "recall_entry": Endpoint(Host.recall_entry),
    "turn_messages": Endpoint(Host.turn_messages),
    "sessions": Endpoint(Host.sessions),
    "use_session": Endpoint(Host.use_session),
    "rename_session": Endpoint(Host.rename_session),
    "delete_session": Endpoint(Host.delete_session),
    # checkpoints and the budget
    "undo": Endpoint(Host.undo),
    "redo": Endpoint(Host.redo),
    "tree": Endpoint(Host.tree),
    "continue": Endpoint(Host.continue_),
    "rewind": Endpoint(Host.rewind),
    "fork": Endpoint(Host.fork),
    "blob": Endpoint(Host.blob),
    "status": Endpoint(Host.status),
    "budget": Endpoint(Host.budget),
    "evict": Endpoint(Host.evict),
    "stop_evict": Endpoint(Host.stop_evict, notify=True),
    # the model
    "models": Endpoint(Host.models),
    "use_model": Endpoint(Host.use_model),
    # slash commands typed in the chat
    "slash": Endpoint(Host.slash),
    "slash_commands": Endpoint(Host.slash_commands),
}


def endpoint(name: Any, notify: bool) -> Callable[..., Any]:
    """The Host method Neovim calls as ``name``, sent as a notification or a
    request; an unknown name, or the wrong kind, is a UserError."""
    found = ENDPOINTS.get(name) if isinstance(name, str) else None
    if found is None:
        raise UserError(f"no endpoint {name!r} (known: {', '.join(sorted(ENDPOINTS))})")
    if found.notify != notify:
        kind = "a notification (rpc.notify)" if found.notify else "a request (rpc.call)"
        raise UserError(f"endpoint {name!r} is {kind}")
    return found.method
