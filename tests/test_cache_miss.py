"""Why a cache missed (design.md §The cache): after every request, what the
ledger expected it to read from cache (what the request before left cached, the
context buffer's mark) against the provider's ``cache_read``, recorded when short
with its reason: the causes nodecode sees itself (an edit above the mark, a
changed instructions file, a model switch, an expired entry), else the
provider's own (Anthropic's cache diagnostics, ``"cache_diagnostics": true``).

Everything runs through the real CLI against the loopback; the figures are
checked against a hand computation from the usage the loopback reported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from helpers import ask, run_cli, write_config
from nodecode.loopback.cache import CacheRules, Clock, PromptCache
from nodecode.loopback.diagnostics import BETA, Diagnoses

LONG_ANSWER = "the first answer, long enough to be worth caching " * 20
MODEL = [{"id": "loopback-model", "cache_min_tokens": 1}, {"id": "other-model"}]


def setup(
    home,
    loopback,
    ptype: str = "anthropic",
    rounds: int = 4,
    clock: Clock | None = None,
    caches: bool = True,
    **config,
):
    """A loopback speaking ``ptype`` that caches from one token (``caches``: whether
    it caches at all), a long first answer then ``rounds`` short ones; ``config``:
    more of the home's configuration."""
    srv = loopback(
        [{"text": LONG_ANSWER}] + [{"text": f"answer {i}"} for i in range(rounds)],
        cache_min_tokens=1,
        clock=clock,
        cache=caches,
    )
    models = [dict(m, cache_min_tokens=1) for m in MODEL]
    write_config(home, srv, ptype, models=models, **config)
    return srv


def prompt_total(usage: dict) -> int:
    """A request's whole prompt as the loopback reported it (Anthropic's three parts)."""
    return usage["input"] + usage["cache_read"] + usage["cache_write"]


def last_request(home, workspace) -> dict:
    done = run_cli("status", "--json", home=home, cwd=workspace)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["last_request"]


def miss_lines(home, workspace) -> list[str]:
    log = run_cli("recall-log", home=home, cwd=workspace)
    assert log.returncode == 0, log.stderr
    return [line for line in log.stdout.splitlines() if "cache_miss" in line]


def two_asks(home, workspace, srv, **env):
    """Two asks: the second reads everything the first left cached, no miss."""
    ask(home, workspace, "first question", **env)
    ask(home, workspace, "second question", **env)
    second = srv.model_requests[-1].usage
    assert second["cache_read"] == prompt_total(srv.model_requests[0].usage)
    assert miss_lines(home, workspace) == []
    assert "cache_miss" not in last_request(home, workspace)
    return prompt_total(second)  # what the third request should read


def check_figures(home, workspace, srv, expected: int) -> dict:
    """The recorded miss against the hand computation from the loopback's usage."""
    read = srv.model_requests[-1].usage["cache_read"]
    assert read < expected
    miss = last_request(home, workspace)["cache_miss"]
    assert (miss["expected"], miss["read"], miss["missed"]) == (expected, read, expected - read)
    lines = miss_lines(home, workspace)
    assert len(lines) == 1, lines
    assert f"cache miss: expected {expected} tokens from cache, read {read}: " in lines[0]
    return miss


def test_an_edit_above_the_mark_is_a_miss_naming_the_message(home, workspace, loopback):
    srv = setup(home, loopback)
    dropping_3_is_a_miss(home, workspace, srv, two_asks(home, workspace, srv))


def dropping_3_is_a_miss(home, workspace, srv, expected: int) -> None:
    """Message 3 dropped, then an ask: a miss of ``expected`` naming it, in the log
    and in ``nodecode status``."""
    drop = run_cli("eval", "(context :drop ((3 . 3)))", home=home, cwd=workspace)
    assert drop.returncode == 0, drop.stderr
    ask(home, workspace, "third question")

    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "edit"
    assert miss["reason"].endswith("message 3 is no longer in the context"), miss
    status = run_cli("status", home=home, cwd=workspace).stdout
    assert f"cache miss: expected {expected} tokens from cache" in status, status
    assert "message 3 is no longer in the context" in status


def test_a_changed_instructions_file_is_a_miss_naming_the_file(home, workspace, loopback):
    srv = setup(home, loopback)
    home.mkdir(parents=True, exist_ok=True)
    (home / "AGENTS.md").write_text("be brief\n")
    expected = two_asks(home, workspace, srv)
    (home / "AGENTS.md").write_text("be brief, and run the tests\n")
    ask(home, workspace, "third question")

    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "instructions"
    assert re.fullmatch(r"the instructions file \S*AGENTS\.md changed", miss["reason"]), miss


def test_a_model_switch_is_a_miss_naming_both_models(home, workspace, loopback):
    srv = setup(home, loopback)
    expected = two_asks(home, workspace, srv)
    ask(home, workspace, "third question", NODECODE_MODEL="other-model")

    assert srv.model_requests[-1].body["model"] == "other-model"
    assert srv.model_requests[-1].usage["cache_read"] == 0  # entries are per model
    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "model"
    assert miss["reason"] == (
        "the model changed from loopback/loopback-model to loopback/other-model"
    )


