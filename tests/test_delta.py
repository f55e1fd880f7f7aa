"""Byte deltas (nodecode.log.delta) and blobs stored as deltas in the store."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodecode.log import delta
from nodecode.log.store import open_store

LINES = [b"", b"\n", b"same\n", b"[[m:abc 1 user]]\n", b"x" * 40 + b"\n", b"\r\n", b"tail"]
texts = st.lists(st.one_of(st.sampled_from(LINES), st.binary(max_size=12)), max_size=40).map(
    b"".join
)


@given(texts, texts)
@settings(max_examples=300, deadline=None)
def test_any_text_decodes_from_its_delta_against_any_base(base, new):
    assert delta.decode(base, delta.encode(base, new)) == new


@given(texts, texts, st.binary(min_size=1, max_size=4), st.binary(max_size=4))
@settings(max_examples=200, deadline=None)
def test_a_substitution_in_the_base_decodes_exactly_too(base, new, old, sub):
    assert delta.decode(base, delta.encode(base, new, (old, sub))) == new


@given(texts, texts, st.sampled_from([b"\n[[m:abc ", b"\n", b"x", b"[[m:"]))
@settings(max_examples=300, deadline=None)
def test_runs_of_longer_units_decode_exactly_too(base, new, unit):
    assert delta.decode(base, delta.encode(base, new, unit=unit)) == new


def test_a_context_file_delta_by_blocks_costs_about_what_changed():
    unit = b"\n[[m:abc "
    blocks = [f"[[m:abc {i} user]]\nline {i}\nmore words {i * 7919 % 1000}\n" for i in range(2000)]
    base = ("[[export default/s 1 abc]]\n" + "".join(blocks)).encode()
    blocks[10] = blocks[10].replace("more words", "other words")
    del blocks[900:903]
    blocks.insert(1500, "[[m:abc 1500 user]]\nline 1500\n[[note]]\na note\n")
    new = ("[[export default/s 1 abc]]\n" + "".join(blocks)).encode()
    packed = delta.encode(base, new, unit=unit)
    assert delta.decode(base, packed) == new
    assert len(packed) < 200, len(packed)


def big(n: int) -> bytes:
    return b"".join(
        f"line {i} of the file, some words {i * 7919 % 1000}\n".encode() for i in range(n)
    )


def test_a_few_changed_lines_cost_about_what_changed():
    base = big(20000)
    lines = base.splitlines(keepends=True)
    lines[100] = b"a changed line\n"
    del lines[9000:9003]
    lines[15000:15000] = [b"an inserted line\n", b"another\n"]
    lines += [b"appended\n"]
    new = b"".join(lines)
    packed = delta.encode(base, new)
    assert delta.decode(base, packed) == new
    assert len(packed) < 200, len(packed)


def test_a_moved_block_is_copied_not_stored():
    base = big(3000)
    lines = base.splitlines(keepends=True)
    new = b"".join(lines[2000:] + lines[:2000])
    assert len(delta.encode(base, new)) < 64


def test_a_nonce_substitution_makes_two_exports_share_their_headers():
    body = b"".join(f"[[m:aaaa {i} user]]\nask {i}\n".encode() for i in range(2000))
    other = body.replace(b"[[m:aaaa ", b"[[m:bbbb ") + b"[[m:bbbb 2001 user]]\nnew\n"
    assert len(delta.encode(body, other)) > 20000  # every header differs
    assert len(delta.encode(body, other, (b"[[m:aaaa ", b"[[m:bbbb "))) < 100


# -- in the store -------------------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "home", "default")
    yield s
    s.close()


def test_a_blob_kept_against_a_stored_base_reads_back_whole(store):
    base = big(5000)
    edited = base.replace(b"line 2500 ", b"line two thousand five hundred ")
    h0 = store.put_blob(base)
    h1 = store.put_blob(edited, base=(h0, base))
    assert h1 == hashlib.sha256(edited).hexdigest()
    assert store.blob(h1) == edited
    size = store.read("SELECT length(data) FROM blobs WHERE hash = ?", (h1,))[0][0]
    assert size < 200


def test_a_base_that_is_not_stored_is_asked_of_the_caller(store):
    base = big(5000)
    edited = base + b"one more line\n"
    h = store.put_blob(edited, base=("f" * 64, base))
    assert store.blob(h) is None  # its base is nowhere in the table
    asked = []
    got = store.blob(h, bases=lambda d: asked.append(d) or (base if d == "f" * 64 else None))
    assert got == edited and asked == ["f" * 64]


def test_whole_bytes_put_later_replace_a_delta_so_no_base_is_needed(store):
    base = big(5000)
    edited = base + b"one more line\n"
    h = store.put_blob(edited, base=("f" * 64, base))
    assert store.put_blob(edited) == h
    assert store.blob(h) == edited
    assert store.read("SELECT base FROM blobs WHERE hash = ?", (h,)) == [(None,)]


def test_a_delta_is_not_kept_when_the_whole_bytes_are_smaller(store):
    h = store.put_blob(b"tiny", base=("f" * 64, big(100)))
    assert store.read("SELECT data, base FROM blobs WHERE hash = ?", (h,)) == [(b"tiny", None)]
