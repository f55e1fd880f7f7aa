"""Slash commands: which messages are commands (`/NAME`, a name of the one
table), which are sent (`//` escapes, paths), and what Neovim runs for each."""

from __future__ import annotations

import pytest
from nodecode import slash
from nodecode.errors import UserError

# -- what a message is ---------------------------------------------------------------


def test_a_known_name_after_the_slash_is_a_command_with_its_words():
    call = slash.read("/evict  through 2 ")
    assert isinstance(call, slash.Call)
    assert call.command.name == "evict" and call.words() == ["through", "2"]
    assert slash.read("/compact").command.name == "evict"
    assert slash.read("/recall 'two words' three").words() == ["two words", "three"]


@pytest.mark.parametrize(
    ("typed", "sent"),
    [
        ("//context", "/context"),
        ("///x", "//x"),
        ("/etc/hosts is broken", "/etc/hosts is broken"),
        ("a/b and /tree", "a/b and /tree"),
        ("/ alone", "/ alone"),
        ("/2 is half", "/2 is half"),
        (" /tree", " /tree"),
    ],
)
def test_other_text_is_sent_as_typed_or_without_the_escapes_slash(typed, sent):
    assert slash.read(typed) == sent


def test_an_unknown_name_is_one_line_naming_it_and_pointing_at_help():
    with pytest.raises(UserError) as e:
        slash.read("/contxt the rest")
    assert str(e.value) == (
        "/contxt is not a command (did you mean /context?): "
        "/help lists them, //contxt sends it as text"
    )


def test_neovim_runs_the_nodecode_command_each_names():
    def nvim(text: str) -> dict:
        return slash.in_neovim(slash.read(text))

    assert nvim("/context") == {
        "name": "context",
        "command": "NodecodeStatus",
        "args": "",
        "bang": False,
    }
    assert nvim("/compact through 2")["command"] == "NodecodeEvict"
    assert nvim("/compact through 2")["args"] == "through 2"
    assert nvim("/undo --force")["bang"] is True and nvim("/undo")["bang"] is False
    assert nvim("/recall 'the parser'") == {
        "name": "recall",
        "command": "NodecodeRecall",
        "args": "the parser",
        "bang": True,
    }
    assert nvim("/help")["lines"] == slash.help_lines()
    with pytest.raises(UserError, match=r"^/tree: expected no arguments \(got 'x'\)"):
        nvim("/tree x")
    with pytest.raises(UserError, match=r"^/model \[PROVIDER/MODEL\]: expected"):
        nvim("/model a/b c/d")
