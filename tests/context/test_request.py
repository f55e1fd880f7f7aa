"""Valid requests from any context (doc/design.md "The context"), for both wire formats."""

from __future__ import annotations

import json

from nodecode.context.arrange import CONTEXT_BEGINS, arrange
from nodecode.context.message import Message
from nodecode.providers import registry
from nodecode.providers.wire import Request
from nodecode.verbs.prompt import SYSTEM_PROMPT, TOOLS

KW = dict(model="m", system=SYSTEM_PROMPT, tools=TOOLS, max_tokens=100)


def anthropic_body(messages, **kw):
    return registry.wire("anthropic").build(Request(messages, **kw))


def openai_body(messages, **kw):
    return registry.wire("openai").build(Request(messages, **kw))


def user(i, t="ask"):
    return Message(i, "user", t)


def reply(i, t="reply"):
    return Message(i, "assistant", t)


def call(i, code='(read-file "a")'):
    return Message(i, "call", code, payload={"name": "eval", "input": {"code": code}})


def result(i, c, t=None):
    return Message(i, "tool", t or f"out\n[seq {i}]", payload={"call": c})


def roles(msgs):
    return [(m.role, m.id) for m in msgs]


def test_a_plain_round_maps_to_anthropic_blocks_with_seq_derived_ids():
    msgs = [user(1), reply(2, "let me look"), call(3), result(4, 3)]
    body = anthropic_body(msgs, **KW).body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "let me look"}
    assert assistant[1]["type"] == "tool_use" and assistant[1]["id"] == "toolu_nc3"
    assert assistant[1]["input"] == {"code": '(read-file "a")'}
    res = body["messages"][2]["content"][0]
    assert res["type"] == "tool_result" and res["tool_use_id"] == "toolu_nc3"
    assert res["content"] == "out\n[seq 4]"