def test_an_expired_entry_is_a_miss_the_ledger_names_by_its_lifetime(home, workspace, loopback):
    clock = Clock()
    srv = setup(home, loopback, clock=clock, cache="5m")
    expected = two_asks(home, workspace, srv)
    # The cache mark knows the lifetime too: 400 s on, it promises nothing.
    later = run_cli(
        "status", "--json", home=home, cwd=workspace, env={"NODECODE_CLOCK_OFFSET": "400"}
    )
    assert json.loads(later.stdout)["cache"]["through"] is None
    assert (
        json.loads(run_cli("status", "--json", home=home, cwd=workspace).stdout)["cache"]["through"]
        == 4
    )
    clock.advance(400)  # the provider's five minutes are over…
    ask(home, workspace, "third question", NODECODE_CLOCK_OFFSET="400")  # …and ours

    assert srv.model_requests[-1].usage["cache_read"] == 0
    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "expired"
    assert re.fullmatch(
        r"the 5-minute cache entry through message \d+ expired \d+ seconds before this request",
        miss["reason"],
    ), miss


def test_the_same_pause_within_the_lifetime_reads_everything(home, workspace, loopback):
    clock = Clock()
    srv = setup(home, loopback, clock=clock, cache="5m")
    two_asks(home, workspace, srv)
    clock.advance(200)
    ask(home, workspace, "third question", NODECODE_CLOCK_OFFSET="200")
    assert srv.model_requests[-1].usage["cache_read"] == prompt_total(srv.model_requests[1].usage)
    assert miss_lines(home, workspace) == []


def test_diagnostics_send_the_beta_and_the_previous_id_and_record_the_providers_reason(
    home, workspace, loopback
):
    srv = setup(home, loopback, cache_diagnostics=True)
    expected = two_asks(home, workspace, srv)
    drop = run_cli("eval", "(context :drop ((3 . 3)))", home=home, cwd=workspace)
    assert drop.returncode == 0, drop.stderr
    ask(home, workspace, "third question")

    got = srv.model_requests
    assert [r.headers.get("anthropic-beta") for r in got] == [BETA] * 3
    assert [r.body["diagnostics"] for r in got] == [
        {"previous_message_id": None},
        {"previous_message_id": "msg_loopback1"},
        {"previous_message_id": "msg_loopback2"},
    ]
    # The provider's figure by hand: the second request's tokens from the first block
    # that differs (the dropped answer, right after the first question) on.
    second = got[1].body
    kept = {k: v for k, v in second.items() if k not in ("stream", "diagnostics")}
    before = httpx.post(
        srv.url + "/v1/messages/count_tokens", json={**kept, "messages": second["messages"][:1]}
    ).json()["input_tokens"]
    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "edit"
    assert miss["provider"] == {"type": "messages_changed", "missed": expected - before}
    assert last_request(home, workspace)["diagnostics"] == miss["provider"]
    assert "the provider says messages_changed" in miss_lines(home, workspace)[0]


def test_a_miss_nodecode_cannot_explain_takes_the_providers_reason(home, workspace, loopback):
    srv = setup(home, loopback, cache_diagnostics=True)
    expected = two_asks(home, workspace, srv)
    # The provider loses its cache and its fingerprints (another key, a restart).
    srv.cache = PromptCache(CacheRules(min_tokens=1), srv.clock)
    srv.diagnoses = Diagnoses()
    ask(home, workspace, "third question")

    assert srv.model_requests[-1].usage["cache_read"] == 0
    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "unknown"
    assert miss["provider"] == {"type": "previous_message_not_found", "missed": None}
    assert miss["reason"] == (
        "the provider says the previous response is not known to it (previous_message_not_found)"
    )


def test_without_diagnostics_an_unexplained_miss_says_the_provider_held_less(
    home, workspace, loopback
):
    srv = setup(home, loopback)
    expected = two_asks(home, workspace, srv)
    srv.cache = PromptCache(CacheRules(min_tokens=1), srv.clock)
    ask(home, workspace, "third question")

    assert all("anthropic-beta" not in r.headers for r in srv.model_requests)
    assert all("diagnostics" not in r.body for r in srv.model_requests)
    miss = check_figures(home, workspace, srv, expected)
    assert (miss["cause"], miss["provider"]) == ("unknown", None)
    assert miss["reason"].startswith("the provider held less than the ledger believed")


@pytest.mark.parametrize("value", ["yes", 1])
def test_cache_diagnostics_takes_true_or_false(home, workspace, loopback, value):
    srv = setup(home, loopback, cache_diagnostics=value)
    done = run_cli("ask", "hi", home=home, cwd=workspace)
    assert done.returncode == 1
    assert "cache_diagnostics" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert srv.model_requests == []


def test_with_diagnostics_a_changed_instructions_file_is_both_ours_and_system_changed(
    home, workspace, loopback
):
    srv = setup(home, loopback, cache_diagnostics=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "AGENTS.md").write_text("be brief\n")
    expected = two_asks(home, workspace, srv)
    (home / "AGENTS.md").write_text("be brief, and run the tests\n")
    ask(home, workspace, "third question")

    miss = check_figures(home, workspace, srv, expected)
    tools = httpx.post(
        srv.url + "/v1/messages/count_tokens",
        json={
            "model": "loopback-model",
            "tools": srv.model_requests[1].body["tools"],
            "messages": [],
        },
    ).json()["input_tokens"]
    assert miss["cause"] == "instructions"
    assert miss["provider"] == {"type": "system_changed", "missed": expected - tools}


def test_a_rewritten_message_in_context_txt_is_named_rewritten(home, workspace, loopback):
    srv = setup(home, loopback)
    expected = two_asks(home, workspace, srv)
    exported = run_cli("context", home=home, cwd=workspace)
    assert exported.returncode == 0, exported.stderr
    path = Path(exported.stdout.strip())
    text = path.read_text()
    assert LONG_ANSWER.strip() in text
    path.write_text(text.replace(LONG_ANSWER.strip(), "the first answer, in short"))
    ask(home, workspace, "third question")

    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "edit"
    assert miss["reason"].endswith("message 3 was rewritten"), miss
