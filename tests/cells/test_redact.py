"""Secret values become [redacted:NAME] in text and payloads."""

from __future__ import annotations

import base64
from collections import namedtuple

from nodecode.secrets.redact import Redactor


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


KEY = "sk-ant-nodecode-SECRET-7f3a9c2e51d04b88"


def test_every_spelling_of_a_key_is_redacted():
    r = Redactor({"K": KEY})
    raw = KEY.encode()
    printed = [
        KEY[::-1],
        raw.hex(),
        raw.hex().upper(),
        "".join(f"%{b:02x}" for b in raw),
        "".join(f"%{b:02X}" for b in raw),
    ]
    for pad in (b"", b"x", b"xy"):  # the key at each alignment of a longer base64 stream
        printed.append(base64.b64encode(pad + raw + b"\n").decode())
        printed.append(base64.urlsafe_b64encode(b"<" + pad + raw + b">?").decode())
    for text in printed:
        assert "[redacted:K]" in r.apply(f"before {text} after"), text
        assert b"[redacted:K]" in r.apply_obj(f"before {text} after".encode()), text


def test_a_spelling_wrapped_over_lines_is_redacted():
    r = Redactor({"K": KEY})
    line = b"ANTHROPIC_API_KEY=" + KEY.encode() + b"\n"
    wrapped = base64.encodebytes(b"x" + line).decode()  # 76 columns: the key's part is cut
    assert len(wrapped.split("\n")) == 3
    assert r.apply(wrapped) == "eEFOVEhST1BJQ19BUElfS0VZPX[redacted:K]Ao=\n"
    assert r.apply_obj(wrapped.encode()) == b"eEFOVEhST1BJQ19BUElfS0VZPX[redacted:K]Ao=\n"
    hexed = KEY.encode().hex()
    assert r.apply(hexed[:30] + "\r\n" + hexed[30:]) == "[redacted:K]"


def test_add_learns_a_key_later():
    r = Redactor({})
    assert not r and r.apply(KEY) == KEY
    r.add("providers.p.api_key_cmd", KEY)
    r.add("TOO_SHORT", "1234567")
    assert r.apply(KEY[::-1]) == "[redacted:providers.p.api_key_cmd]"
    assert r.names == {"providers.p.api_key_cmd"}


def stream_pieces(r: Redactor, pieces: list[str]) -> list[str]:
    stream = r.stream()
    return [stream.feed(p) for p in pieces] + [stream.flush()]


def test_a_stream_holds_back_only_what_could_begin_a_key():
    r = Redactor({"K": KEY})
    shown = stream_pieces(r, ["see ", KEY[:5], KEY[5:20], KEY[20:] + " and sk-", "y", " sk-ant"])
    assert shown == ["see ", "", "", "[redacted:K] and ", "sk-y", " ", "sk-ant"]
    for cut in range(1, len(KEY)):  # every split point, also reversed and in hex
        for form in (KEY, KEY[::-1], KEY.encode().hex()):
            text = "".join(stream_pieces(r, [f"a {form[:cut]}", f"{form[cut:]} b"]))
            assert text == "a [redacted:K] b", (cut, form)
