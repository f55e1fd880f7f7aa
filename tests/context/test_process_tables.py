"""What the process keeps by content across Apps (messages read from a row, their
encoded runs): a second App on a store this process has read gets the same
objects, so a store that diverged from a copy of it must still send its own."""

from __future__ import annotations

import shutil

from helpers import write_config
from nodecode.app import App

ROUND = [{"text": "noted."}]


def _copy_of(h, tmp_path, name: str):
    """A second home holding a copy of ``h``'s store (same session id, same seqs)."""
    home = write_config(tmp_path / name, h.srv, auto_approve=True)
    shutil.copytree(h.app.home / "store", home / "store")
    app = App.open(home, "default", h.app.cwd, environ={})
    return type(h)(app, h.srv, h.sid)


def test_two_copies_of_a_store_that_diverge_each_send_their_own_messages(harness, tmp_path):
    h = harness
    h.app.close()
    one, two = _copy_of(h, tmp_path, "one"), _copy_of(h, tmp_path, "two")
    try:
        one.ask("the ask of the first copy", ROUND)
        two.ask("the ask of the second copy", ROUND)  # the same seqs, other texts
        one.ask("again, first", ROUND)
        texts = [t for _, t in one.sent_texts()]
        assert "the ask of the first copy" in texts and "again, first" in texts
        assert "the ask of the second copy" not in texts
        two.ask("again, second", ROUND)
        texts = [t for _, t in two.sent_texts()]
        assert "the ask of the second copy" in texts and "the ask of the first copy" not in texts
        # The replies at the same seqs are the same text: one body, byte for byte, up to
        # the asks (everything before the copies diverged is encoded the same).
        first, second = one.last_body()["messages"], two.last_body()["messages"]
        assert first[:3] == second[:3]
    finally:
        one.app.close()
        two.app.close()


def test_a_second_app_on_the_same_store_sends_what_the_first_would(harness, tmp_path):
    h = harness
    h.ask("one more", ROUND)
    before = h.last_body()
    h.app.close()
    again = App.open(h.app.home, "default", h.app.cwd, environ={})
    try:
        other = type(h)(again, h.srv, h.sid)
        other.ask("and another", ROUND)
        body = other.last_body()
        assert body["messages"][: len(before["messages"]) - 1] == before["messages"][:-1]
        assert other.sent_texts()[-1] == ("user", "and another")
    finally:
        again.close()


def test_equal_messages_of_two_sessions_each_send_their_own_thinking_block():
    """Rows equal in seq, role, turn and text but not payload (two sessions' redacted
    thinking after the same note) share the run's first message object; each
    request still carries its own session's block."""
    import json

    import msgpack
    from nodecode.context.message import of_row
    from nodecode.providers import registry
    from nodecode.providers.wire import Request

    def rows(data: str) -> list[tuple]:
        block = {"format": "anthropic", "block": {"type": "redacted_thinking", "data": data}}
        return [
            (1, "user", 1, "hi", None),
            (2, "note", 1, "remember: tests first", None),
            (3, "thinking", 1, "", msgpack.packb(block, use_bin_type=True)),
            (4, "assistant", 1, "ok", None),
            (5, "user", 2, "next", None),
        ]

    def sent_blocks(data: str) -> list[dict]:
        msgs = [of_row(r) for r in rows(data)]
        built = registry.wire("anthropic").build(
            Request(msgs, model="m", system="s", tools=[], max_tokens=10)
        )
        wire = json.loads(b"[" + b",".join(built.body["messages"].parts) + b"]")
        return [b for m in wire for b in m["content"] if b["type"] == "redacted_thinking"]

    assert sent_blocks("DATA-OF-A") == [{"type": "redacted_thinking", "data": "DATA-OF-A"}]
    assert sent_blocks("DATA-OF-B") == [{"type": "redacted_thinking", "data": "DATA-OF-B"}]
