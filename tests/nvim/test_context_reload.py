"""The context buffer follows the file and the session: reloading context.txt
from disk (`:e!`) re-attaches it to the export the file now holds, the
messages about a newer export name ways out that work, and after a fork the
open buffer follows the child."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodecode.app import App
from nodecode.context import take

from .conftest import configure, open_context, wait_for
from .ui_helpers import make_session, notes, notified


@pytest.fixture
def two_turns(home: Path, workspace: Path, loopback):
    srv = loopback([{"text": "first answer"}, {"text": "second answer"}, {"text": "third"}])
    configure(home, srv)
    return make_session(home, workspace, ["first question", "second question"])


def said(nv, *words: str) -> str:
    return wait_for(lambda: next((n for n in notes(nv) if all(w in n for w in words)), None))


def header_folds(nv) -> list[str]:
    """The fold text of every closed block."""
    return nv.exec_lua("""
        local out = {}
        for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
          if l:find('^%[%[m:') and vim.fn.foldclosed(i) == i then
            table.insert(out, vim.fn.foldtextresult(i))
          end
        end
        return out
    """)


def test_reloading_a_stale_buffer_attaches_it_to_the_export_on_disk(
    nvim, two_turns, home, workspace
):
    notified(nvim)
    open_context(nvim)
    path = Path(nvim.current.buffer.name)
    nvim.current.buffer[2] = "first question, rewritten"
    app = App.open(home=home, cwd=workspace)
    take.export(app.workspace, two_turns)  # `nodecode context` elsewhere: export 2
    app.close()
    newer = path.read_text().split("\n")[0]

    nvim.command("write")
    refused = said(nvim, "a newer export is on disk")
    assert ":e! loads it" in refused, refused
    open_context(nvim)
    told = said(nvim, "is on disk: ")
    assert "edits export 1 but export 2 is on disk: :e! loads it" in told, told
    assert ":w" not in told

    nvim.command("edit!")

    assert nvim.current.buffer[0] == newer and nvim.eval("&modified") == 0
    assert nvim.exec_lua("return vim.diagnostic.get(0)") == []
    assert nvim.exec_lua("return require('nodecode.ui.context').state().first") == newer
    folded = header_folds(nvim)
    assert folded and all(" tokens · " in f for f in folded), folded
    nvim.current.buffer[2] = "first question, rewritten"
    nvim.command("write")
    assert "rewrite 1 (1)" in said(nvim, "saved: ")
    assert path.read_text().split("\n")[2] == "first question, rewritten"


def test_after_a_fork_the_open_context_buffer_is_the_childs(nvim, two_turns):
    notified(nvim)
    open_context(nvim)
    parent = nvim.current.buffer.name

    nvim.command("NodecodeFork")

    child = said(nvim, "forked: ").split("session ")[-1]
    wait_for(lambda: child in nvim.current.buffer.name)
    assert two_turns not in nvim.current.buffer.name and parent != nvim.current.buffer.name
    assert child in nvim.current.buffer[0]
    assert not nvim.exec_lua(
        f"return vim.fn.bufexists({parent!r}) == 1 and vim.fn.bufloaded({parent!r}) == 1"
    )
    nvim.current.buffer[2] = "first question, in the child"
    nvim.command("write")
    assert "rewrite 1 (1)" in said(nvim, "saved: ")


def test_unsaved_edits_of_the_parent_are_named_as_such_after_a_fork(nvim, two_turns):
    notified(nvim)
    open_context(nvim)
    nvim.current.buffer[2] = "first question, rewritten"

    nvim.command("NodecodeFork")

    child = said(nvim, "forked: ").split("session ")[-1]
    warned = said(nvim, "unsaved edits of session")
    assert two_turns in warned and child in warned and ":NodecodeContext" in warned
    nvim.command("write")
    refused = said(nvim, "not written")
    assert f"context of session {two_turns}" in refused and child in refused, refused


def test_an_edit_made_while_the_buffer_follows_is_kept_and_the_new_export_waits(nvim, two_turns):
    # A follow exports on the host's worker: the person may type before it is back.
    notified(nvim)
    open_context(nvim)
    path = Path(nvim.current.buffer.name)
    exported = nvim.current.buffer[0]

    nvim.exec_lua(
        "require('nodecode.ui.context').follow()"
        " vim.api.nvim_buf_set_lines(0, 2, 3, false, { 'typed meanwhile' })"
    )

    said(nvim, "the context buffer has unsaved changes, so it stays on its export")
    assert nvim.current.buffer[2] == "typed meanwhile" and nvim.eval("&modified") == 1
    assert nvim.current.buffer[0] == exported
    assert path.read_text().split("\n")[0] != exported  # the file holds the newer export
