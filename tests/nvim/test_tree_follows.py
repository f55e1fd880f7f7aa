""":NodecodeTree stays true while the person works: an open tree redraws when a
turn starts and ends (a failed one too), without being refreshed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import chat, configure, wait_for
from .ui_helpers import make_session


@pytest.fixture
def one_turn(home: Path, workspace: Path, loopback):
    srv = loopback([{"text": "first answer"}, {"text": "second answer"}])
    configure(home, srv, max_retries=0)
    make_session(home, workspace, ["first question"])
    return srv


def tree_lines(nv) -> list[str]:
    return nv.exec_lua(
        "return vim.api.nvim_buf_get_lines(vim.fn.bufnr('nodecode://tree'), 0, -1, false)"
    )


def test_an_open_tree_follows_new_turns_and_shows_failed_ones(nvim, one_turn):
    nvim.command("NodecodeTree")
    assert [line.split("  ")[0] for line in tree_lines(nvim)] == ["● 1"]

    nvim.command("Nodecode second question")
    wait_for(
        lambda: (
            "second answer" in chat(nvim)
            and nvim.exec_lua("return require('nodecode.ui.chat').job() == nil")
        )
    )

    lines = tree_lines(nvim)
    assert [line.split("  ")[:2] for line in lines] == [
        ["○ 1", "first question"],
        ["● 2", "second question"],
    ]
    assert lines[1].endswith("head")

    one_turn.add_fault({"kind": "500"})
    nvim.command("Nodecode a third question")
    wait_for(lambda: nvim.exec_lua("return require('nodecode.ui.chat').job() == nil"))

    lines = tree_lines(nvim)
    assert [line.split("  ")[0] for line in lines] == ["○ 1", "○ 2", "● 3"]
    assert "a third question" in lines[2] and lines[2].endswith("failed · head")
