"""context.txt's format: what ``split`` reads back is what ``render`` wrote, and
the take's shortcut (``rendered_split``, the blocks made from the messages an
export rendered, never parsed) reads the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nodecode.context import fileformat
from nodecode.context.model import Message

PIECES = ["", "\n", "[[m:", "[[m:abcdef 1 user]]", "[[note]]", "\r", "x", " ", "]]", "é"]
bodies = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)
messages = st.lists(st.tuples(st.sampled_from(fileformat.ROLES), bodies), max_size=12).map(
    lambda ms: [Message(i + 1, role, text) for i, (role, text) in enumerate(ms)]
)


@given(messages)
@settings(max_examples=300, deadline=None)
def test_the_blocks_made_from_an_exports_messages_are_those_split_reads(ms):
    nonce = fileformat.choose_nonce(ms)
    first = fileformat.first_line("default", "s1", 3, nonce)
    text = fileformat.render("default", "s1", 3, nonce, ms)
    assert fileformat.rendered_split(first, ms) == fileformat.split(text, nonce)
