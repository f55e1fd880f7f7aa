"""Secret values become [redacted:NAME] in text and payloads."""

from __future__ import annotations

from collections import namedtuple

from nodecode.redact import Redactor


def test_apply_replaces_every_occurrence():
    r = Redactor({"ANTHROPIC_API_KEY": "sk-ant-abcdefgh12"})
    assert r.apply("a sk-ant-abcdefgh12 b sk-ant-abcdefgh12") == (
        "a [redacted:ANTHROPIC_API_KEY] b [redacted:ANTHROPIC_API_KEY]"
    )


def test_longest_value_first():
    r = Redactor({"SHORT": "abcdefgh", "LONG": "abcdefgh-ijkl"})
    assert r("x abcdefgh-ijkl abcdefgh") == "x [redacted:LONG] [redacted:SHORT]"


def test_from_env_skips_unset_empty_and_short_values():
    environ = {"A_KEY": "0123456789", "EMPTY": "", "TINY": "1234567"}
    r = Redactor.from_env(["A_KEY", "EMPTY", "TINY", "MISSING"], environ=environ)
    assert r.names == {"A_KEY"}
    assert r.apply("0123456789 1234567") == "[redacted:A_KEY] 1234567"
    assert r


def test_an_empty_redactor_is_false_and_changes_nothing():
    r = Redactor.from_env(["NOPE"], environ={})
    assert not r
    payload = {"a": ["x"]}
    assert r.apply("text") == "text"
    assert r.apply_obj(payload) is payload


def test_apply_obj_walks_payloads():
    Point = namedtuple("Point", "x y")
    r = Redactor({"KEY": "secret-value-1"})
    payload = {
        "messages": [{"text": "use secret-value-1"}, ("secret-value-1", 3)],
        "raw": b"bytes secret-value-1",
        "n": 5,
        "p": Point("secret-value-1", None),
    }
    assert r.apply_obj(payload) == {
        "messages": [{"text": "use [redacted:KEY]"}, ("[redacted:KEY]", 3)],
        "raw": b"bytes [redacted:KEY]",
        "n": 5,
        "p": Point("[redacted:KEY]", None),
    }


def test_repr_never_shows_values():
    assert "secret-value-1" not in repr(Redactor({"KEY": "secret-value-1"}))
