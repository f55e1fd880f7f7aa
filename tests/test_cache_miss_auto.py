"""Why an automatic cache missed (design.md §The cache): OpenAI (chat completions and
the Responses API) and Gemini place no cache marks; after each request the next one
is expected to read the prompt it sent, as the provider documents its cache (from
its minimum, in its steps, for its lifetime), once the provider has shown in the
session that it caches. A shortfall is recorded with its cause.

Through the real CLI against the loopback, whose automatic prefix cache follows the
same documented rules; every figure is checked against a hand computation from the
usage the loopback reported."""

from __future__ import annotations

import re

import pytest
from helpers import ask, write_config
from nodecode.loopback.cache import Clock
from nodecode.loopback.prefix import PrefixCache
from test_cache_miss import check_figures, dropping_3_is_a_miss, last_request, miss_lines, setup

WIRES = ["openai", "openai-responses", "google"]
# OpenAI's documented steps: hits grow 128 tokens at a time past the minimum.
STEP = {"openai": 128, "openai-responses": 128, "google": 1}


def cached(prompt: int, step: int, minimum: int = 1) -> int:
    """What the provider's rules cache of a ``prompt``-token request, by hand."""
    return minimum + (prompt - minimum) // step * step if prompt >= minimum else 0


def two_asks(home, workspace, srv, ptype) -> int:
    """Two asks: the second reads the first's prompt; returns what the third should read."""
    ask(home, workspace, "first question")
    ask(home, workspace, "second question")
    first, second = (r.usage for r in srv.model_requests[-2:])
    assert second["cache_read"] >= cached(first["input"], STEP[ptype]) > 0
    assert miss_lines(home, workspace) == []
    assert "cache_miss" not in last_request(home, workspace)
    return cached(second["input"], STEP[ptype])  # its input counts the cached part too


@pytest.mark.parametrize("ptype", WIRES)
def test_an_edit_above_what_was_sent_is_a_miss_naming_the_message(home, workspace, loopback, ptype):
    srv = setup(home, loopback, ptype)
    dropping_3_is_a_miss(home, workspace, srv, two_asks(home, workspace, srv, ptype))


@pytest.mark.parametrize("ptype", ["openai", "google"])
def test_a_pause_past_the_documented_lifetime_is_a_miss_called_an_expiry(
    home, workspace, loopback, ptype
):
    clock = Clock()
    srv = setup(home, loopback, ptype, clock=clock)
    expected = two_asks(home, workspace, srv, ptype)
    clock.advance(400)  # the provider's five minutes are over…
    ask(home, workspace, "third question", NODECODE_CLOCK_OFFSET="400")  # …and ours

    assert srv.model_requests[-1].usage["cache_read"] == 0
    miss = check_figures(home, workspace, srv, expected)
    assert miss["cause"] == "expired"
    name = "OpenAI's automatic cache" if ptype == "openai" else "Gemini's implicit cache"
    assert re.fullmatch(
        rf"{name} keeps an entry about 5 minutes unused; this request came 4\d\d seconds "
        r"after the one before",
        miss["reason"],
    ), miss


def test_an_unexplained_shortfall_says_the_cache_is_best_effort(home, workspace, loopback):
    srv = setup(home, loopback, "openai-responses")
    expected = two_asks(home, workspace, srv, "openai-responses")
    srv.prefix = PrefixCache(1, srv.clock)  # another server answers: nothing cached there
    ask(home, workspace, "third question")

    miss = check_figures(home, workspace, srv, expected)
    assert (miss["cause"], miss["provider"]) == ("unknown", None)
    assert miss["reason"].startswith(
        "OpenAI's automatic cache held less than the request before sent (it is best effort"
    ), miss


def test_a_server_that_never_reports_a_cache_read_is_never_judged(home, workspace, loopback):
    # A compatible server without a cache (cache=False: every cache_read is 0).
    srv = setup(home, loopback, "openai", caches=False)
    for text in ("first question", "second question", "third question"):
        ask(home, workspace, text)
    assert [r.usage["cache_read"] for r in srv.model_requests] == [0, 0, 0]
    assert miss_lines(home, workspace) == []
    assert "cache_miss" not in last_request(home, workspace)


def test_a_prompt_below_the_documented_minimum_expects_nothing(home, workspace, loopback):
    # No cache_min_tokens in config: OpenAI's documented 1,024 tokens. The loopback
    # caches from 1 token, so it has shown it caches, but these prompts stay under
    # the minimum: nothing is expected of them, and a lost entry is no miss.
    srv = loopback([{"text": f"answer {i}"} for i in range(3)], cache_min_tokens=1)
    write_config(home, srv, "openai")
    ask(home, workspace, "first question")
    ask(home, workspace, "second question")
    assert srv.model_requests[-1].usage["cache_read"] > 0
    assert srv.model_requests[-1].usage["input"] < 1024
    srv.prefix = PrefixCache(1, srv.clock)
    ask(home, workspace, "third question")
    assert srv.model_requests[-1].usage["cache_read"] == 0
    assert miss_lines(home, workspace) == []
