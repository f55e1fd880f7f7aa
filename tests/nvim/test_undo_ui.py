""":NodecodeUndo from Neovim when the person changed a file the turn wrote: the
partial undo says the Neovim way to finish it, and the forced one names a
Neovim way to see the version it kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import configure, wait_for
from .ui_helpers import make_session, notes, notified


@pytest.fixture
def written(home: Path, workspace: Path, loopback):
    """Turn 1 wrote made.txt; the person has changed it since."""
    srv = loopback(
        [
            {"calls": [{"code": ';; write it\n(write-file "made.txt" "theirs")'}]},
            {"text": "wrote it"},
        ]
    )
    configure(home, srv, auto_approve=["write"])
    make_session(home, workspace, ["write made.txt"])
    (workspace / "made.txt").write_text("mine\n")
    return workspace / "made.txt"


def said(nv, words: str) -> str:
    return wait_for(lambda: next((n for n in notes(nv) if words in n), None))


def test_a_partial_undo_says_how_to_finish_it_and_where_the_kept_copy_is(nvim, written):
    notified(nvim)

    nvim.command("NodecodeUndo")

    partial = said(nvim, "skipped made.txt")
    assert "skipped made.txt: changed since turn 1" in partial
    assert "to finish undoing turn 1: :NodecodeUndo!" in partial
    assert written.read_text() == "mine\n"

    nvim.command("NodecodeUndo!")

    forced = said(nvim, "deleted made.txt")
    assert "nodecode blob" not in forced, forced
    assert not written.exists()
    command = forced.split("your version is kept: ")[1].rstrip(")")
    assert command.startswith(":NodecodeBlob "), forced

    nvim.command(command[1:])

    assert nvim.current.buffer[:] == ["mine"]
    assert nvim.eval("&modifiable") == 0 and nvim.current.buffer.name.startswith("nodecode://")
