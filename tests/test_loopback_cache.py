"""The loopback's simulation of Anthropic's prompt cache, one test per rule of
research/anthropic-cache-rules.md: real HTTP to a LoopbackServer whose Clock
the test advances, asserting the usage the server reported.

Positions are 0-based block indices; every body here has no tools and no
system, so position i is the i-th content part of the one user message.
"""

from __future__ import annotations

import json

import httpx
import pytest
from helpers import anthropic_provider
from nodecode.loopback import LoopbackServer
from nodecode.loopback.cache import CacheRules, Clock, cost, model_min_tokens

FIVE_MIN = {"type": "ephemeral"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}
MARKERS = {"5m": FIVE_MIN, "1h": ONE_HOUR}


def parts(n: int, marks: dict[int, str] | None = None, words: int = 30) -> list[dict]:
    """``n`` distinct text parts; ``marks`` puts a 5m or 1h breakpoint at positions."""
    out = []
    for i in range(n):
        part = {"type": "text", "text": f"block {i}: " + "lorem ipsum " * words}
        if i in (marks or {}):
            part["cache_control"] = MARKERS[(marks or {})[i]]
        out.append(part)
    return out


def body(content: list[dict], model: str = "claude-test", **extra: object) -> dict:
    return {
        "model": model,
        "max_tokens": 16,
        "stream": True,
        "messages": [{"role": "user", "content": content}],
        **extra,
    }


def usage(server: LoopbackServer, request: dict) -> dict:
    """The usage of the stream's ``message_start``, where Anthropic reports it."""
    events = []
    with httpx.stream("POST", server.url + "/v1/messages", json=request, timeout=10) as r:
        assert r.status_code == 200, r.read()
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    assert events[0]["type"] == "message_start"
    return events[0]["message"]["usage"]


