"""The loop: ask → rounds (request, reply, calls, results) → final answer.

Every step lands in the log as its own event, after redaction. The person
sees the turn through ``TurnCallbacks``; the CLI and the Neovim host each
implement them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Any

from nodecode import budget as budgets
from nodecode.agent.texts import call_text, format_result
from nodecode.app import App
from nodecode.budget import evict as evictions
from nodecode.budget.summary import summarizer
from nodecode.cache import ledger
from nodecode.cache import miss as cache_miss
from nodecode.cells.approval import Approval, Picked
from nodecode.cells.env import CellEnv
from nodecode.cells.evaluate import CellResult, evaluate_call
from nodecode.checkpoints import shadow
from nodecode.config import schema
from nodecode.context import derived
from nodecode.context import sent as sent_log
from nodecode.context import take as takes
from nodecode.errors import (
    ContextOverflow,
    DoesNotFit,
    ProviderError,
    Stopped,
    StoreError,
    UserError,
)
from nodecode.log import turns as turn_tree
from nodecode.log.leases import LEASE_SECONDS, Lease
from nodecode.providers import pricing
from nodecode.providers.types import Reply, ThinkingSetting, ToolCall, Usage
from nodecode.providers.wire import Request
from nodecode.secrets.redact import StreamRedactor
from nodecode.verbs.prompt import Prompt
from nodecode.views import cost as cost_view


class TurnCallbacks:
    """What the person sees of a running turn. Every method is optional."""

    def on_text(self, chunk: str) -> None: ...
    def on_thinking(self, chunk: str) -> None:
        """The model's reasoning as it streams (never reply text)."""

    def on_call(self, seq: int, code: str) -> None: ...
    def on_result(self, seq: int, text: str, error: bool) -> None: ...
    def on_retry(self, message: str) -> None: ...
    def on_discard(self, text: str) -> None:
        """``text`` was streamed by an attempt that then failed (after on_retry):
        the log will not keep it, the retry streams the reply anew."""

    def on_notice(self, text: str) -> None: ...

    def on_receipt(self, text: str) -> None:
        """A take's receipt (an edit of the context taken or refused at a request)."""
        self.on_notice(text)

    def on_phase(self, phase: str) -> None:
        """What the turn waits on now: sending, thinking (the answer began, no text
        yet), streaming, retrying, running (a cell) or approval."""

    def on_request(self, info: dict[str, Any]) -> None:
        """A model request starts: {round, provider, model}."""

    def on_request_done(self, info: dict[str, Any]) -> None:
        """It ended: {round, provider, model, status (done | stopped | failed), seq,
        usage {input, output, cache_read, cache_write, prompt}, cost (dollars, when priced),
        error}."""

    def approve(self, kind: str, detail: str) -> bool:
        return False

    def review(self, request: Approval) -> bool | Picked:
        """The whole request (a write's diff, a command's directory); may raise
        ``Refused`` (why not) or pick a write's hunks. By default ``approve`` answers."""
        return self.approve(request.kind, request.detail)


@dataclass
class TurnResult:
    turn: int
    status: str  # done | stopped | failed | round-limit
    text: str = ""
    error: str | None = None
    user_error: bool = False  # failed for a reason the person must fix (CLI exit 1)


class Agent:
    def __init__(self, app: App, sid: str):
        self.app, self.sid, self.store = app, sid, app.store

    def ask(
        self,
        text: str,
        callbacks: TurnCallbacks | None = None,
        cancel: threading.Event | None = None,
    ) -> TurnResult:
        """Run one turn. Raises SessionBusy when another process runs one here."""
        cb = callbacks or TurnCallbacks()
        cancel = cancel or threading.Event()
        config = self.app.config
        config.require_provider(self.app.environ)
        # Held for the whole turn: a heartbeat renews it while any step waits.
        seconds = schema.env(self.app.environ, "NODECODE_LEASE_SECONDS") or LEASE_SECONDS
        lease = Lease(self.store, self.sid, seconds)
        turn = _Turn(self, cb, cancel, lease)
        try:
            with self.store.atomic():  # the lease, the turn and its ask: one commit
                lease.acquire()
                turn.begin(text)
            return turn.run()
        finally:
            lease.release()


