"""The loopback provider server, driven over real HTTP with httpx."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from nodecode.loopback import EXHAUSTED_TEXT, LoopbackServer

BIG = "alpha beta gamma delta " * 400  # ≈1,600 tokens: above the cache minimum
CC = {"type": "ephemeral"}


def anthropic_body(messages: list, **extra: object) -> dict:
    return {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": True,
        "messages": messages,
        **extra,
    }


def openai_body(messages: list, **extra: object) -> dict:
    return {"model": "gpt-test", "stream": True, "messages": messages, **extra}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def sse(url: str, body: dict, timeout: float = 10.0) -> list[tuple[str | None, str]]:
    """POST and parse the SSE reply into (event name, data) pairs."""
    events, name = [], None
    with httpx.stream("POST", url, json=body, timeout=timeout) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                events.append((name, line[5:].strip()))
                name = None
    return events


def anthropic_events(server: LoopbackServer, body: dict) -> list[dict]:
    return [json.loads(data) for _, data in sse(server.url + "/v1/messages", body)]


def openai_chunks(server: LoopbackServer, body: dict) -> list:
    datas = [data for _, data in sse(server.url + "/v1/chat/completions", body)]
    return [d if d == "[DONE]" else json.loads(d) for d in datas]


def text_of(events: list[dict]) -> list[str]:
    return [
        e["delta"]["text"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    ]


def start_usage(events: list[dict]) -> dict:
    return events[0]["message"]["usage"]


def count(server: LoopbackServer, body: dict) -> int:
    r = httpx.post(server.url + "/v1/messages/count_tokens", json=body)
    return r.json()["input_tokens"]


# ---------------------------------------------------------------- Anthropic


def test_anthropic_text_round_streams_in_several_deltas_and_ends_with_message_stop():
    with LoopbackServer([{"text": "The answer is forty two."}]) as s:
        events = anthropic_events(s, anthropic_body([user("question")]))
    deltas = text_of(events)
    assert len(deltas) >= 2 and "".join(deltas) == "The answer is forty two."
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_tool_round_streams_each_call_with_its_input_in_fragments():
    script = [
        {
            "text": "Reading.",
            "calls": [{"code": '(read-file "a.txt")'}, {"name": "other", "input": {"x": [1, 2]}}],
        }
    ]
    with LoopbackServer(script) as s:
        events = anthropic_events(s, anthropic_body([user("go")]))
    starts = [
        e["content_block"]
        for e in events
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
    ]
    assert [(b["id"], b["name"]) for b in starts] == [("toolu_lb1", "eval"), ("toolu_lb2", "other")]
    for index, expected in ((1, {"code": '(read-file "a.txt")'}), (2, {"x": [1, 2]})):
        parts = [
            e["delta"]["partial_json"]
            for e in events
            if e["type"] == "content_block_delta" and e["index"] == index
        ]
        assert len(parts) >= 3 and json.loads("".join(parts)) == expected
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_non_streaming_request_gets_a_message_json():
    with LoopbackServer([{"text": "hi there", "calls": [{"code": "(x)"}]}]) as s:
        r = httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")], stream=False))
    message = r.json()
    assert message["type"] == "message" and message["stop_reason"] == "tool_use"
    assert message["content"] == [
        {"type": "text", "text": "hi there"},
        {"type": "tool_use", "id": "toolu_lb1", "name": "eval", "input": {"code": "(x)"}},
    ]


def test_exhausted_script_replies_with_a_notice():
    with LoopbackServer([]) as s:
        events = anthropic_events(s, anthropic_body([user("q")]))
    assert "".join(text_of(events)) == EXHAUSTED_TEXT


def test_rounds_are_shared_across_endpoints_and_can_be_added():
    with LoopbackServer([{"text": "one"}]) as s:
        s.add_rounds([{"text": "two"}])
        first = anthropic_events(s, anthropic_body([user("q")]))
        second = openai_chunks(s, openai_body([user("q")]))
    assert "".join(text_of(first)) == "one"
    assert second[1]["choices"][0]["delta"]["content"] == "two"


def test_a_match_round_is_used_only_when_the_last_user_text_contains_it():
    with LoopbackServer([{"text": "for hello", "match": "hello"}, {"text": "plain"}]) as s:
        plain = anthropic_events(s, anthropic_body([user("something else")]))
        hello = anthropic_events(s, anthropic_body([user("say hello")]))
    assert "".join(text_of(plain)) == "plain"
    assert "".join(text_of(hello)) == "for hello"


def test_a_match_ask_round_follows_its_ask_past_a_later_notice():
    rounds = [
        {"text": "for median", "match_ask": "median"},
        {"text": "for the bug", "match_ask": "bug"},
    ]
    with LoopbackServer(rounds) as s:
        body = anthropic_body([user("fix the bug"), user("[context at 87% of the budget]")])
        bug = anthropic_events(s, body)
        other = anthropic_events(s, anthropic_body([user("hello")]))
    assert "".join(text_of(bug)) == "for the bug"  # the median round stays for its ask
    assert "".join(text_of(other)) == EXHAUSTED_TEXT
    assert s.rounds_left == 1


def test_a_match_ask_round_matches_only_the_ask_of_its_own_turn():
    rounds = [{"text": "for the bug", "match_ask": "bug"}, {"text": "anything", "keep": True}]
    called = {"role": "assistant", "content": [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "eval", "input": {"code": "(x)"}},
    ]}  # fmt: skip
    result = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"},
        {"type": "text", "text": "[context at 87% of the budget]"},
    ]}  # fmt: skip
    # The turn stopped at max_rounds: its result, the notice and the next ask in one message.
    stopped = {"role": "user", "content": [
        *result["content"],
        {"type": "text", "text": "[the turn stopped after 1 rounds, the configured max_rounds]"},
        {"type": "text", "text": "what is calc.py?"},
    ]}  # fmt: skip
    with LoopbackServer(rounds) as s:
        other = anthropic_events(s, anthropic_body([user("fix the bug"), called, stopped]))
        ended = [user("fix the bug"), {"role": "assistant", "content": "done"}]
        other_openai = openai_chunks(s, openai_body([*ended, user("what is calc.py?")]))
        bug = anthropic_events(s, anthropic_body([user("fix the bug"), called, result]))
        again = anthropic_events(s, anthropic_body([user("hello")]))
    assert "".join(text_of(other)) == "anything"  # an earlier turn's ask matches nothing
    assert other_openai[1]["choices"][0]["delta"]["content"] == "anything"
    assert "".join(text_of(bug)) == "for the bug"  # past the tool round and its notice
    assert "".join(text_of(again)) == "anything"  # a kept round stays
    assert s.rounds_left == 1


def test_script_file_is_jsonl_with_blank_and_comment_lines_ignored(tmp_path):
    path = tmp_path / "script.jsonl"
    path.write_text('// the demo\n\n{"text": "first"}\n  \n{"calls": [{"code": "(ls)"}]}\n')
    with LoopbackServer(path) as s:
        assert s.rounds_left == 2
        first = anthropic_events(s, anthropic_body([user("q")]))
    assert "".join(text_of(first)) == "first"


def test_a_bad_round_is_named_in_the_error():
    with pytest.raises(ValueError, match="round 2"):
        LoopbackServer([{"text": "ok"}, {"calls": [{"nope": 1}]}])


def test_a_round_key_the_loopback_does_not_know_is_refused_by_name():
    # A misspelt match_ask would otherwise answer whatever is asked.
    with pytest.raises(ValueError, match=r"round 2: unknown key 'match_any' \(a round has text,"):
        LoopbackServer([{"text": "ok"}, {"match_any": "alpha", "text": "a"}])


def test_scripted_chunks_are_the_text_deltas_of_both_formats():
    pieces = ["a sec", "ret sp", "lit"]
    with LoopbackServer([{"chunks": pieces}, {"chunks": pieces}]) as s:
        events = anthropic_events(s, anthropic_body([user("q")]))
        chunks = openai_chunks(s, openai_body([user("q")]))
    assert text_of(events) == pieces
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:-2]] == pieces
    with pytest.raises(ValueError, match="'chunks' must be a list of strings"):
        LoopbackServer([{"chunks": "whole"}])


def test_a_lone_surrogate_in_a_round_goes_on_the_wire_as_a_json_escape():
    rnd = {"thinking": ["t \udfff"], "text": "a \ud800", "calls": [{"name": "eval",
           "input": {"code": "\udc00"}}]}  # fmt: skip
    with LoopbackServer([rnd, rnd, rnd, rnd]) as s:
        raw = [
            httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")])),
            httpx.post(s.url + "/v1/chat/completions", json=openai_body([user("q")])),
        ]
        events = anthropic_events(s, anthropic_body([user("q")]))
        chunks = openai_chunks(s, openai_body([user("q")]))
    for r in raw:
        body = r.content.decode("utf-8")  # valid UTF-8: no surrogate is sent raw
        assert r.status_code == 200 and "\\ud800" in body and "\\udfff" in body
    assert "".join(text_of(events)) == "a \ud800"  # what a JSON parser reads
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    tool_json = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    fragments = [
        call["function"]["arguments"]
        for c in chunks[:-1]
        for choice in c["choices"]
        for call in choice["delta"].get("tool_calls") or []
    ]
    for text in (tool_json, "".join(fragments)):  # the input's JSON text holds the escape
        assert "\\udc00" in text and json.loads(text) == {"code": "\udc00"}


# ---------------------------------------------------------------- OpenAI


def test_openai_text_round_streams_deltas_then_the_usage_chunk_and_done():
    with LoopbackServer([{"text": "Hello there, friend."}]) as s:
        chunks = openai_chunks(s, openai_body([user("q")], stream_options={"include_usage": True}))
    assert chunks[-1] == "[DONE]"
    usage_chunk, finish = chunks[-2], chunks[-3]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["prompt_tokens"] > 0
    assert usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert finish["choices"][0]["finish_reason"] == "stop"
    texts = [c["choices"][0]["delta"].get("content") for c in chunks[1:-3]]
    assert len(texts) >= 2 and "".join(texts) == "Hello there, friend."
    assert all(c["usage"] is None for c in chunks[:-2])


def test_openai_tool_round_streams_the_call_id_name_and_argument_fragments():
    with LoopbackServer([{"calls": [{"name": "eval", "input": {"code": "(ls)"}}]}]) as s:
        chunks = openai_chunks(s, openai_body([user("q")]))
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks[:-1]
        if "tool_calls" in c["choices"][0]["delta"]
    ]
    assert calls[0]["id"] == "call_lb1" and calls[0]["function"]["name"] == "eval"
    fragments = [c["function"]["arguments"] for c in calls]
    assert len(fragments) >= 3 and json.loads("".join(fragments)) == {"code": "(ls)"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1] == "[DONE]" and "usage" not in chunks[-2]


def test_openai_non_streaming_request_gets_a_completion_json():
    with LoopbackServer([{"text": "yo", "calls": [{"code": "(ls)"}]}]) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=openai_body([user("q")], stream=False))
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "yo"
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {
        "code": "(ls)"
    }


# ---------------------------------------------------------------- records, counting, window


def test_every_request_is_recorded_with_body_headers_status_and_usage():
    body = anthropic_body([user("q")])
    with LoopbackServer([{"text": "a"}]) as s:
        anthropic_events(s, body)
        httpx.get(s.url + "/health")
    first, health = s.requests
    assert (first.path, first.status, first.body) == ("/v1/messages", 200, body)
    assert first.headers["content-type"] == "application/json"
    assert first.usage["input"] > 0 and first.usage["output"] >= 1
    assert (health.path, health.status) == ("/health", 200)
    assert s.model_requests == [first]


def test_count_tokens_matches_the_reported_input():
    body = anthropic_body([user("count me please")], system="be brief")
    with LoopbackServer([{"text": "a"}]) as s:
        n = count(s, body)
        events = anthropic_events(s, body)
    assert n == start_usage(events)["input_tokens"] > 0


def test_anthropic_window_overflow_is_the_exact_error_and_takes_no_round():
    body = anthropic_body([user(BIG)])
    with LoopbackServer([{"text": "kept"}], window=1000) as s:
        n = count(s, body)
        r = httpx.post(s.url + "/v1/messages", json=body)
        after = anthropic_events(s, anthropic_body([user("small")]))
    assert r.status_code == 400
    assert r.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {n} tokens > 1000 maximum",
        },
        "request_id": "req_loopback",
    }
    assert "".join(text_of(after)) == "kept"


def test_openai_window_overflow_is_the_exact_error_and_takes_no_round():
    with LoopbackServer([{"text": "kept"}], window=1000) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=openai_body([user(BIG)]))
        after = openai_chunks(s, openai_body([user("small")]))
    assert r.status_code == 400
    error = r.json()["error"]
    n = int(error["message"].split("resulted in ")[1].split(" ")[0])
    assert n > 1000
    assert error == {
        "message": "This model's maximum context length is 1000 tokens. However, your messages "
        f"resulted in {n} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    assert after[1]["choices"][0]["delta"]["content"] == "kept"


def test_usage_scale_multiplies_reported_input_and_keeps_cache_parts_integral():
    body = anthropic_body(
        [{"role": "user", "content": [{"type": "text", "text": BIG, "cache_control": CC}]}]
    )
    with LoopbackServer() as plain:
        n = count(plain, body)
    with LoopbackServer(usage_scale=1.5) as s:
        assert count(s, body) == round(n * 1.5)
        first = start_usage(anthropic_events(s, body))
        chunks = openai_chunks(s, openai_body([user("q")], stream_options={"include_usage": True}))
    parts = (
        first["input_tokens"]
        + first["cache_creation_input_tokens"]
        + first["cache_read_input_tokens"]
    )
    assert parts == round(n * 1.5) and first["cache_creation_input_tokens"] > 0
    with LoopbackServer() as plain:
        unscaled = openai_chunks(
            plain, openai_body([user("q")], stream_options={"include_usage": True})
        )
    assert chunks[-2]["usage"]["prompt_tokens"] == round(
        unscaled[-2]["usage"]["prompt_tokens"] * 1.5
    )


# ---------------------------------------------------------------- the simulated cache


def marked(text: str) -> dict:
    return {"type": "text", "text": text, "cache_control": CC}


def plain_text(text: str) -> dict:
    return {"type": "text", "text": text}


def test_a_breakpoint_writes_then_an_identical_request_reads_it_all():
    body = anthropic_body([{"role": "user", "content": [marked(BIG)]}])
    with LoopbackServer() as s:
        total = count(s, body)
        first = start_usage(anthropic_events(s, body))
        second = start_usage(anthropic_events(s, body))
    assert (
        first["cache_read_input_tokens"],
        first["cache_creation_input_tokens"],
        first["input_tokens"],
    ) == (0, total, 0)
    assert (
        second["cache_read_input_tokens"],
        second["cache_creation_input_tokens"],
        second["input_tokens"],
    ) == (total, 0, 0)
    recorded = s.requests[-1].usage
    assert (recorded["input"], recorded["cache_read"], recorded["cache_write"]) == (0, total, 0)


def test_an_appended_request_reads_the_previous_prefix_and_writes_the_rest():
    first_msgs = [{"role": "user", "content": [marked(BIG)]}]
    appended = [
        {"role": "user", "content": [marked(BIG)]},
        {"role": "assistant", "content": [plain_text("noted")]},
        {"role": "user", "content": [marked("and now something more")]},
    ]
    with LoopbackServer() as s:
        before = count(s, anthropic_body(first_msgs))
        after = count(s, anthropic_body(appended))
        anthropic_events(s, anthropic_body(first_msgs))
        usage = start_usage(anthropic_events(s, anthropic_body(appended)))
    assert usage["cache_read_input_tokens"] == before
    assert usage["cache_creation_input_tokens"] == after - before
    assert usage["input_tokens"] == 0


def test_a_breakpoint_more_than_20_blocks_past_the_cached_prefix_misses():
    first = [{"role": "user", "content": [marked(BIG)]}]
    parts = [plain_text(BIG)] + [plain_text(f"part {i}") for i in range(24)]
    parts[-1] = marked("part 23")
    with LoopbackServer() as s:
        anthropic_events(s, anthropic_body(first))
        usage = start_usage(
            anthropic_events(s, anthropic_body([{"role": "user", "content": parts}]))
        )
    assert usage["cache_read_input_tokens"] == 0 and usage["cache_creation_input_tokens"] > 0


def test_prefixes_under_the_minimum_are_neither_written_nor_read():
    body = anthropic_body([{"role": "user", "content": [marked("short")]}])
    with LoopbackServer() as s:
        total = count(s, body)
        usages = [start_usage(anthropic_events(s, body)) for _ in range(2)]
    for usage in usages:
        assert (
            usage["cache_read_input_tokens"],
            usage["cache_creation_input_tokens"],
            usage["input_tokens"],
        ) == (0, 0, total)


def test_top_level_cache_control_caches_the_whole_prompt_automatically():
    body = anthropic_body([user(BIG)], cache_control=CC)
    with LoopbackServer() as s:
        total = count(s, body)
        anthropic_events(s, body)
        usage = start_usage(anthropic_events(s, body))
    assert usage["cache_read_input_tokens"] == total


def test_cache_disabled_reports_everything_as_input():
    body = anthropic_body([{"role": "user", "content": [marked(BIG)]}])
    with LoopbackServer(cache=False) as s:
        total = count(s, body)
        anthropic_events(s, body)
        usage = start_usage(anthropic_events(s, body))
    assert (usage["cache_read_input_tokens"], usage["input_tokens"]) == (0, total)


def test_five_breakpoints_are_refused_with_anthropics_error():
    content = [marked(f"block {i}") for i in range(5)]
    with LoopbackServer([{"text": "kept"}]) as s:
        r = httpx.post(
            s.url + "/v1/messages", json=anthropic_body([{"role": "user", "content": content}])
        )
        assert s.rounds_left == 1
    assert r.status_code == 400
    assert r.json()["error"] == {
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    }


# ---------------------------------------------------------------- faults


@pytest.mark.parametrize(
    ("kind", "status", "error_type"),
    [("429", 429, "rate_limit_error"), ("529", 529, "overloaded_error"), ("500", 500, "api_error")],
)
def test_status_faults_answer_anthropic_errors_and_take_no_round(kind, status, error_type):
    faults = [{"at": 1, "kind": kind, "retry_after": 0.2}]
    with LoopbackServer([{"text": "after"}], faults=faults) as s:
        r = httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")]))
        after = anthropic_events(s, anthropic_body([user("q")]))
    assert r.status_code == status and r.json()["error"]["type"] == error_type
    assert r.headers["retry-after"] == "0.2"
    assert "".join(text_of(after)) == "after"
    assert [q.status for q in s.requests] == [status, 200]


def test_overloaded_fault_body_is_exactly_anthropics():
    with LoopbackServer(faults=[{"at": 1, "kind": "529"}]) as s:
        r = httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")]))
    assert "retry-after" not in r.headers
    assert r.json() == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_openai_rate_limit_fault_has_openais_shape():
    with LoopbackServer(faults=[{"at": 1, "kind": "429", "retry_after": 1}]) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=openai_body([user("q")]))
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"


def test_faults_count_every_model_request_and_can_be_added_at_runtime():
    with LoopbackServer([{"text": "a"}, {"text": "b"}], faults=[{"at": 2, "kind": "500"}]) as s:
        assert (
            httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")])).status_code == 200
        )
        assert (
            httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")])).status_code == 500
        )
        s.add_fault({"kind": "529"})
        assert (
            httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")])).status_code == 529
        )
        assert (
            httpx.post(s.url + "/v1/messages", json=anthropic_body([user("q")])).status_code == 200
        )
        assert s.rounds_left == 0


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions"])
def test_a_dropped_stream_ends_abruptly_without_its_terminal_event(path):
    body = anthropic_body([user("q")]) if "messages" in path else openai_body([user("q")])
    received = []
    with LoopbackServer(
        [{"text": "one two three four five six"}], faults=[{"at": 1, "kind": "drop"}]
    ) as s:
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", s.url + path, json=body) as r,
        ):
            assert r.status_code == 200
            for line in r.iter_lines():
                received.append(line)
        assert s.rounds_left == 1
    assert any(line.startswith("data:") for line in received)
    assert not any("message_stop" in line or "[DONE]" in line for line in received)


def test_a_stalled_stream_delivers_its_first_events_then_goes_silent():
    with LoopbackServer(
        [{"text": "one two three four"}], faults=[{"at": 1, "kind": "stall", "seconds": 30}]
    ) as s:
        received = []
        timeout = httpx.Timeout(10.0, read=0.5)
        with (
            pytest.raises(httpx.ReadTimeout),
            httpx.stream(
                "POST", s.url + "/v1/messages", json=anthropic_body([user("q")]), timeout=timeout
            ) as r,
        ):
            for line in r.iter_lines():
                received.append(line)
    # Each event is flushed as written: the events before the stall arrived.
    assert "event: message_start" in received
    assert not any("message_stop" in line for line in received)


def test_anthropic_sse_error_fault_sends_an_overloaded_error_event_after_200():
    with LoopbackServer([{"text": "one two three"}], faults=[{"at": 1, "kind": "sse_error"}]) as s:
        events = sse(s.url + "/v1/messages", anthropic_body([user("q")]))
        assert s.rounds_left == 1
    name, data = events[-1]
    assert name == "error"
    assert json.loads(data) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert events[0][0] == "message_start"


def test_openai_sse_error_fault_sends_an_error_data_object():
    with LoopbackServer([{"text": "one two three"}], faults=[{"at": 1, "kind": "sse_error"}]) as s:
        events = sse(s.url + "/v1/chat/completions", openai_body([user("q")]))
    last = json.loads(events[-1][1])
    assert "error" in last and last["error"]["message"] == "Overloaded"
    assert all(data != "[DONE]" for _, data in events)


def test_unknown_fault_kinds_are_refused():
    with pytest.raises(ValueError, match="fault kind"):
        LoopbackServer(faults=[{"at": 1, "kind": "explode"}])


# ---------------------------------------------------------------- HTTP edges and the CLI


def test_malformed_json_is_a_400_with_a_json_error():
    with LoopbackServer([{"text": "kept"}]) as s:
        r = httpx.post(
            s.url + "/v1/messages",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert s.rounds_left == 1
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert s.requests[0].status == 400


def test_unknown_paths_are_a_404_with_a_json_error():
    with LoopbackServer() as s:
        r = httpx.post(s.url + "/v1/completions", json={})
        health = httpx.get(s.url + "/health")
    assert r.status_code == 404 and "error" in r.json()
    assert (health.status_code, health.text) == (200, "ok")


def test_keep_alive_connections_serve_several_streams():
    with (
        LoopbackServer([{"text": "a b"}, {"text": "c d"}]) as s,
        httpx.Client(base_url=s.url) as client,
    ):
        texts = []
        for _ in range(2):
            with client.stream("POST", "/v1/messages", json=anthropic_body([user("q")])) as r:
                texts.append(
                    "".join(
                        json.loads(line[5:])["delta"]["text"]
                        for line in r.iter_lines()
                        if "text_delta" in line
                    )
                )
    assert texts == ["a b", "c d"]


def test_the_cli_prints_its_url_and_serves_until_terminated(tmp_path):
    script = tmp_path / "s.jsonl"
    script.write_text('{"text": "from the cli"}\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodecode.loopback", "--script", str(script), "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url + "/health").text == "ok"
        events = [json.loads(d) for _, d in sse(url + "/v1/messages", anthropic_body([user("q")]))]
        assert "".join(text_of(events)) == "from the cli"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_stub_after_the_ask_is_no_ask():
    rounds = [{"text": "for the bug", "match_ask": "bug"}]
    stub = "[history evicted: seq 3–9 · 2 rounds of turn 1 · recall: (recall-log)]\n;; read f1"
    with LoopbackServer(rounds) as s:
        bug = anthropic_events(s, anthropic_body([user("fix the bug"), user(stub)]))
    assert "".join(text_of(bug)) == "for the bug"
