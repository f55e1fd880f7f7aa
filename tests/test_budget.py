"""The budget (doc/design.md "Budget and eviction") against the loopback server: window sources in order,
ceilings learned from every overflow body, the reply reserve the request
sends, calibration, the unknown window, and the /context report."""

from __future__ import annotations

import http.server
import json
import os
import queue
import shutil
import stat
import threading
from pathlib import Path

import pytest
from helpers import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as hs
from nodecode import budget as budgets
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.context import derived
from nodecode.context.derived import state
from nodecode.context.message import Message
from nodecode.errors import UserError
from nodecode.host import Host
from nodecode.loopback import LoopbackServer, Reply
from nodecode.loopback.tokens import openai_tokens
from nodecode.providers import catalog, registry
from nodecode.providers.overflow import parse_overflow
from test_budget_support import Session, check_valid, cli, prompt_total, texts

MODEL = "claude-sonnet-4-5"  # in the packaged snapshot: 200000 tokens, output 64000
ERRORS = FIXTURES / "errors"


@pytest.fixture
def session(loopback, tmp_path):
    made: list[Session] = []

    def make(srv=None, **kw) -> Session:
        s = Session(tmp_path / f"s{len(made)}", srv or loopback([], cache_min_tokens=1), **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def api_json(context: int, output: int) -> dict:
    return {
        "anthropic": {
            "id": "anthropic",
            "name": "Anthropic",
            "models": {
                MODEL: {
                    "id": MODEL,
                    "name": "Claude Sonnet 4.5",
                    "limit": {"context": context, "output": output},
                }
            },
        }
    }


# -- window sources ---------------------------------------------------------------


def test_each_window_source_wins_over_the_next(session):
    s = session(
        window=6000,
        config={"model": MODEL},
        provider={"models_dev": "anthropic", "models": [{"id": MODEL, "context_window": 7000}]},
    )
    budgets.set_override(s.app.workspace, s.app.config, 8000)
    cache = budgets.cache_file(s.home)
    catalog.write_split(cache, api_json(20000, 3000))

    def step(source: str, window: int, reply: int) -> None:
        plan = budgets.of(s.app.workspace, s.app.config)
        assert (plan.source, plan.window, plan.reply) == (source, window, reply)
        assert s.read_turn(1).status == "done"
        body = s.srv.model_requests[-1].body
        assert body["max_tokens"] == reply  # the request sends what the budget reserved

    step("NODECODE_CONTEXT_TOKENS", 6000, 1500)  # a quarter of the window
    s.reopen({})
    step("config.jsonc", 7000, 1750)
    s.set_provider(models=[])
    s.reopen()
    step("store override", 8000, 2000)
    budgets.clear_override(s.app.store, s.app.config)
    step("models.dev cache", 20000, 3000)  # the model's output limit
    shutil.rmtree(cache)
    step("models.dev snapshot", 200000, 8192)
    assert budgets.of(s.app.workspace, s.app.config).tokens == 200000 - 8192


def test_the_budget_is_the_input_limit_when_that_is_smaller(session):
    s = session(window=None, config={"model": "gpt-5.1"}, provider={"models_dev": "openai"})
    plan = budgets.of(s.app.workspace, s.app.config)
    assert (plan.window, plan.reply, plan.tokens) == (400000, 8192, 272000)


def test_budget_set_says_when_a_higher_source_shadows_it(session):
    s = session(window=6000)
    s.close()
    env = {"NODECODE_CONTEXT_TOKENS": "6000", "NODECODE_SESSION": s.sid}
    code, out, err = cli("budget", "set", "9000", home=s.home, env=env)
    assert code == 0, err
    assert "store override for loopback/loopback-model: 9000 tokens" in out
    assert "window: 6000 tokens (NODECODE_CONTEXT_TOKENS)" in out
    assert "the store override (9000) is shadowed by NODECODE_CONTEXT_TOKENS (6000)" in out
    env.pop("NODECODE_CONTEXT_TOKENS")
    code, out, err = cli("budget", home=s.home, env=env)
    assert "window: 9000 tokens (store override)" in out and "shadowed" not in out
    code, out, err = cli("budget", "clear", home=s.home, env=env)
    assert out.startswith("cleared: store override 9000") and "window: unknown" in out


class _ApiJson(http.server.BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args) -> None:
        pass


def test_models_refresh_writes_the_cache_that_then_gives_the_window(session):
    s = session(window=None, config={"model": MODEL}, provider={"models_dev": "anthropic"})
    s.close()
    _ApiJson.body = json.dumps(api_json(30000, 4000)).encode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ApiJson)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api.json"
        code, out, err = cli("models", "refresh", home=s.home, env={"NODECODE_MODELS_URL": url})
    finally:
        server.shutdown()
        server.server_close()
    assert code == 0, err
    cache = budgets.cache_file(s.home)
    assert out.strip() == f"{cache}: 1 providers, 1 models"
    written = api_json(30000, 4000)["anthropic"]
    assert json.loads((cache / "anthropic.json").read_text()) == written["models"]
    index = json.loads((cache / "_providers.json").read_text())
    assert index == {"anthropic": {k: v for k, v in written.items() if k != "models"}}
    assert stat.S_IMODE(os.stat(cache / "anthropic.json").st_mode) == 0o600
    s.reopen()
    plan = budgets.of(s.app.workspace, s.app.config)
    assert (plan.source, plan.window, plan.reply) == ("models.dev cache", 30000, 4000)
    code, out, err = cli(
        "models", "refresh", home=s.home, env={"NODECODE_MODELS_URL": "http://127.0.0.1:9/api.json"}
    )
    assert code == 1 and err.startswith("nodecode: models refresh: cannot fetch")
    assert json.loads((cache / "anthropic.json").read_text()) == written["models"]  # it stays