def refused(server: LoopbackServer, request: dict) -> str:
    """The message of a 400 invalid_request_error."""
    r = httpx.post(server.url + "/v1/messages", json=request, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"
    return r.json()["error"]["message"]


def tokens(server: LoopbackServer, content: list[dict], model: str = "claude-test") -> int:
    """The server's count of a body with ``content`` (count_tokens, no cache)."""
    request = {"model": model, "messages": [{"role": "user", "content": content}]}
    return httpx.post(server.url + "/v1/messages/count_tokens", json=request).json()["input_tokens"]


def prefix(server: LoopbackServer, content: list[dict], position: int) -> int:
    """Tokens of the prefix ending at ``position`` (inclusive)."""
    return tokens(server, content[: position + 1])


def figures(u: dict) -> tuple[int, int, int]:
    """(read, written, uncached) as reported."""
    return u["cache_read_input_tokens"], u["cache_creation_input_tokens"], u["input_tokens"]


def split(u: dict) -> tuple[int, int]:
    """(5-minute writes, 1-hour writes) as reported."""
    c = u["cache_creation"]
    return c["ephemeral_5m_input_tokens"], c["ephemeral_1h_input_tokens"]


@pytest.fixture
def clock() -> Clock:
    return Clock(start=0.0)


@pytest.fixture
def server(clock: Clock):
    with LoopbackServer(clock=clock, cache_min_tokens=1) as s:
        yield s


# ---------------------------------------------------------------- writes and limits


def test_entries_are_written_only_at_breakpoints(server):
    content = parts(10, {9: "5m"})
    usage(server, body(content))
    shorter = parts(6, {5: "5m"})  # the same first 6 blocks, marked at 5 this time
    u = usage(server, body(shorter))
    assert figures(u) == (0, prefix(server, content, 5), 0)  # nothing was written at 5
    assert figures(usage(server, body(content))) == (tokens(server, content), 0, 0)


def test_more_than_four_breakpoints_is_a_400_with_anthropics_text(server):
    marks = {0: "1h", 2: "5m", 4: "5m", 6: "5m", 8: "5m"}
    message = refused(server, body(parts(9, marks)))
    assert message == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    assert server.requests[-1].status == 400
    assert usage(server, body(parts(9, {0: "1h", 2: "5m", 4: "5m", 8: "5m"})))


def test_a_one_hour_breakpoint_after_a_five_minute_one_is_a_400(server):
    message = refused(server, body(parts(6, {2: "5m", 5: "1h"})))
    assert message == (
        "Cache entries with a longer ttl must appear before shorter ones: "
        "found a cache_control with ttl '1h' after one with ttl '5m'."
    )
    u = usage(server, body(parts(6, {2: "1h", 5: "5m"})))  # the allowed order
    assert u["cache_creation_input_tokens"] > 0


def test_an_unknown_ttl_is_a_400_naming_what_was_expected(server):
    content = parts(3)
    content[2]["cache_control"] = {"type": "ephemeral", "ttl": "2h"}
    assert refused(server, body(content)) == (
        "cache_control.ttl: Input should be '5m' or '1h' (found '2h')."
    )


# ---------------------------------------------------------------- lookup


def test_the_lookback_is_20_positions_counting_the_breakpoint_itself(clock):
    """The doc's example: a breakpoint on block 35 finds an entry on 16, misses one on 15."""
    content = parts(36, {35: "5m"})
    for entry_at, expected in ((16, "hit"), (15, "miss")):
        with LoopbackServer(clock=clock, cache_min_tokens=1) as s:
            usage(s, body(parts(entry_at + 1, {entry_at: "5m"})))
            u = usage(s, body(content))
            read = prefix(s, content, entry_at) if expected == "hit" else 0
            assert figures(u) == (read, tokens(s, content) - read, 0), entry_at


def test_the_walk_stops_at_the_first_live_entry_found(server, clock):
    """Under the default ("found") reading only that entry is refreshed: the
    older one the walk did not reach expires on time."""
    content = parts(15, {14: "5m"})
    usage(server, body(parts(13, {10: "5m", 12: "5m"})))
    clock.advance(200)
    u = usage(server, body(content))
    assert figures(u)[0] == prefix(server, content, 12)
    clock.advance(200)  # t=400: 12 lives until 500, 10 died at 300
    assert figures(usage(server, body(parts(13, {12: "5m"}))))[0] == prefix(server, content, 12)
    assert figures(usage(server, body(parts(11, {10: "5m"})))) == (
        0,
        prefix(server, content, 10),
        0,
    )


# ---------------------------------------------------------------- expiry and refresh


@pytest.mark.parametrize(("ttl", "seconds"), [("5m", 300), ("1h", 3600)])
def test_an_entry_expires_its_ttl_after_its_write(server, clock, ttl, seconds):
    first, second = parts(4, {3: ttl}), parts(5, {4: ttl})[1:]  # two unrelated prompts
    usage(server, body(first))
    usage(server, body(second))
    clock.advance(seconds - 1)
    assert figures(usage(server, body(first)))[0] == tokens(server, first)
    clock.advance(1)  # the second was never read: it is gone at exactly its TTL
    u, n = usage(server, body(second)), tokens(server, second)
    assert figures(u) == (0, n, 0)
    assert split(u) == ((n, 0) if ttl == "5m" else (0, n))  # written again, same class


@pytest.mark.parametrize("refresh", ["found", "prefix"])
def test_a_read_refreshes_the_entry_it_found(clock, refresh):
    content = parts(4, {3: "5m"})
    with LoopbackServer(clock=clock, cache_min_tokens=1, cache_rules=CacheRules(refresh)) as s:
        total = tokens(s, content)
        usage(s, body(content))
        clock.advance(250)
        assert figures(usage(s, body(content))) == (total, 0, 0)  # refreshed until 550
        clock.advance(250)
        assert figures(usage(s, body(content))) == (total, 0, 0)  # t=500; until 800
        clock.advance(300)
        assert figures(usage(s, body(content))) == (0, total, 0)  # t=800: expired


@pytest.mark.parametrize(("refresh", "still_cached"), [("found", False), ("prefix", True)])
def test_the_two_refresh_readings_differ_on_entries_inside_the_read_prefix(
    clock, refresh, still_cached
):
    """A read of the prefix ending at 20 refreshes the entry at 10 on it only
    under the optimistic reading."""
    content = parts(26, {25: "5m"})
    with LoopbackServer(clock=clock, cache_min_tokens=1, cache_rules=CacheRules(refresh)) as s:
        usage(s, body(parts(21, {10: "5m", 20: "5m"})))
        clock.advance(200)
        assert figures(usage(s, body(content)))[0] == prefix(s, content, 20)
        clock.advance(200)  # t=400: the entry at 10 was written at 0
        u = usage(s, body(parts(11, {10: "5m"})))
        at_10 = prefix(s, content, 10)
        assert figures(u) == ((at_10, 0, 0) if still_cached else (0, at_10, 0))


def test_an_entry_keeps_the_ttl_class_it_was_written_with(server, clock):
    """A 1-hour breakpoint reading a live 5-minute entry refreshes it for 5 minutes."""
    five, one = parts(4, {3: "5m"}), parts(4, {3: "1h"})
    total = tokens(server, five)
    usage(server, body(five))
    clock.advance(100)
    u = usage(server, body(one))
    assert figures(u) == (total, 0, 0) and split(u) == (0, 0)  # no charge, no upgrade
    clock.advance(300)  # 300 s after that read: a 1-hour entry would still live
    u = usage(server, body(one))
    assert figures(u) == (0, total, 0) and split(u) == (0, total)


def test_a_breakpoint_inside_the_read_prefix_leaves_its_own_entry_free(server, clock):
    """Position 10 (1h) has no entry when the prefix ending at 20 is read: it
    gets a 1-hour entry of its own, and the request is billed only the read."""
    content = parts(21, {10: "1h", 20: "5m"})
    usage(server, body(parts(21, {20: "5m"})))
    clock.advance(10)
    u = usage(server, body(content))
    assert figures(u) == (tokens(server, content), 0, 0) and split(u) == (0, 0)
    clock.advance(3000)  # long after the 5-minute entries died
    u = usage(server, body(parts(11, {10: "1h"})))
    assert figures(u) == (prefix(server, content, 10), 0, 0)


# ---------------------------------------------------------------- per-model minimums


@pytest.mark.parametrize(
    ("model", "minimum"),
    [("claude-sonnet-4-5-20250929", 1024), ("claude-haiku-4-5", 4096), ("claude-opus-4-6", 4096)],
)
def test_a_prefix_under_the_models_minimum_is_not_cached_and_not_an_error(model, minimum):
    with LoopbackServer() as s:
        below = [{"type": "text", "text": "lorem " * (minimum - 20), "cache_control": FIVE_MIN}]
        above = [{"type": "text", "text": "lorem " * (minimum + 20), "cache_control": FIVE_MIN}]
        n_below, n_above = tokens(s, below, model), tokens(s, above, model)
        assert n_below < minimum <= n_above
        for _ in range(2):
            assert figures(usage(s, body(below, model))) == (0, 0, n_below)
        assert figures(usage(s, body(above, model))) == (0, n_above, 0)
        assert figures(usage(s, body(above, model))) == (n_above, 0, 0)


def test_cache_min_tokens_overrides_the_models_minimum():
    short = [{"type": "text", "text": "a short prompt", "cache_control": FIVE_MIN}]
    with LoopbackServer(cache_min_tokens=1) as s:
        n = tokens(s, short)
        assert figures(usage(s, body(short, "claude-haiku-4-5"))) == (0, n, 0)


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-sonnet-4-5", 1024),
        ("claude-sonnet-4-20250514", 1024),
        ("claude-opus-4-1-20250805", 1024),
        ("claude-opus-4-5-20251101", 4096),
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-3-5-haiku-20241022", 2048),
        ("claude-opus-4-7", 2048),
        ("claude-sonnet-4-6", 1024),
        ("claude-mythos-5", 512),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", 4096),  # Bedrock
        ("claude-opus-4-5@20251101", 4096),  # Vertex
        ("claude-test", 1024),  # unknown: the common minimum
    ],
)
def test_model_ids_map_onto_the_documented_minimums(model, minimum):
    assert model_min_tokens(model) == minimum