class _Turn:
    """One running turn's state."""

    def __init__(self, agent: Agent, cb: TurnCallbacks, cancel: threading.Event, lease: Lease):
        self.agent, self.cb, self.cancel, self.lease = agent, cb, cancel, lease
        self.app, self.store, self.sid = agent.app, agent.store, agent.sid
        self.config = self.app.config
        self.redact = self.app.redactor.apply
        provider_cfg = self.config.require_provider(self.app.environ)
        self.wire = self.config.wire()
        self.provider_id = provider_cfg.id
        self.provider = self.app.provider()
        self.number = 0
        self.requests = 0  # model requests sent in this turn
        self.streamed: list[str] = []  # what the person saw of the current attempt
        # The thinking setting, read at the turn's first request and kept to its end.
        self.thinking: ThinkingSetting | None = None
        self.noted: list[list[str]] | None = None  # the instructions this turn logged a change to

    def log(
        self,
        kind: str,
        *,
        role: str | None = None,
        text: Any = "",
        payload: dict | None = None,
        own: dict | None = None,
    ):
        """Append an event of this turn, its payload redacted. ``own`` fields join it
        as they are: values this code made of seqs and message digests (hex), where
        no secret can be, and that can hold thousands of them (a request's sent list
        after an edit near the top)."""
        payload = self.app.redactor.apply_obj(payload) if payload else None
        if own:
            payload = {**(payload or {}), **own}
        return self.store.append(
            self.sid, kind, role=role, turn=self.number, text=text, payload=payload
        )

    def begin(self, ask: str) -> None:
        """The turn and its ask, logged together (inside the caller's transaction)."""
        with self.store.atomic():
            turn = turn_tree.begin(self.store, self.sid, self.store.last_seq(self.sid) + 1)
            self.number = turn.number
            self.log("user", role="user", text=self.redact(ask))

    def run(self) -> TurnResult:
        """The turn's rounds after ``begin``; it is finished whatever happens, unless
        the store cannot record what its shell commands changed: then it stays
        running, and the next look at it settles it as a killed turn's."""
        status, ended, failing = "failed", True, False
        try:
            result = self.rounds()
            status = result.status
            return result
        except (Stopped, KeyboardInterrupt):
            status, failing = "stopped", True
            ended = self.end("stopped", "stopped by the person")
            raise
        except Exception as e:
            failing = True
            first = (str(e).strip().splitlines() or [""])[0]
            ended = self.end("error", self.redact(f"{type(e).__name__}: {first}".rstrip(": ")))
            raise
        finally:  # a live host keeps running: the turn must never stay "running"
            if ended:
                try:
                    last = self.store.last_seq(self.sid)
                    turn_tree.finish(self.store, self.sid, self.number, last, status)
                except StoreError:
                    if not failing:
                        raise  # else the error on its way out is the one to read

    def end(self, kind: str, text: str) -> bool:
        """Log how the turn ended (``stopped``, ``error``) with what its unlogged shell
        commands changed (``shadow.settle``: a result the store could not write).
        False when the store cannot write that either: shell changes would go
        unrecorded, so the turn is left for ``turn_tree.recover`` to settle."""
        try:
            extra = shadow.settle(self.app.home, self.store, self.sid, self.number)
        except StoreError:
            return False
        try:
            with self.store.atomic():
                self.log(kind, text=text, own=extra or None)
                shadow.forget_runs(self.store, self.sid, self.number)
        except StoreError:
            return not extra
        return True

    def rounds(self) -> TurnResult:
        final = ""
        for _ in range(self.config.max_rounds):
            try:
                reply = self.request()
            except ProviderError as e:
                message = self.redact(str(e))
                self.log("error", text=message, payload={"status": e.status})
                return TurnResult(self.number, "failed", final, message)
            except UserError as e:  # not sent: too big, or the context file is not a file
                message = self.redact(str(e))
                budget = {"budget": True} if isinstance(e, DoesNotFit) else None
                self.log("error", text=message, payload=budget)
                return TurnResult(self.number, "failed", final, message, user_error=True)
            calls = self.log_reply(reply)
            text = self.redact(reply.text)  # the result reaches the chat: as logged
            if reply.stopped or self.cancel.is_set():
                return self.stopped(text)
            final = text
            if not calls:
                return TurnResult(self.number, "done", final)
            if not self.run_calls(calls):
                return self.stopped(final)
        self.log(
            "notice",
            role="notice",
            text=f"[the turn stopped after {self.config.max_rounds} rounds, "
            "the configured max_rounds]",
        )
        return TurnResult(self.number, "round-limit", final)

    def stopped(self, text: str) -> TurnResult:
        self.log("stopped", text="stopped by the person")
        return TurnResult(self.number, "stopped", text)

    def follow_model(self) -> None:
        """A model chosen while the turn runs (the host's :NodecodeModel) applies
        from the turn's next request."""
        if self.app.config is self.config:
            return
        self.config = self.app.config
        provider_cfg = self.config.require_provider(self.app.environ)
        self.wire, self.provider_id = self.config.wire(), provider_cfg.id
        self.provider = self.app.provider()

    def request(self) -> Reply:
        self.follow_model()
        ws = self.app.workspace
        plan = budgets.of(ws, self.config)
        views = derived.views(self.store, self.sid)
        prompt = self.app.prompt()  # the instructions as their files hold them now
        meter = budgets.Meter(self.config, self.wire, views, prompt)
        self.meter = meter
        room = meter.room(plan.tokens)
        report = takes.take(
            ws,
            self.sid,
            self.number,
            budget=plan.tokens,
            count=meter.fill,
            room=room,
            foresee=lambda before, after: self.app.foresee(self.sid, before, after),
        )
        for receipt in report.receipts:
            self.cb.on_receipt(receipt)
        # The session as the take left it: read once for the eviction and the request.
        at = evictions.Evicting(
            ws,
            derived.read(self.store, self.sid),
            self.number,
            meter,
            plan,
            summarizer(self.app, self.config, stop=self.cancel),
        )
        ready = evictions.before_request(at, report.receipts)
        try:
            return self.send(ready, prompt, views)
        except ContextOverflow as e:  # a ceiling learned: evict and retry once
            ready = evictions.after_overflow(
                at, self.config, e, ready, report.receipts, redact=self.redact
            )
            return self.send(ready, prompt, views)

    def send(self, ready: evictions.Prepared, prompt: Prompt, views: derived.Derived) -> Reply:
        """Build the request from the prepared context (``prompt``: what it starts
        with; ``views``: the session's, the meter's too), stream it, log it."""
        for notice in ready.notices:
            self.cb.on_notice(notice)
        now = self.app.clock()
        scope = self.app.cache_scope(prompt) or ledger.scope_of(
            self.wire.type, self.provider_id, self.config.model, prompt.system, prompt.tools
        )
        self._note_instructions(prompt, views)
        placed: list[ledger.Placed] = []
        arranged = ready.arranged or self.meter.arranged(ready.messages)
        before = views.requests.last if views.requests is not None else None
        diagnose = bool(self.config.setting("cache_diagnostics"))

        def marks(_: list) -> list[tuple[int, float]]:
            meter = self.meter
            placed.append(
                ledger.place(
                    self.store,
                    scope,
                    arranged,
                    meter.message,
                    meter.system + meter.tools,
                    now,
                    mode=self.config.cache,
                    tokens=meter.tokens(arranged),
                )
            )
            return placed[0].marks()

        built = self.wire.build(
            Request(
                arranged,
                model=self.config.model or "",
                system=prompt.system,
                tools=prompt.tools,
                max_tokens=ready.budget.reply,
                marks=marks if self.wire.cache_marks else None,
                thinking=self.thinking_setting(ready.budget.reply),
                entry=self.model_entry(),
                where=f"providers.{self.provider_id}.models[{self.config.model}]",
                diagnose=diagnose,
                previous=_previous_response(before, self.provider_id) if diagnose else None,
            )
        )
        self.streamed.clear()
        shown = self.app.redactor.stream()  # a key split across deltas is still blanked
        thought = self.app.redactor.stream()
        info = self._request_started()
        try:
            reply = self.provider.stream(
                built.body,
                on_text=lambda chunk: self._show(shown.feed(chunk)),
                cancel=self.cancel,
                on_retry=lambda message: self._retry(shown, message),
                on_thinking=lambda chunk: self._think(thought.feed(chunk)),
                on_open=lambda: self.cb.on_phase("thinking"),
                headers=built.headers,
            )
        except Exception as e:
            self.cb.on_request_done({**info, "status": "failed", "error": self._line(e)})
            raise
        finally:  # the held-back tail, at the reply's end, a stop or an error
            self._think(thought.flush())
            self._show(shown.flush())
        u = reply.usage
        ignored = self._implausible(reply, ready.counted)
        prefix = placed[0].prefix if placed else ledger.prefix_keys(scope, arranged)
        ours = placed[0].tokens if placed else self.meter.tokens(arranged)
        spent = self.cost_of(u)
        theirs = self.wire.prompt_tokens(u)  # the prompt as the provider counted it
        with self.store.atomic():  # the request and what the cache now holds, together
            if placed:
                # The provider's tokens per one of ours, as this reply says (else as calibrated).
                plausible = theirs and ours[-1] and not ignored
                scale = theirs / ours[-1] if plausible else self.meter.ratio()
                ledger.record(self.store, placed[0], now, u.cache_read, scale)
            else:
                ledger.record_end(self.store, scope, arranged, now)
            seen = u.cache_read > 0 or bool(before and before[1].get("cache_seen"))
            expect = cache_miss.next_expectation(
                self.store,
                scope,
                (prefix, ours, arranged.out),
                theirs,
                now,
                placed=bool(placed),
                rule=self.wire.auto_cache,
                seen=seen and not ignored,
            )
            # No usage (stopped before it came) or an implausible one: nothing to judge.
            reported = theirs > 0 and not ignored
            miss = (
                self._judge_cache(before, prompt, views, scope, prefix, built, now, reply)
                if reported
                else None
            )
            event = self.log(
                "request",
                payload={
                    "provider": self.provider_id,
                    "model": self.config.model,
                    "breakpoints": built.breakpoints,
                    "ttls": built.ttls,
                    "retries": reply.retries,
                    "usage": {
                        "input": u.input,
                        "output": u.output,
                        "cache_read": u.cache_read,
                        "cache_write": u.cache_write,
                        "thinking": u.thinking,
                        "cache_write_1h": u.cache_write_1h,
                        "prompt": theirs,
                    },
                    **({"cost": spent} if spent is not None else {}),
                    "stop_reason": reply.stop_reason,
                    "instructions": _instruction_list(prompt),
                    **ready.log_fields(),
                    **({"usage_ignored": True} if ignored else {}),
                    **({"response_id": reply.id} if reply.id else {}),
                    **({"diagnosed": True} if diagnose else {}),
                    **({"diagnostics": reply.diagnostics} if reply.diagnostics else {}),
                    **({"cache_miss": miss} if miss is not None else {}),
                },
                own={
                    "sent": sent_log.delta(self.store, views, built.sent),
                    **({"expect": expect} if expect is not None else {}),
                    **({"cache_seen": True} if seen else {}),
                },
            )
            if miss is not None:  # recallable: its own event, naming the request
                self.log(
                    "cache_miss",
                    text=cache_miss.line(miss),
                    payload={"request": event.seq, **miss},
                )
        sent_log.remember(views, event.seq, built.sent)
        if ignored:
            self.cb.on_notice(ignored)
        self._request_finished(info, reply, event.seq, spent)
        return reply

    def _judge_cache(
        self,
        before: tuple[int, dict[str, Any]] | None,
        prompt: Prompt,
        views: derived.Derived,
        scope: ledger.Scope,
        prefix: list[str],
        built: Any,
        now: float,
        reply: Reply,
    ) -> dict[str, Any] | None:
        """What the request read short of what the request before left expected (or
        the provider's reason, when it gave one), with the cause (``cache.miss``)."""
        judged = cache_miss.Now(
            self.provider_id,
            self.config.model,
            _instruction_list(prompt),
            scope,
            prefix,
            built.sent,
            now,
            reply.usage.cache_read,
            reply.diagnostics,
        )

        def sent_before() -> Any:
            return sent_log.sent_of(self.store, self.sid, before[0], views) if before else []

        return cache_miss.judge(before[1] if before else None, judged, sent_before)

    def cost_of(self, usage: Usage) -> float | None:
        """What a request of this usage costs at the model's prices now (None: no price)."""
        rates = cost_view.config_rates(self.app.home, self.config)
        return pricing.request_cost(usage, self.wire, rates)

    def _note_instructions(self, prompt: Prompt, views: derived.Derived) -> None:
        """When the instruction files differ from those the session's last request
        carried, an ``instructions`` event says which (recall shows it)."""
        now = _instruction_list(prompt)
        last = views.requests.last if views.requests is not None else None
        before = last[1].get("instructions") if last is not None else None
        if (before is None and not now) or before == now or self.noted == now:
            return
        self.noted = now  # once per change, a retried request included
        names = ", ".join(path for path, _ in now) or "none"
        self.log(
            "instructions",
            text=f"project instructions now: {names}",
            payload={"files": now, "before": before or []},
        )

    def model_entry(self) -> dict[str, Any]:
        """The model's entry in config.jsonc, for the keys its wire format reads."""
        provider = self.config.provider
        return provider.model_entry(self.config.model or "") if provider is not None else {}

    def _implausible(self, reply: Reply, counted: int) -> str | None:
        """Why the reply's usage will not calibrate the fill, when it will not: a
        size more than ``PLAUSIBLE``× off our count is a wrong figure, not a tokenizer."""
        reported = self.wire.prompt_tokens(reply.usage)
        if reported == 0 or budgets.plausible(reported, counted):
            return None
        return (
            f"the provider reported {reported} prompt tokens for a request counted at "
            f"{counted}, more than {budgets.PLAUSIBLE:g}× off: not used to calibrate the fill"
        )

    def thinking_setting(self, max_tokens: int) -> ThinkingSetting:
        """The model's thinking setting, read once per turn: a tool loop is one
        assistant turn, and the API wants one thinking configuration for all of it."""
        if self.thinking is None:
            self.thinking = self.config.thinking()
        where = f"providers.{self.provider_id}.models[{self.config.model}]"
        self.thinking.check_budget(max_tokens, where)
        return self.thinking

    def _think(self, text: str) -> None:
        if text:
            self.cb.on_thinking(text)

    def _request_started(self) -> dict[str, Any]:
        """Tell the person a request goes out; the info its end repeats."""
        self.requests += 1
        info = {"round": self.requests, "provider": self.provider_id, "model": self.config.model}
        self.cb.on_request(dict(info))
        self.cb.on_phase("sending")
        return info

    def _request_finished(
        self, info: dict[str, Any], reply: Reply, seq: int, spent: float | None
    ) -> None:
        u = reply.usage
        usage = {
            "input": u.input,
            "output": u.output,
            "cache_read": u.cache_read,
            "cache_write": u.cache_write,
            "prompt": self.wire.prompt_tokens(u),
        }
        status = "stopped" if reply.stopped else "done"
        priced = {"cost": spent} if spent is not None else {}
        self.cb.on_request_done({**info, "status": status, "seq": seq, "usage": usage, **priced})

    def _line(self, e: BaseException) -> str:
        """An exception as one redacted line."""
        first = (str(e).strip().splitlines() or [""])[0]
        return self.redact(first or type(e).__name__)

    def _show(self, text: str) -> None:
        if text:
            if not self.streamed:
                self.cb.on_phase("streaming")
            self.streamed.append(text)
            self.cb.on_text(text)

    def _retry(self, shown: StreamRedactor, message: str) -> None:
        """An attempt failed: the person sees the rest of what it streamed, the retry,
        then that the attempt's text was thrown away (the log keeps only the one that
        succeeds)."""
        self._show(shown.flush())  # the dropped attempt's tail goes before the retry line
        dropped = "".join(self.streamed)
        self.streamed.clear()
        self.cb.on_retry(message)
        if dropped:
            self.cb.on_discard(dropped)
        self.cb.on_phase("retrying")

    def log_reply(self, reply: Reply) -> list[tuple[int, ToolCall]]:
        for thought in reply.thinking:  # first, as the assistant message goes back
            self.log(
                "thinking",
                role="thinking",
                text=self.redact(thought.text),
                payload={"format": self.wire.thinking_tag, "block": thought.block},
            )
        if reply.text.strip():
            self.log("assistant", role="assistant", text=self.redact(reply.text))
        calls = []
        for call in reply.calls:
            event = self.log(
                "call",
                role="call",
                text=self.redact(call_text(call)),
                payload={"name": call.name, "input": call.input, "provider_id": call.id},
            )
            calls.append((event.seq, call))
        return calls

    def run_calls(self, calls: list[tuple[int, ToolCall]]) -> bool:
        """Evaluate each call and log its result; False when stopped midway."""
        for seq, call in calls:
            if self.cancel.is_set():
                return False
            self.cb.on_call(seq, self.redact(call_text(call)))
            self.cb.on_phase("running")
            env = self.cell_env()
            result = evaluate_call(call.name, call.input, env)
            self.log_result(seq, result, env)
        return not self.cancel.is_set()

    def cell_env(self) -> CellEnv:
        # Shell changes are tracked through the shadow git store (checkpoints).
        return self.app.cell_env(
            self.sid,
            approve=self.approve,
            review=self.review,
            turn=self.number,
            track_shell=True,
            cancel=self.cancel,
        )

    def approve(self, kind: str, detail: str) -> bool:
        if kind in self.config.auto_approve:
            return True
        return bool(self.cb.approve(kind, self.redact(detail)))

    def review(self, request: Approval) -> bool | Picked:
        """Auto-approved per config (its kind, or a name of its scope: an MCP server
        or tool), else the person sees the request (redacted)."""
        auto = self.config.auto_approve
        if request.kind in auto or any(name in auto for name in request.scope):
            return True
        self.cb.on_phase("approval")
        try:
            answer = self.cb.review(request.redacted(self.redact))
            return answer if isinstance(answer, Picked) else bool(answer)
        finally:
            self.cb.on_phase("running")

    def log_result(self, call_seq: int, result: CellResult, env: CellEnv) -> None:
        output = self.redact(result.output)
        try:
            event = self._log_result(call_seq, output, result.error, env)
        except StoreError as e:
            # The files first: a result whose output does not fit on the disk still
            # records what the call changed, with one line for its output. Then the
            # turn stops: nothing more runs that the log could not record.
            line = (str(e).splitlines() or [""])[0]
            with contextlib.suppress(StoreError):
                self._log_result(call_seq, f"[the result was not stored: {line}]", True, env)
            raise
        self.cb.on_result(event.seq, event.text, result.error)

    def _log_result(self, call_seq: int, output: str, error: bool, env: CellEnv) -> Any:
        """The call's ``tool`` event with the files it changed, in one transaction."""
        limit = self.config.result_max_chars
        payload: dict[str, Any] = {"call": call_seq, "error": error}
        if len(output) > limit:
            payload["output"] = output
        with self.store.atomic():  # logged: its shell commands need no settling after a kill
            if env.changes:
                payload["changes"] = [self._change(c) for c in env.changes]
                payload["workspace"] = os.path.realpath(env.workspace)
            if env.shell_untracked:
                payload["shell_untracked"] = env.shell_untracked
            event = self.log(
                "tool",
                role="tool",
                payload=payload,
                text=lambda seq: format_result(output, seq, limit),
            )
            shadow.forget_runs(self.store, self.sid, self.number)
        return event

    def _change(self, change: Any) -> dict[str, Any]:
        """A file change, its contents kept exactly in the blob table."""
        put = self.store.put_blob
        return {
            "path": change.path,
            "before": put(change.before) if change.before is not None else None,
            "after": put(change.after) if change.after is not None else None,
        }


def _previous_response(before: tuple[int, dict[str, Any]] | None, provider: str) -> str | None:
    """The id of the session's previous response when it was asked for diagnostics at
    this provider (the provider keeps a fingerprint only of those); else None."""
    if before is None:
        return None
    p = before[1]
    if not p.get("diagnosed") or p.get("provider") != provider:
        return None
    rid = p.get("response_id")
    return rid if isinstance(rid, str) else None


def _instruction_list(prompt: Prompt) -> list[list[str]]:
    """The instruction files a request carries: [shown path, sha256 of its text]."""
    return [[item.shown, item.digest] for item in prompt.instructions]
