"""Thinking models end to end: a turn against the loopback server with thinking
on, what goes back to the provider, what the log keeps, and what the person sees.

The loopback refuses a request that alters or drops the thinking a tool
round owes, with the API's text, so a turn that completes with every request
answered 200 is a turn whose thinking went back as received."""

from __future__ import annotations

import copy
import json

import pytest
from helpers import run_cli, write_config
from nodecode.agent.loop import Agent, TurnCallbacks
from nodecode.app import App
from nodecode.errors import ConfigError
from nodecode.loopback.server import DEEPSEEK_NEEDS_REASONING
from nodecode.providers.types import REDACTED_THINKING

ENABLED = {"type": "enabled", "budget_tokens": 1024}
THOUGHT = "I should read a.txt before answering."
TOOL_ROUND = [
    {"thinking": [THOUGHT], "text": "Reading.", "calls": [{"code": '(read-file "a.txt")'}]},
    {"text": "a.txt says alpha."},
]


class Seen(TurnCallbacks):
    def __init__(self):
        self.text, self.thinking = "", ""

    def on_text(self, chunk):
        self.text += chunk

    def on_thinking(self, chunk):
        self.thinking += chunk


@pytest.fixture
def make(loopback, tmp_path):
    apps = []

    def start(script, ptype="anthropic", thinking=None, server=None, **model):
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        (ws / "a.txt").write_text("alpha\n")
        srv = loopback(script, **(server or {}))
        entry = {"id": "loopback-model", "max_tokens": 4096, **model}
        if thinking is not None:
            entry["thinking"] = thinking
        home = write_config(tmp_path / "home", srv, ptype, models=[entry], auto_approve=True)
        app = App.open(home, "default", ws, environ={})
        apps.append(app)
        return app, srv, app.new_session()

    yield start
    for app in apps:
        app.close()


def statuses(srv):
    return [r.status for r in srv.model_requests]


def events_of(app, sid, kind):
    return [e for e in app.store.events(sid) if e.kind == kind]


def test_a_tool_round_sends_the_signed_thinking_back_first_exactly_as_received(make):
    app, srv, sid = make(TOOL_ROUND, thinking=ENABLED)
    seen = Seen()

    result = Agent(app, sid).ask("what does a.txt say?", seen)

    assert result.status == "done" and result.text == "a.txt says alpha."
    assert statuses(srv) == [200, 200]
    first, second = (r.body for r in srv.model_requests)
    assert first["thinking"] == ENABLED and second["thinking"] == ENABLED
    assert first.get("tool_choice", {"type": "auto"}) == {"type": "auto"}
    (logged,) = events_of(app, sid, "thinking")
    block = logged.payload["block"]
    assert block["type"] == "thinking" and block["thinking"] == THOUGHT and block["signature"]
    reply = second["messages"][1]
    assert reply["role"] == "assistant"
    assert [b["type"] for b in reply["content"]] == ["thinking", "text", "tool_use"]
    assert reply["content"][0] == block
    assert seen.thinking == THOUGHT and THOUGHT not in seen.text


def test_thinking_is_logged_as_its_own_message_and_its_tokens_in_the_usage(make):
    app, srv, sid = make(TOOL_ROUND, thinking=ENABLED)

    Agent(app, sid).ask("what does a.txt say?")

    events = app.store.events(sid)
    kinds = [e.kind for e in events]
    assert kinds[:5] == ["user", "request", "thinking", "assistant", "call"]
    thinking = events[2]
    assert thinking.role == "thinking" and thinking.text == THOUGHT
    assert events[1].payload["usage"]["thinking"] > 0


def test_redacted_thinking_goes_back_byte_for_byte_and_shows_as_a_placeholder(make):
    rounds = [{"thinking": [{"redacted": True}], "calls": [{"code": "(list-files)"}]}]
    app, srv, sid = make([*rounds, {"text": "done"}], thinking=ENABLED)
    seen = Seen()

    assert Agent(app, sid).ask("list", seen).status == "done"

    assert statuses(srv) == [200, 200]
    (logged,) = events_of(app, sid, "thinking")
    assert logged.text == REDACTED_THINKING
    assert logged.payload["block"]["type"] == "redacted_thinking"
    reply = srv.model_requests[1].body["messages"][1]
    assert reply["content"][0] == logged.payload["block"]
    assert REDACTED_THINKING in seen.thinking