# -- ceilings ---------------------------------------------------------------------------


def _maximum(path: Path) -> int | None:
    found = parse_overflow(400, path.read_text())
    return found.maximum if found else None


NAMED = sorted(p.name for p in ERRORS.iterdir() if _maximum(p))


class Rejecting(LoopbackServer):
    """The loopback server, answering its next model request with a recorded body."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.rejections: list[Reply] = []

    def reject(self, body: str, status: int = 400, times: int = 1) -> None:
        kind = "application/json" if body.lstrip().startswith("{") else "text/plain"
        self.rejections += [Reply(status, body.encode(), content_type=kind)] * times

    def _route(self, route, body, index, headers):
        if route in ("anthropic", "openai") and self.rejections:
            return self.rejections.pop(0)
        return super()._route(route, body, index, headers)


def test_every_overflow_fixture_that_names_a_maximum_is_covered():
    assert len(NAMED) >= 9 and "anthropic_prompt_too_long_400.json" in NAMED


@pytest.mark.parametrize("name", NAMED)
def test_a_ceiling_from_each_overflow_body_caps_the_window_then_evicts_and_retries_once(
    name, session
):
    maximum = _maximum(ERRORS / name)
    ptype = "anthropic" if name.startswith("anthropic") else "openai"
    srv = Rejecting([], cache_min_tokens=1).start()
    try:
        s = session(srv, ptype=ptype, window=5000)
        for k in range(1, 5):
            s.read_turn(k)
        srv.reject((ERRORS / name).read_text())
        before = len(srv.model_requests)
        result = s.read_turn(5)
        meta = s.app.store.get_meta("ceiling:loopback:loopback-model")
        assert meta == str(maximum)
        plan = budgets.of(s.app.workspace, s.app.config)
        assert plan.window == min(5000, maximum) and plan.ceiling == maximum
        sent = srv.model_requests[before:]
        assert sent[0].status == 400
        if maximum < 100:  # a window of 3 tokens: nothing fits, so nothing is sent again
            assert result.status == "failed" and result.user_error
            assert "does not fit" in result.error and "the provider said" in result.error
            assert len(sent) == 1
            return
        assert result.status == "done" and [r.status for r in sent] == [400, 200, 200]
        retry = sent[1].body
        check_valid(ptype, retry)
        # evicted down to half of the new budget, then sent once more
        (evicted,) = s.events("evict")
        assert evicted.payload["reason"] == "overflow" and evicted.payload["budget"] == plan.tokens
        assert any(t.startswith("[history evicted: seq 1–") for t in texts(retry))
        assert prompt_total(ptype, sent[1].usage) <= plan.tokens * 0.5 * 1.03
    finally:
        srv.stop()


UNNAMED = {
    "openai_responses_stream_error_context_length_exceeded.json": 400,
    "llamacpp_context_size_exceeded_500.json": 500,
    "ollama_embed_input_too_long_400.json": 400,
}


@pytest.mark.parametrize("name", sorted(UNNAMED))
def test_an_overflow_naming_no_maximum_sets_the_ceiling_under_the_rejected_size(name, session):
    srv = Rejecting([], cache_min_tokens=1).start()
    try:
        s = session(srv, ptype="openai", window=None)
        for k in range(1, 13):
            s.read_turn(k)
        srv.reject((ERRORS / name).read_text(), status=UNNAMED[name])
        before = len(srv.model_requests)
        assert s.read_turn(13).status == "done"
        rejected = srv.model_requests[before]
        assert rejected.status == UNNAMED[name]
        ceiling = int(s.app.store.get_meta("ceiling:loopback:loopback-model"))
        size = openai_tokens(rejected.body)  # what the provider would count
        assert abs(ceiling - (size - 1)) <= 0.02 * size
        plan = budgets.of(s.app.workspace, s.app.config)
        assert (plan.window, plan.source) == (ceiling, "ceiling")
        retry = srv.model_requests[before + 1]
        assert retry.status == 200 and prompt_total("openai", retry.usage) <= plan.tokens
    finally:
        srv.stop()


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_server_window_rejects_once_then_the_session_stays_under_it(ptype, session, loopback):
    srv = loopback([], cache_min_tokens=1, window=3000)
    s = session(srv, ptype=ptype, window=None)  # unknown: nothing evicted ahead of time
    n = 1
    while not any(r.status == 400 for r in srv.model_requests):
        assert s.read_turn(n).status == "done"
        n += 1
        assert n < 20
    statuses = [r.status for r in srv.model_requests]
    at = statuses.index(400)
    assert statuses[at + 1] == 200  # evicted and retried once, accepted
    assert s.app.store.get_meta("ceiling:loopback:loopback-model") == "3000"
    plan = budgets.of(s.app.workspace, s.app.config)
    assert (plan.window, plan.source, plan.reply, plan.tokens) == (3000, "ceiling", 750, 2250)
    retry = srv.model_requests[at + 1]
    check_valid(ptype, retry.body)
    assert any(t.startswith("[history evicted: seq 1–") for t in texts(retry.body))
    assert prompt_total(ptype, retry.usage) <= 2250 * 0.5 * 1.03
    for k in range(n, n + 8):  # from now on the budget keeps it under the window
        assert s.read_turn(k).status == "done"
    assert statuses.count(400) == 1 and [r.status for r in srv.model_requests].count(400) == 1


SECRET = "sk-test-0123456789abcdefghijklmnop"
REJECTIONS = {  # each provider's too-large answer, echoing the key as some servers do
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: 3900 tokens > 3000 maximum (key {SECRET})",
        },
    },
    "openai": {  # llama.cpp's llama-server
        "error": {
            "code": 400,
            "message": "request (3900 tokens) exceeds the available context size "
            f"(3000 tokens), try increasing it (key {SECRET})",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 3900,
            "n_ctx": 3000,
        }
    },
}


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_the_rejection_that_set_a_ceiling_is_logged_redacted_before_its_eviction(ptype, session):
    """recall-log shows why history was evicted: the provider's message and the
    ceiling it set, without the key (issue 11, item 11)."""
    srv = Rejecting([], cache_min_tokens=1).start()
    try:
        s = session(srv, ptype=ptype, window=None)
        key_env = "ANTHROPIC_API_KEY" if ptype == "anthropic" else "OPENAI_API_KEY"
        s.reopen({key_env: SECRET})
        for k in range(1, 7):
            s.read_turn(k)
        srv.reject(json.dumps(REJECTIONS[ptype]))
        assert s.read_turn(7).status == "done"
        code, out, err = cli(
            "recall-log",
            "--match",
            "too large",
            home=s.home,
            env={"NODECODE_SESSION": s.sid, key_env: SECRET},
        )
        assert code == 0, err
        [line] = out.splitlines()
        assert " · error] " in line and "rejected the request as too large" in line
        assert "ceiling for loopback/loopback-model now 3000 tokens" in line
        [error] = [e for e in s.events("error")]
        assert "3900 tokens" in error.text and "[redacted:" in error.text
        assert error.payload["ceiling"] == 3000 and error.payload["status"] == 400
        (evicted,) = s.events("evict")
        assert error.seq < evicted.seq and evicted.payload["reason"] == "overflow"
        rows = s.app.store.read("SELECT text, payload FROM events WHERE session = ?", (s.sid,))
        assert not any(SECRET.encode() in (t or "").encode() + (b or b"") for t, b in rows)
    finally:
        srv.stop()


def test_a_second_overflow_fails_the_turn_with_the_providers_message(session):
    srv = Rejecting([], cache_min_tokens=1).start()
    try:
        s = session(srv, window=None)
        s.read_turn(1)
        srv.reject((ERRORS / "anthropic_prompt_too_long_400.json").read_text(), times=2)
        result = s.read_turn(2)
        assert result.status == "failed" and not result.user_error
        assert "prompt is too long: 200251 tokens > 200000 maximum" in result.error
        assert [r.status for r in srv.model_requests][-2:] == [400, 400]
    finally:
        srv.stop()


def test_an_unknown_window_never_evicts_ahead_of_time(session):
    s = session(window=None)
    for k in range(1, 16):
        assert s.read_turn(k).status == "done"
    plan = budgets.of(s.app.workspace, s.app.config)
    assert (plan.window, plan.tokens, plan.reply) == (None, None, 8192)
    assert s.events("evict") == [] and s.events("stub") == []
    assert not any(e.text.startswith("[context at ") for e in s.events("notice"))
    body = s.srv.model_requests[-1].body
    assert body["max_tokens"] == 8192
    assert all(f"read f{k}" in texts(body) for k in range(1, 16))
    assert prompt_total("anthropic", s.srv.model_requests[-1].usage) > 4000


# -- calibration -----------------------------------------------------------------------


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_the_fill_follows_the_reported_figure_within_2_percent(ptype, session, loopback):
    srv = loopback([], cache_min_tokens=1, usage_scale=1.25)
    s = session(srv, ptype=ptype, window=None)
    s.read_turn(1)
    s.ask(
        "read two",
        [
            {
                "text": "Two.",
                "calls": [
                    {"code": ';; f2\n(read-file "f2.txt")'},
                    {"code": ';; f3\n(read-file "f3.txt")'},
                ],
            },
            {"text": "done"},
        ],
    )
    for k in range(4, 7):
        s.read_turn(k)
    requests = s.events("request")
    assert len(requests) == len(srv.model_requests) == 10
    for event, received in list(zip(requests, srv.model_requests, strict=False))[1:]:
        reported = prompt_total(ptype, received.usage)
        assert abs(event.payload["fill"] - reported) <= 0.02 * reported, (event.seq, reported)
    # and what our tokenizer says is 25% under: the calibration did the rest
    last = requests[-1].payload
    assert last["fill"] > 1.2 * last["counted"]
    assert (
        abs(
            budgets.fill_of(s.app.store, s.sid, s.app.config)
            - 1.25
            * budgets.Meter(s.app.config, None, derived.read(s.app.store, s.sid).views)
            .count(state(s.app.store, s.sid).messages)
            .total
        )
        < 0.03 * last["fill"]
    )


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_request_that_reported_no_usage_does_not_reset_the_calibration(ptype, session, loopback):
    """A request stopped before the provider reported its size (here: stopped
    while waiting to retry a 529) leaves the calibration of the last request
    that did report one, not 1.0 (issue 11, item 11)."""
    srv = loopback([], cache_min_tokens=1, usage_scale=1.25)
    s = session(srv, ptype=ptype, window=None)
    s.read_turn(1)
    cancel = threading.Event()

    class StopAtTheRetry(TurnCallbacks):
        def on_retry(self, message: str) -> None:
            cancel.set()

    srv.add_fault({"kind": "529", "retry_after": 30})
    assert Agent(s.app, s.sid).ask("stop me", StopAtTheRetry(), cancel).status == "stopped"
    stopped = s.events("request")[-1]
    assert stopped.payload["usage"]["input"] == 0  # the provider reported nothing
    s.read_turn(3)
    after = s.events("request")[-2]  # the first request after the stopped one
    reported = prompt_total(ptype, srv.model_requests[-2].usage)
    assert abs(after.payload["fill"] - reported) <= 0.02 * reported, (after.payload, reported)


def test_counting_after_an_append_counts_only_the_new_message(session):
    s = session(window=None)
    for k in range(1, 4):
        s.read_turn(k)
    meter = budgets.Meter(s.app.config, None, derived.read(s.app.store, s.sid).views)
    messages = state(s.app.store, s.sid).messages
    meter.count(messages)
    calls: list[str] = []
    real = meter.text
    meter.text = lambda text: calls.append(text) or real(text)  # type: ignore[method-assign]
    s.app.store.append(s.sid, "note", role="note", turn=3, text="one more note")
    meter.count(state(s.app.store, s.sid).messages)
    assert calls == ["one more note"]


def test_the_system_prompt_and_tools_are_counted_by_their_text():
    from dataclasses import replace

    from nodecode.budget import meter as meters
    from nodecode.providers import registry
    from nodecode.verbs.prompt import DEFAULT

    plain = meters.Meter(None, registry.wire("anthropic"))
    other = meters.Meter(None, registry.wire("openai"))
    assert plain.system == plain.text(DEFAULT.system) > 500
    assert other.tools == sum(plain.text(t) for t in other.wire.tool_json(DEFAULT.tools))
    assert other.tools != plain.tools  # the tool's JSON differs per wire format
    # Another prompt (MCP tools, instructions) in the same process and wire format: counted anew.
    longer_prompt = replace(DEFAULT, system=DEFAULT.system + "\n- (mcp-echo TEXT)")
    longer = meters.Meter(None, registry.wire("anthropic"), prompt=longer_prompt)
    assert longer.system == plain.text(longer_prompt.system) > plain.system


# -- /context -----------------------------------------------------------------------------


def test_status_reports_window_budget_fill_parts_cache_marks_and_pending_edits(session):
    s = session(window=6000)
    for k in range(1, 4):
        s.read_turn(k)
    from nodecode.context import take as takes

    path = takes.export(s.app.workspace, s.sid)
    nonce = takes.latest_export(s.app.store, s.sid).payload["nonce"]
    path.write_text(path.read_text() + "[[note]]\nremember f2\n")
    s.close()
    code, out, err = cli(
        "status",
        "--json",
        home=s.home,
        env={"NODECODE_CONTEXT_TOKENS": "6000", "NODECODE_SESSION": s.sid},
    )
    assert code == 0, err
    r = json.loads(out)
    assert (r["window"], r["source"], r["reply"], r["budget"]) == (
        6000,
        "NODECODE_CONTEXT_TOKENS",
        1500,
        4500,
    )
    assert (r["warn_at"], r["evict_to"]) == (3825, 2250)
    assert set(r["parts"]) == {
        "system",
        "instructions",
        "tools",
        "stubs",
        "notes",
        "asks",
        "thinking",
        "replies",
        "calls",
        "results",
        "notices",
    }
    assert r["parts"]["system"] > 500 and r["parts"]["results"] > 600
    assert sum(r["parts"].values()) == pytest.approx(r["fill"], abs=12)
    assert set(r["per_turn"]) == {"1", "2", "3"}
    last = r["last_request"]
    assert last["cache_read"] > 0 and last["breakpoints"]
    assert r["pending"] and r["pending"][0]["what"].startswith("file edit of export")
    assert nonce
    s.reopen()
    from nodecode.views import status

    text = status.render(status.report(s.app.workspace, s.app.basis(strict=True), s.sid))
    assert "window: 6000 tokens (NODECODE_CONTEXT_TOKENS)" in text
    assert "reply reserve: 1500 · budget: 4500" in text
    assert "marks: warn at 85% = 3825 · evict to 50% = 2250" in text
    assert "pending edits: seq " in text


def test_the_host_api_for_status_budget_and_evict(session):
    s = session(window=None)
    for k in range(1, 4):
        s.read_turn(k)
    s.close()

    events: queue.Queue[dict] = queue.Queue()

    class Port:
        def emit(self, event):
            events.put(event)

    host = Host(Port())
    ctx = {"home": str(s.home), "cwd": str(s.ws)}
    host._pins.pin((s.home, "default"), None, s.sid)
    try:
        assert host.budget(ctx)["window"] is None
        shown = host.budget(ctx, 8000)
        assert (shown["window"], shown["source"], shown["budget"]) == (8000, "store override", 6000)
        report = host.status(ctx)
        assert report["budget"] == 6000 and "budget: 6000" in report["text"]
        assert host.evict(ctx, 7, "through 2") is None  # on a worker: an event says it
        done = next(e for e in iter(lambda: events.get(timeout=30), None) if e["kind"] == "evict")
        assert (done["job"], done["kind"], done["token"]) == (None, "evict", 7), done
        receipt = done["value"]["receipt"]
        assert "turns 1–2" in receipt and receipt.startswith("[[receipt default/")
        assert host.budget(ctx, "clear")["window"] is None
    finally:
        for app in host._apps.values():
            app.close()


@pytest.mark.parametrize("typed", ["²", "١٢٣٤٥", "8000.5"])
def test_the_host_budget_takes_a_window_in_ascii_digits_only(session, typed):
    s = session(window=None)
    s.close()

    class Port:
        def emit(self, event):
            pass

    host = Host(Port())
    ctx = {"home": str(s.home), "cwd": str(s.ws)}
    host._pins.pin((s.home, "default"), None, s.sid)
    try:
        with pytest.raises(UserError) as caught:
            host.budget(ctx, typed)
        assert str(caught.value) == (
            "budget set N: N must be a positive whole number of tokens, at most "
            f"9223372036854775807 (found {typed!r})"
        )
        assert host.budget(ctx, " 9000 ")["window"] == 9000
    finally:
        for app in host._apps.values():
            app.close()


# -- the one-pass total equals counting the arranged request -----------------------------

_ROLES = ["user", "assistant", "call", "tool", "note", "stub", "notice"]


@hs.composite
def _contexts(draw) -> list[Message]:
    """Any order of messages: blank texts, calls without results, results
    before their calls or without any, notes at the ends."""
    n = draw(hs.integers(0, 14))
    out = []
    for i in range(1, n + 1):
        role = draw(hs.sampled_from(_ROLES))
        text = draw(hs.sampled_from(["", " ", "\n", "words here", "more words", "x"]))
        payload: dict = {}
        if role == "call":
            payload = {"name": "eval", "input": {"code": text}}
        elif role == "tool":
            payload = {"call": draw(hs.one_of(hs.none(), hs.integers(1, n)))}
        out.append(Message(i, role, text, 1, payload))
    return draw(hs.permutations(out))


@pytest.fixture(scope="module")
def meter(tmp_path_factory):
    app = App.open(tmp_path_factory.mktemp("meter"), "default", None, environ={})
    yield budgets.Meter(
        app.config, registry.wire("anthropic"), derived.read(app.store, app.new_session("m")).views
    )
    app.close()


@settings(max_examples=300, deadline=None)
@given(messages=_contexts())
def test_the_one_pass_total_equals_counting_the_arranged_request(meter, messages):
    expected = meter.count(list(messages)).total
    assert meter.total(list(messages)) == expected
    assert meter.total(list(messages), cached=False) == expected


def test_status_words_agree_with_their_numbers(session):
    s = session(window=None)
    s.app.store.append(s.sid, "user", role="user", text="hi")
    from nodecode.views import status

    text = status.render(status.report(s.app.workspace, s.app.basis(strict=True), s.sid))
    assert " · 1 message · " in text, text