def test_entries_are_per_model(server):
    content = parts(4, {3: "5m"})
    usage(server, body(content, "claude-sonnet-4-5"))
    n = tokens(server, content)
    assert figures(usage(server, body(content, "claude-opus-4-1"))) == (0, n, 0)
    assert figures(usage(server, body(content, "claude-sonnet-4-5"))) == (n, 0, 0)


# ---------------------------------------------------------------- automatic caching


def test_automatic_caching_marks_the_last_block_and_takes_a_slot(server):
    content = parts(8, {1: "5m", 3: "5m", 5: "5m"})
    u = usage(server, body(content, cache_control=FIVE_MIN))
    assert figures(u) == (0, tokens(server, content), 0)
    assert figures(usage(server, body(parts(8)))) == (0, 0, tokens(server, content))
    assert figures(usage(server, body(parts(8, {7: "5m"}))))[0] == tokens(server, content)
    four = parts(8, {1: "5m", 3: "5m", 5: "5m", 6: "5m"})
    assert refused(server, body(four, cache_control=FIVE_MIN)) == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


def test_automatic_caching_with_its_own_ttl(server):
    content = parts(3)
    u = usage(server, body(content, cache_control=ONE_HOUR))
    assert split(u) == (0, tokens(server, content))


def test_automatic_caching_is_a_no_op_on_a_last_block_with_the_same_ttl(server, clock):
    content = parts(8, {2: "5m", 7: "5m"})
    with_auto = usage(server, body(content, cache_control=FIVE_MIN))
    assert figures(with_auto) == (0, tokens(server, content), 0)
    clock.advance(400)  # both entries expired: the same request again, without it
    assert usage(server, body(content)) == with_auto