def test_adaptive_thinking_sends_its_effort_as_output_config(make):
    app, srv, sid = make([{"text": "hi"}], thinking={"type": "adaptive", "effort": "medium"})

    Agent(app, sid).ask("hello")

    body = srv.model_requests[0].body
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "medium"}


def test_without_a_thinking_setting_anthropic_requests_ask_for_none(make):
    app, srv, sid = make([{"text": "hi"}])

    Agent(app, sid).ask("hello")

    assert "thinking" not in srv.model_requests[0].body


def strip_marks(value):
    if isinstance(value, dict):
        return {k: strip_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_marks(v) for v in value]
    return value


def test_a_finished_turns_thinking_stays_in_later_requests_so_the_prefix_is_byte_stable(make):
    app, srv, sid = make([*TOOL_ROUND, {"text": "nothing else."}], thinking=ENABLED)
    Agent(app, sid).ask("what does a.txt say?")
    Agent(app, sid).ask("anything else?")

    last_of_turn_1 = strip_marks(srv.model_requests[1].body["messages"])
    next_turn = strip_marks(srv.model_requests[2].body["messages"])
    assert statuses(srv) == [200, 200, 200]
    assert json.dumps(next_turn[: len(last_of_turn_1) - 1]) == json.dumps(
        last_of_turn_1[:-1]
    )  # the last message grows by the new ask, everything before is the same bytes
    assert next_turn[1]["content"][0]["type"] == "thinking"


def test_a_budget_at_or_over_max_tokens_fails_the_turn_with_one_line(make):
    app, srv, sid = make([{"text": "hi"}], thinking={"type": "enabled", "budget_tokens": 4096})

    result = Agent(app, sid).ask("hello")

    assert result.status == "failed" and result.user_error
    assert "budget_tokens" in result.error and "4096" in result.error
    assert "\n" not in result.error and srv.model_requests == []


@pytest.mark.parametrize(
    ("thinking", "found"),
    [
        ({"type": "sometimes"}, "'sometimes'"),
        ({"type": "enabled"}, "budget_tokens"),
        ({"type": "adaptive", "effort": "extreme"}, "'extreme'"),
        ("yes", "'yes'"),
    ],
)
def test_a_bad_thinking_setting_is_one_line_naming_it(make, thinking, found):
    """Checked when config.jsonc is read (by the wire format, through the schema):
    the ask stops before its turn begins."""
    app, srv, sid = make([{"text": "hi"}], thinking=thinking)

    with pytest.raises(ConfigError) as caught:
        Agent(app, sid).ask("hello")

    error = str(caught.value)
    assert "thinking" in error and found in error and "\n" not in error
    assert srv.model_requests == [] and app.store.events(sid) == []


# -- OpenAI-compatible ----------------------------------------------------------------


def test_openai_reasoning_with_send_back_goes_back_on_its_assistant_message(make):
    app, srv, sid = make(
        TOOL_ROUND, "openai", {"send_back": True}, server={"reasoning_required": True}
    )
    seen = Seen()

    assert Agent(app, sid).ask("what does a.txt say?", seen).status == "done"

    assert statuses(srv) == [200, 200]
    reply = next(m for m in srv.model_requests[1].body["messages"] if m.get("tool_calls"))
    assert reply["reasoning_content"] == THOUGHT and reply["content"] == "Reading."
    assert seen.thinking == THOUGHT


def test_openai_reasoning_is_shown_and_logged_but_not_sent_back_by_default(make):
    app, srv, sid = make(TOOL_ROUND, "openai")
    seen = Seen()

    assert Agent(app, sid).ask("what does a.txt say?", seen).status == "done"

    assert seen.thinking == THOUGHT
    (logged,) = events_of(app, sid, "thinking")
    assert logged.payload["block"] == {"reasoning_content": THOUGHT}
    sent = srv.model_requests[1].body["messages"]
    assert not any("reasoning_content" in m or "reasoning" in m for m in sent)


