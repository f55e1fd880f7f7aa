"""Secret values become [redacted:NAME] in text and payloads."""

from __future__ import annotations

import base64
from collections import namedtuple

import pytest
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


# Trust, third round: a key's core, whatever surrounds it (item 6), and more
# spellings (item 8).

STRAYS = {
    "carriage return": KEY + "\r",
    "CRLF": KEY + "\r\n",
    "spaces": f"  {KEY} ",
    "BOM": "\ufeff" + KEY,
    "zero-width space": KEY + "\u200b",
    "no-break space": "\u00a0" + KEY,
}


@pytest.mark.parametrize("value", STRAYS.values(), ids=STRAYS.keys())
def test_a_key_is_redacted_bare_whatever_stray_characters_surround_its_value(value):
    r = Redactor({"K": value})
    assert r.apply(f"the key is {KEY}.") == "the key is [redacted:K]."
    assert r.apply(f"reversed {KEY[::-1]}") == "reversed [redacted:K]"
    assert r.apply(f"as set: {value}|") == f"as set: {value.replace(KEY, '[redacted:K]')}|"


def _od(raw: bytes) -> str:
    """What `od -An -tx1` prints: 16 bytes a line, each byte after a space."""
    rows = [raw[at : at + 16] for at in range(0, len(raw), 16)]
    return "".join("".join(f" {b:02x}" for b in row) + "\n" for row in rows)


def new_spellings(key: str) -> dict[str, str]:
    """The spellings of issue item 8, each as a command would print it."""
    raw = key.encode()
    return {
        "upper case": key.upper(),
        "base32": base64.b32encode(b"x" + raw + b"\n").decode(),  # the key at an offset
        "base32, lower case": base64.b32encode(raw).decode().lower(),
        "letters separated by spaces": " ".join(key),
        "od-style hex": _od(raw + b"\n"),
        "xxd-style hex": " ".join(raw.hex()[at : at + 4] for at in range(0, 2 * len(raw), 4)),
        "\\u escapes": "".join(f"\\u{ord(ch):04x}" for ch in key),
        "zero-width-joined": "\u200d".join(key),
        "full-width": "".join(chr(ord(ch) + 0xFEE0) for ch in key),
        "full-width upper case": "".join(chr(ord(ch) + 0xFEE0) for ch in key.upper()),
    }


@pytest.mark.parametrize("name", new_spellings(KEY))
def test_more_spellings_of_a_key_are_redacted(name):
    r = Redactor({"K": KEY})
    text = new_spellings(KEY)[name]
    redacted = r.apply(f"before {text} after")
    assert "[redacted:K]" in redacted, redacted
    # What may remain: characters that also carry the neighbours' bits, padding, gaps.
    assert len(redacted) <= len("before  after") + len("[redacted:K]") + 12, redacted
    assert r.apply_obj(f"<{text}>".encode()) == r.apply(f"<{text}>").encode()


@pytest.mark.parametrize("name", new_spellings(KEY))
def test_a_stream_holds_back_a_new_spelling_split_anywhere(name):
    r = Redactor({"K": KEY})
    text = new_spellings(KEY)[name]
    whole = r.apply(f"a {text} b")
    for cut in range(1, len(text), 7):
        shown = stream_pieces(r, [f"a {text[:cut]}", f"{text[cut:]} b"])
        assert "".join(shown) == whole, (cut, shown)
        assert all(text[2:14] not in piece for piece in shown), (cut, shown)


def test_ordinary_text_is_left_alone():
    r = Redactor({"K": KEY, "O": "sk-proj-nodecode-SECRET-0c1d2e3f4a5b6c7d"})
    text = "def main():\n    return 42  # SK-ANT is a prefix, not a key\n\uff53\uff4b and \u200d\n"
    assert r.apply(text) is text
    assert "".join(stream_pieces(r, [text[:20], text[20:]])) == text