def test_automatic_caching_with_a_different_ttl_than_the_last_block_is_a_400(server):
    content = parts(4, {3: "1h"})
    assert refused(server, body(content, cache_control=FIVE_MIN)) == (
        "The top-level cache_control ttl '5m' differs from the ttl '1h' of the "
        "cache_control already on the last block."
    )


def test_automatic_caching_with_four_explicit_breakpoints_is_a_400_even_on_the_last(server):
    """The doc's sentence is unconditional; the stricter reading only refuses more."""
    content = parts(8, {1: "5m", 3: "5m", 5: "5m", 7: "5m"})
    assert refused(server, body(content, cache_control=FIVE_MIN)) == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


# ---------------------------------------------------------------- billing and cost


MIXED = {5: "1h", 12: "1h", 20: "5m", 30: "5m"}


def _mixed(server: LoopbackServer, clock: Clock, send=None) -> tuple[list[dict], dict]:
    """A hit at 5, 1-hour breakpoints at 5 and 12, 5-minute ones at 20 and 30,
    three uncached blocks after the last: A, B, C = the tokens at 5, 12, 30.
    ``send`` sends the second request (default: streamed, message_start's usage)."""
    usage(server, body(parts(6, {5: "1h"})))
    clock.advance(60)
    content = parts(34, MIXED)
    return content, (send or usage)(server, body(content))


def test_billing_with_mixed_ttls_reads_a_writes_b_minus_a_for_1h_and_c_minus_b_for_5m(
    server, clock
):
    content, u = _mixed(server, clock)
    a, b, c = (prefix(server, content, i) for i in (5, 12, 30))
    total = tokens(server, content)
    assert figures(u) == (a, c - a, total - c)
    assert split(u) == (c - b, b - a)
    assert sum(split(u)) == u["cache_creation_input_tokens"]
    recorded = server.model_requests[-1].usage
    assert recorded == {
        "input": total - c, "output": recorded["output"], "cache_read": a,
        "cache_write": c - a, "cache_write_1h": b - a, "cache_write_5m": c - b,
    }  # fmt: skip


