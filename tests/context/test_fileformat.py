"""context.txt's format: what ``split`` reads back is what ``render`` wrote; the
take's shortcuts read exactly what ``split`` reads: ``rendered_split`` (the
blocks made from the messages an export rendered, never parsed) and
``split_like`` (an edited file read against its export, runs of copied blocks
taken whole) on any edit a person can make."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nodecode.context import fileformat
from nodecode.context.message import Message

PIECES = ["", "\n", "[[m:", "[[m:abcdef 1 user]]", "[[note]]", "\r", "x", " ", "]]", "é"]
bodies = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)
messages = st.lists(st.tuples(st.sampled_from(fileformat.ROLES), bodies), max_size=12).map(
    lambda ms: [Message(i + 1, role, text) for i, (role, text) in enumerate(ms)]
)


def exported(ms: list[Message]) -> tuple[str, str, str]:
    nonce = fileformat.choose_nonce(ms)
    first = fileformat.first_line("default", "s1", 3, nonce)
    return nonce, first, fileformat.render("default", "s1", 3, nonce, ms)


@given(messages)
@settings(max_examples=300, deadline=None)
def test_the_blocks_made_from_an_exports_messages_are_those_split_reads(ms):
    nonce, first, text = exported(ms)
    made = fileformat.rendered_split(first, nonce, ms)
    assert made == fileformat.split(text, nonce)
    for b, at in zip(made.blocks, made.starts, strict=True):
        assert text.startswith(f"[[m:{nonce} {b.id} {b.role}]]\n", at)


# What a person does to the file's lines: delete, duplicate, move, change, add
# (a note, a header of this nonce well formed or not, stray text), at any line.
LINE_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["delete", "duplicate", "move", "change", "insert"]),
        st.integers(min_value=0, max_value=200),
        st.sampled_from(
            ["[[note]]", "a note", "", "[[m:{n} 2 user]]", "[[m:{n} 9 bogus]]", "[[m:{n}]]", "é\r"]
        ),
    ),
    max_size=5,
)


@given(messages, LINE_EDITS)
@settings(max_examples=400, deadline=None)
def test_an_edited_file_read_against_its_export_reads_as_split_reads_it(ms, line_edits):
    nonce, first, text = exported(ms)
    lines = text.split("\n")
    for what, at, piece in line_edits:
        k = at % len(lines)
        piece = piece.replace("{n}", nonce)
        if what == "delete" and len(lines) > 1:
            del lines[k]
        elif what == "duplicate":
            lines.insert(k, lines[k])
        elif what == "move":
            lines.insert((at * 7) % len(lines), lines.pop(k))
        elif what == "change":
            lines[k] = lines[k] + piece
        else:
            lines.insert(k, piece)
    edited = "\n".join(lines)
    base = fileformat.rendered_split(first, nonce, ms)
    assert fileformat.split_like(edited, nonce, base, text) == fileformat.split(edited, nonce)
