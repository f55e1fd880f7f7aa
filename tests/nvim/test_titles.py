"""A session started in Neovim with a range ask is titled by its question, the
same in the sessions picker, the tree and `nodecode sessions`."""

from __future__ import annotations

from helpers import run_cli

from .conftest import configure, wait_for
from .test_picker import wait_rows
from .ui_helpers import idle


def test_a_range_ask_titles_the_session_the_same_in_picker_tree_and_cli(
    nvim, home, workspace, loopback
):
    configure(home, loopback([{"text": "it subtracts"}]))
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    nvim.command("edit calc.py")
    nvim.command("1,2Nodecode why does add subtract?")
    wait_for(lambda: idle(nvim))

    nvim.command("NodecodeSessions")
    rows = wait_rows(nvim, lambda rows: len(rows) >= 2)["rows"]
    nvim.input("<Esc>")
    nvim.command("NodecodeTree")
    tree = nvim.current.buffer[:]
    listed = run_cli("sessions", home=home, cwd=workspace).stdout

    title = "why does add subtract?"
    assert rows[0].endswith("1 turn  " + title), rows
    assert any(title in line for line in tree) and not any("```" in x for x in tree), tree
    assert any(line.endswith("turns=1  " + title) for line in listed.splitlines()), listed