def test_billing_without_a_hit_writes_the_1h_part_from_zero(server):
    content = parts(12, {4: "1h", 8: "5m"})
    u = usage(server, body(content))
    b, c = prefix(server, content, 4), prefix(server, content, 8)
    assert figures(u) == (0, c, tokens(server, content) - c) and split(u) == (c - b, b)


def test_breakpoints_under_the_minimum_do_not_count_as_written(clock):
    content = parts(12, {0: "1h", 8: "5m"})
    with LoopbackServer() as counter:
        first, c = prefix(counter, content, 0), prefix(counter, content, 8)
    with LoopbackServer(clock=clock, cache_min_tokens=first + 1) as s:
        u = usage(s, body(content))
        assert split(u) == (c, 0)  # B = A = 0: the 1-hour breakpoint wrote nothing


def test_the_non_streamed_reply_reports_the_same_usage(server, clock):
    def unstreamed(s: LoopbackServer, request: dict) -> dict:
        r = httpx.post(s.url + "/v1/messages", json={**request, "stream": False}, timeout=10)
        return r.json()["usage"]

    _, streamed = _mixed(server, clock)
    with LoopbackServer(clock=clock, cache_min_tokens=1) as other:
        _, whole = _mixed(other, clock, unstreamed)
    fields = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    assert [whole[f] for f in fields] == [streamed[f] for f in fields]
    assert whole["cache_creation"] == streamed["cache_creation"]


def test_the_anthropic_provider_reads_cache_write_as_all_creation_tokens(server, clock):
    def through_provider(s: LoopbackServer, request: dict) -> dict:
        with anthropic_provider(s.url, "k") as provider:
            return provider.stream(request).usage

    content, got = _mixed(server, clock, through_provider)
    a, c = prefix(server, content, 5), prefix(server, content, 30)
    assert (got.cache_read, got.cache_write, got.input) == (a, c - a, tokens(server, content) - c)


def test_usage_scale_scales_every_part_and_the_split_still_sums():
    content = parts(34, MIXED)
    with LoopbackServer(cache_min_tokens=1) as plain:
        total = tokens(plain, content)
        unscaled = usage(plain, body(content))
    with LoopbackServer(cache_min_tokens=1, usage_scale=1.5) as s:
        u = usage(s, body(content))
    assert sum(figures(u)) == round(total * 1.5)
    assert sum(split(u)) == u["cache_creation_input_tokens"]
    assert split(u) == tuple(round(x * 1.5) for x in split(unscaled))


def test_cost_prices_each_part_in_base_input_units(server, clock):
    _, u = _mixed(server, clock)
    recorded = server.model_requests[-1].usage
    expected = (
        0.1 * recorded["cache_read"]
        + 2.0 * recorded["cache_write_1h"]
        + 1.25 * recorded["cache_write_5m"]
        + 1.0 * recorded["input"]
    )
    assert cost(recorded) == pytest.approx(expected)
    assert cost(u) == pytest.approx(expected)  # the wire's usage, as reported
    assert cost({"input": 100, "cache_read": 1000}) == pytest.approx(200.0)


def test_cost_refuses_a_write_it_cannot_price():
    with pytest.raises(ValueError, match="cache_write_1h and cache_write_5m"):
        cost({"input": 1, "cache_read": 0, "cache_write": 50})


# ---------------------------------------------------------------- clock and rules


def test_a_manual_clock_moves_only_when_advanced_and_the_default_is_real():
    manual = Clock(start=10.0)
    assert manual.now() == 10.0
    manual.advance(2.5)
    assert manual.now() == 12.5
    real = Clock()
    before = real.now()
    real.advance(100)
    assert real.now() >= before + 100


def test_an_unknown_refresh_reading_is_one_clear_error():
    with pytest.raises(ValueError, match=r"refresh must be 'found' or 'prefix' \(got 'always'\)"):
        CacheRules("always")