def test_a_server_that_needs_reasoning_back_refuses_the_default_with_its_own_text(make):
    app, srv, sid = make(TOOL_ROUND, "openai", server={"reasoning_required": True})

    result = Agent(app, sid).ask("what does a.txt say?")

    assert result.status == "failed" and DEEPSEEK_NEEDS_REASONING in result.error


def test_openai_reasoning_details_go_back_under_their_own_names(make):
    app, srv, sid = make(
        TOOL_ROUND,
        "openai",
        {"send_back": True},
        server={"reasoning_field": "reasoning"},
    )

    Agent(app, sid).ask("what does a.txt say?")

    reply = next(m for m in srv.model_requests[1].body["messages"] if m.get("tool_calls"))
    assert reply["reasoning"] == THOUGHT and "reasoning_content" not in reply


# -- the command line ----------------------------------------------------------------


def cli_home(tmp_path, srv, thinking):
    models = [{"id": "loopback-model", "max_tokens": 4096, "thinking": thinking}]
    return write_config(tmp_path / "home", srv, models=models)


def test_cli_shows_thinking_on_stderr_only_with_show_thinking(loopback, tmp_path, workspace):
    srv = loopback([{"thinking": [THOUGHT], "text": "hi"}, {"thinking": [THOUGHT], "text": "hi"}])
    home = cli_home(tmp_path, srv, ENABLED)
    run_cli("new", home=home)

    plain = run_cli("ask", "hello", home=home, cwd=workspace)
    shown = run_cli("ask", "--show-thinking", "hello", home=home, cwd=workspace)

    assert plain.returncode == shown.returncode == 0, shown.stderr
    assert THOUGHT not in plain.stdout + plain.stderr
    assert THOUGHT in shown.stderr and THOUGHT not in shown.stdout
    assert shown.stdout.strip() == "hi"


def test_a_config_change_during_a_turn_takes_effect_at_the_next_ask(loopback, tmp_path, workspace):
    home_config = tmp_path / "home" / "config.jsonc"
    sed = r"s/\"enabled\"/\"adaptive\"/; s/\"budget_tokens\": 1024/\"effort\": \"low\"/"
    edit = f"(shell \"sed -i '{sed}' {home_config}\")"
    srv = loopback(
        [
            {"thinking": [THOUGHT], "calls": [{"code": edit}]},
            {"text": "edited."},
            {"text": "next turn."},
        ]
    )
    home = cli_home(tmp_path, srv, ENABLED)
    run_cli("new", home=home)

    first = run_cli("ask", "--yes", "change it", home=home, cwd=workspace)
    assert first.returncode == 0, first.stderr
    changed = json.loads(home_config.read_text().split("\n", 1)[1])
    assert changed["providers"]["loopback"]["models"][0]["thinking"] == {
        "type": "adaptive",
        "effort": "low",
    }
    assert [r.body["thinking"] for r in srv.model_requests] == [ENABLED, ENABLED]

    second = run_cli("ask", "again", home=home, cwd=workspace)
    assert second.returncode == 0, second.stderr
    assert srv.model_requests[2].body["thinking"] == {"type": "adaptive"}


def test_a_copy_of_a_request_with_the_thinking_altered_is_refused_by_the_loopback(make):
    """The alteration the acceptance names: the loopback refuses it with the API's text."""
    app, srv, sid = make(TOOL_ROUND, thinking=ENABLED)
    Agent(app, sid).ask("what does a.txt say?")
    body = copy.deepcopy(srv.model_requests[1].body)
    body["messages"][1]["content"][0]["thinking"] = "something else"
    body["stream"] = False
    import httpx

    refused = httpx.post(srv.url + "/v1/messages", json=body, timeout=10)
    assert refused.status_code == 400
    assert "cannot be modified" in refused.json()["error"]["message"]