def test_openai_gets_one_tool_message_per_result_in_call_order():
    msgs = [user(1), call(2), call(3), result(4, 2), result(5, 3), user(6, "next")]
    wire = openai_body(msgs, **KW).body["messages"]
    assert wire[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert wire[2]["role"] == "assistant" and [c["id"] for c in wire[2]["tool_calls"]] == [
        "call_nc2",
        "call_nc3",
    ]
    assert json.loads(wire[2]["tool_calls"][0]["function"]["arguments"]) == {
        "code": '(read-file "a")'
    }
    assert [(m["role"], m.get("tool_call_id")) for m in wire[3:]] == [
        ("tool", "call_nc2"),
        ("tool", "call_nc3"),
        ("user", None),
    ]


def test_anything_inside_a_call_batch_moves_after_it():
    msgs = [user(1), call(2), Message(3, "notice", "warn"), result(4, 2)]
    assert roles(arrange(msgs)) == [("user", 1), ("call", 2), ("tool", 4), ("notice", 3)]


def test_a_call_without_result_gets_one_saying_so():
    out = arrange([user(1), call(2)])
    assert out[-1].role == "tool" and out[-1].call_id == 2
    assert "stopped before this call ran" in out[-1].text


def test_a_result_without_its_call_is_dropped():
    assert roles(arrange([user(1), result(3, 2), reply(4)])) == [("user", 1), ("assistant", 4)]


def test_first_message_is_always_user():
    out = arrange([reply(1)])
    assert out[0].role == "user" and out[0].text == CONTEXT_BEGINS


def test_empty_and_whitespace_texts_are_dropped():
    out = arrange([user(1), reply(2, "  \n"), Message(3, "note", ""), user(4, "x")])
    assert roles(out) == [("user", 1), ("user", 4)]


def test_a_note_never_ends_the_request():
    msgs = [user(1), reply(2), call(3), result(4, 3), Message(5, "note", "remember")]
    assert roles(arrange(msgs)) == [
        ("user", 1),
        ("note", 5),
        ("assistant", 2),
        ("call", 3),
        ("tool", 4),
    ]


def test_consecutive_same_role_messages_merge_for_anthropic():
    msgs = [user(1), Message(2, "stub", "[history]"), user(3, "more")]
    body = anthropic_body(msgs, **KW).body
    assert len(body["messages"]) == 1 and len(body["messages"][0]["content"]) == 3


def test_same_messages_serialize_to_the_same_bytes():
    msgs = [user(1), reply(2), call(3), result(4, 3)]
    a = json.dumps(anthropic_body(msgs, **KW).body)
    b = json.dumps(anthropic_body(list(msgs), **KW).body)
    assert a == b


def test_without_a_plan_the_system_and_the_end_get_five_minute_entries():
    built = anthropic_body([user(1), reply(2), call(3), result(4, 3)], **KW)
    body = built.body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert len(marked) == 1 and marked[0]["type"] == "tool_result"
    assert built.breakpoints == [0, 4] and built.ttls == [300.0, 300.0]


def test_a_plan_places_each_breakpoint_with_its_lifetime():
    msgs = [user(1), reply(2), call(3), result(4, 3)]
    built = anthropic_body(
        msgs, **KW, marks=lambda arranged: [(0, 3600.0), (2, 3600.0), (3, 300.0)]
    )
    body = built.body
    assert "cache_control" not in body["system"][0]
    marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert [b["cache_control"] for b in marked] == [
        {"type": "ephemeral", "ttl": "1h"},
        {"type": "ephemeral", "ttl": "1h"},
        {"type": "ephemeral"},
    ]
    assert marked[0]["text"] == "ask" and marked[1]["type"] == "tool_use"
    assert built.breakpoints == [1, 3, 4] and built.ttls == [3600.0, 3600.0, 300.0]


def test_the_bytes_sent_are_the_bodys_json_whatever_was_encoded_before():
    from nodecode.providers.types import encode_body

    note = Message(9, "note", "a note")
    msgs = [
        user(1, 'ünï "quoted"'),
        reply(2, "let me look"),
        note,
        call(3),
        call(5, "(list-files)"),
        result(4, 3),
        Message(6, "tool", "failed\n[seq 6]", payload={"call": 5, "error": True}),
        reply(7, "after the calls"),
        Message(8, "stub", "[history]"),
        user(10, "more"),
        reply(11),
        note,
    ]
    for build in (anthropic_body, openai_body):
        # Twice each, with other breakpoints: kept parts must never leak a stale mark.
        for marks in (None, lambda a: [(0, 3600.0), (2, 3600.0), (len(a) - 1, 300.0)], None):
            body = {**build(msgs, **KW, marks=marks).body, "stream": True}
            expected = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
            assert encode_body(body) == expected.encode("utf-8")
    from nodecode.providers.types import EncodedList

    assert encode_body({}) == b"{}"
    assert encode_body({"a": EncodedList([], []), "b": 1}) == b'{"a":[],"b":1}'
    assert encode_body({"a": EncodedList([1], [b"1"])}) == b'{"a":[1]}'


def _random_messages(draw, st, start: int, n: int, calls: list[int]) -> list[Message]:
    """``n`` messages from seq ``start``; results answer any call in ``calls`` (those
    made before too: a result may come long after its call, or before it)."""
    out = []
    for i in range(start, start + n):
        kind = draw(st.sampled_from(["user", "assistant", "note", "call", "tool", "stub", "blank"]))
        if kind == "call":
            calls.append(i)
            out.append(call(i, f"(read-file {i})"))
        elif kind == "tool":
            target = draw(st.sampled_from(calls)) if calls and draw(st.booleans()) else i + 1
            out.append(result(i, target))
        elif kind == "blank":
            out.append(reply(i, " "))
        else:
            out.append(Message(i, kind, f"{kind} {i}"))
    return out


def test_a_request_made_from_the_previous_ones_parts_is_the_one_made_afresh():
    """Whatever changed between two requests (an append, a deletion, a rewrite,
    other breakpoints), reusing the previous request's parts changes nothing."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from nodecode.budget import Meter
    from nodecode.cache import ledger
    from nodecode.context.arrange import Arranged
    from nodecode.providers.types import encode_body

    meter = Meter(None)  # counting only: no store needed
    scope = ledger.scope_of("anthropic", "p", "m", SYSTEM_PROMPT, TOOLS)

    @settings(max_examples=300, deadline=None)
    @given(st.data())
    def check(data):
        calls: list[int] = []
        first = _random_messages(data.draw, st, 1, data.draw(st.integers(0, 14)), calls)
        second = list(first)
        for _ in range(data.draw(st.integers(1, 3))):
            change = data.draw(st.sampled_from(["append", "delete", "rewrite", "none"]))
            if change == "append":
                top = max((m.id for m in first + second), default=0)  # ids never reused
                second += _random_messages(data.draw, st, top + 1, 3, calls)
            elif second and change == "delete":
                del second[data.draw(st.integers(0, len(second) - 1))]
            elif second and change == "rewrite":
                k = data.draw(st.integers(0, len(second) - 1))
                m = second[k]
                second[k] = Message(m.id, m.role, m.text + " again", m.turn, m.payload)
        for build in (anthropic_body, openai_body):
            old = Arranged(first)
            marks_a = data.draw(st.lists(st.integers(-1, 30), max_size=4))
            marks_b = data.draw(st.lists(st.integers(-1, 30), max_size=4))

            def at(picks):
                return lambda out: sorted({(min(p, len(out) - 1), 3600.0) for p in picks})

            build(old, **KW, marks=at(marks_a))
            meter.tokens(old), ledger.prefix_keys(scope, old)
            new, fresh = Arranged(second, old), Arranged(second)
            got, want = build(new, **KW, marks=at(marks_b)), build(fresh, **KW, marks=at(marks_b))
            assert new.out == fresh.out
            assert encode_body(got.body) == encode_body(want.body)
            # Objects that never went into a request (nothing kept on them) make it too.
            clean = [Message(m.id, m.role, m.text, m.turn, m.payload) for m in second]
            plain = build(Arranged(clean), **KW, marks=at(marks_b))
            assert encode_body(plain.body) == encode_body(want.body)
            assert got.sent == want.sent and got.breakpoints == want.breakpoints
            assert meter.tokens(new) == meter.tokens(fresh)
            assert ledger.prefix_keys(scope, new) == ledger.prefix_keys(scope, fresh)
            assert meter.tokens(fresh)[-1] == meter.total(second)

    check()


def test_a_growing_context_keeps_the_thinking_its_format_sends():
    """Arranged request after request, the context growing (or rewritten) and the
    model changing, what is sent is what a fresh ``sendable`` makes of it."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from nodecode.context.arrange import arranged_after, sendable

    def thinking(i, fmt):
        return Message(i, "thinking", f"thought {i}", payload={"format": fmt, "block": {}})

    @settings(max_examples=200, deadline=None)
    @given(st.data())
    def check(data):
        previous: list = [None]
        msgs: list[Message] = []
        for step in range(data.draw(st.integers(1, 5))):
            # The model may change between requests (another provider, send_back).
            ptype = data.draw(st.sampled_from(["anthropic", "openai"]))
            send_back = data.draw(st.booleans())
            if msgs and data.draw(st.booleans()):  # a take: the list read again, changed
                k = data.draw(st.integers(0, len(msgs) - 1))
                msgs = msgs[:k] + msgs[k + 1 :]
            else:
                msgs = list(msgs)  # a new list, as each state read gives
            for i in range(data.draw(st.integers(0, 4))):
                seq = 10 * step + i + 1
                kind = data.draw(st.sampled_from(["user", "reply", "anthropic", "openai"]))
                if kind in ("anthropic", "openai"):
                    msgs.append(thinking(seq, kind))
                else:
                    msgs.append(user(seq) if kind == "user" else reply(seq))
            wire = registry.wire(ptype)
            setting = wire.thinking({"send_back": send_back} if ptype == "openai" else None, "m")
            carries, key = wire.carries(setting), wire.arrangement_key(setting)
            got = previous[0] = arranged_after(previous[0], msgs, carries, key)
            assert got.messages == sendable(msgs, carries)
            if got.messages == msgs:
                assert got.messages is msgs  # none dropped: the very list, for the next reuse

    check()
