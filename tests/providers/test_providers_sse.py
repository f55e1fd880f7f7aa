"""The lenient frame reader, line by line."""

from __future__ import annotations

from nodecode.providers.sse import EventReader, LineSplitter, iter_events


def _events(text: str) -> list[tuple[str, str]]:
    splitter = LineSplitter()
    lines = splitter.feed(text) + splitter.flush()
    return [(e.event, e.data) for e in iter_events(lines)]


def test_plain_frames_with_event_names() -> None:
    text = 'event: a\ndata: {"x":1}\n\nevent: b\ndata: 2\n\n'
    assert _events(text) == [("a", '{"x":1}'), ("b", "2")]


def test_crlf_and_lone_cr_end_lines() -> None:
    assert _events("data: 1\r\n\r\ndata: 2\r\rdata: 3\n\n") == [
        ("message", "1"),
        ("message", "2"),
        ("message", "3"),
    ]


def test_comment_lines_are_ignored() -> None:
    assert _events(": OPENROUTER PROCESSING\n: keep-alive\ndata: 1\n\n") == [("message", "1")]


def test_an_event_line_after_data_starts_a_new_event_without_a_blank_line() -> None:
    text = 'event: a\ndata: {"n":1}\nevent: b\ndata: {"n":2}\n'
    assert _events(text) == [("a", '{"n":1}'), ("b", '{"n":2}')]


def test_a_data_line_after_whole_json_data_starts_a_new_event() -> None:
    text = 'data: {"n":1}\ndata: {"n":2}\ndata: [DONE]\n'
    assert _events(text) == [("message", '{"n":1}'), ("message", '{"n":2}'), ("message", "[DONE]")]


def test_multi_line_data_joins_with_newline() -> None:
    assert _events('data: {"a":\ndata: 1}\n\n') == [("message", '{"a":\n1}')]


def test_only_one_space_after_the_colon_is_stripped() -> None:
    assert _events("data:  two\n\ndata:none\n\n") == [("message", " two"), ("message", "none")]


def test_done_stops_the_stream() -> None:
    assert _events("data: 1\n\ndata: [DONE]\n\ndata: 2\n\n") == [
        ("message", "1"),
        ("message", "[DONE]"),
    ]


def test_end_of_body_without_blank_line_still_dispatches() -> None:
    assert _events("event: message_stop\ndata: {}") == [("message_stop", "{}")]


def test_json_lines_without_data_prefix_are_events() -> None:
    text = '{"type":"ping"}\n{"done":true}\n'
    assert _events(text) == [("message", '{"type":"ping"}'), ("message", '{"done":true}')]


def test_unicode_line_separators_inside_json_do_not_split() -> None:
    text = 'data: {"t":"a\u2028b\x85c"}\n\n'
    assert _events(text) == [("message", '{"t":"a\u2028b\x85c"}')]


def test_splitter_joins_pieces_and_waits_on_a_trailing_cr() -> None:
    splitter = LineSplitter()
    assert splitter.feed("da") == []
    assert splitter.feed("ta: 1\r") == []
    assert splitter.feed("\nx") == ["data: 1"]
    assert splitter.flush() == ["x"]


def test_reader_ignores_id_and_retry_fields_and_a_leading_bom() -> None:
    reader = EventReader()
    out = []
    for line in ["\ufeffid: 7", "retry: 100", "data: 1", ""]:
        out += reader.feed_line(line)
    assert [(e.event, e.data) for e in out] == [("message", "1")]
