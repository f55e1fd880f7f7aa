""":NodecodeRecall and :NodecodeSessions in the built-in floating picker:
live filtering, the every-session toggle, and each action."""

from __future__ import annotations

from pathlib import Path

import pynvim
import pytest

from .conftest import DEPS_DIR, configure, guard_unmet, open_context, wait_for
from .ui_helpers import make_session


@pytest.fixture
def sessions(home: Path, workspace: Path, loopback):
    """An older session about parsers, then the current one about tests."""
    srv = loopback(
        [
            {"text": "the parser is in parse.py"},
            {"text": "use a tokenizer"},
            {"text": "run pytest -q"},
            {"text": "tests pass now"},
        ]
    )
    configure(home, srv)
    older = make_session(home, workspace, ["where is the parser", "how to fix the parser"])
    current = make_session(home, workspace, ["how do I run the tests", "did they pass"])
    return older, current


def picker(nv: pynvim.Nvim) -> dict:
    """What the built-in picker shows: title, prompt, rows, preview."""
    return nv.exec_lua("""
        local st = require('nodecode.ui.float_picker').current
        if not st then return vim.NIL end
        local get = function(b) return vim.api.nvim_buf_get_lines(b, 0, -1, false) end
        local footers = {}
        for _, w in ipairs({ st.lwin, st.vwin }) do
          local f = vim.api.nvim_win_get_config(w).footer
          footers[#footers + 1] = type(f) == 'table' and f[1] and f[1][1] or ''
        end
        return { title = vim.api.nvim_win_get_config(st.pwin).title[1][1],
                 footers = table.concat(footers, ' | '),
                 prompt = get(st.pbuf)[1], rows = get(st.lbuf), preview = get(st.vbuf) }
    """)


def picker_key(nv: pynvim.Nvim, action: str) -> str:
    """The key keymaps.picker gives `action`."""
    return nv.exec_lua("return require('nodecode.config').get().keymaps.picker[...]", action)


def wait_rows(nv: pynvim.Nvim, pred) -> dict:
    def shown() -> dict | None:
        p = picker(nv)
        return p if p and pred(p["rows"]) else None

    return wait_for(shown)


def test_recall_picker_filters_as_you_type_and_previews_the_whole_entry(nvim, sessions):
    nvim.command("NodecodeRecall")
    first = wait_rows(nvim, lambda rows: len(rows) >= 4)
    assert "this session" in first["title"] and nvim.api.get_mode()["mode"] == "i"
    assert not any("parser" in r for r in first["rows"])

    nvim.input("pass now")

    shown = wait_rows(nvim, lambda rows: len(rows) == 1)
    assert shown["prompt"] == "pass now" and shown["rows"][0].startswith("[seq ")
    assert "· assistant] tests pass now" in shown["rows"][0]
    assert shown["preview"][1:] == ["tests pass now"]


def test_toggle_searches_every_session(nvim, sessions):
    older, _ = sessions
    nvim.command("NodecodeRecall parser")
    assert wait_rows(nvim, lambda rows: True)["rows"] == ["(no matches)"]

    nvim.input(picker_key(nvim, "toggle"))

    shown = wait_rows(nvim, lambda rows: len(rows) >= 2)  # both asks of the older session
    assert "every session" in shown["title"]
    assert all(r.startswith(f"[{older} · seq ") for r in shown["rows"])
    assert shown["preview"][0].startswith("[seq ")


def test_open_action_shows_the_entry_in_a_scratch_buffer(nvim, sessions):
    nvim.command("NodecodeRecall did they")
    wait_rows(nvim, lambda rows: len(rows) == 1)

    nvim.input("<CR>")

    wait_for(lambda: nvim.current.buffer.name.startswith("nodecode://entry/"))
    assert nvim.current.buffer[1:] == ["did they pass"]
    assert nvim.exec_lua("return require('nodecode.ui.float_picker').current") is None


def test_insert_action_puts_a_recall_entry_form_at_the_cursor(nvim, sessions):
    nvim.current.buffer[:] = ["see: "]
    nvim.command("normal! $")
    nvim.command("NodecodeRecall run the tests")
    row = wait_rows(nvim, lambda rows: len(rows) == 1)["rows"][0]
    seq = int(row.split("seq ")[1].split(" ")[0])

    nvim.input(picker_key(nvim, "insert"))

    wait_for(lambda: nvim.current.buffer[0] != "see: ")
    assert nvim.current.buffer[:] == [f"see: (recall-entry {seq})"]


def test_insert_action_separates_the_form_from_the_word_before_it(nvim, sessions):
    nvim.current.buffer[:] = ["see:"]
    nvim.command("normal! $")
    nvim.command("NodecodeRecall run the tests")
    row = wait_rows(nvim, lambda rows: len(rows) == 1)["rows"][0]
    seq = int(row.split("seq ")[1].split(" ")[0])

    nvim.input(picker_key(nvim, "insert"))

    wait_for(lambda: nvim.current.buffer[0] != "see:")
    assert nvim.current.buffer[:] == [f"see: (recall-entry {seq})"]


def test_insert_into_the_input_area_adds_a_separating_space(nvim, sessions):
    nvim.exec_lua("require('nodecode.ui.chat').open({ input = true })")
    nvim.input("compare with<Esc>")
    nvim.current.window = nvim.funcs.bufwinid("nodecode://chat")
    nvim.command("NodecodeRecall run the tests")
    row = wait_rows(nvim, lambda rows: len(rows) == 1)["rows"][0]
    seq = int(row.split("seq ")[1].split(" ")[0])

    nvim.input(picker_key(nvim, "insert"))

    want = [f"compare with (recall-entry {seq})"]
    wait_for(
        lambda: (
            nvim.exec_lua(
                "return vim.api.nvim_buf_get_lines(vim.fn.bufnr('nodecode://input'), 0, -1, false)"
            )
            == want
        )
    )


BOOKKEEPING = ("· export]", "· request]")


def test_recall_hides_export_and_request_rows_until_a_key_shows_them(
    nvim, sessions, home, workspace
):
    open_context(nvim)  # an export row in the log
    nvim.command("NodecodeRecall")
    first = wait_rows(nvim, lambda rows: len(rows) >= 4)
    assert not [r for r in first["rows"] if any(b in r for b in BOOKKEEPING)], first["rows"]
    assert "<M-o> exports and requests" in first["footers"]

    nvim.input("<M-o>")

    every = wait_rows(nvim, lambda rows: any("· request]" in r for r in rows))
    assert any("· export]" in r for r in every["rows"])
    assert "every kind" in every["title"]
    from nodecode.app import App
    from nodecode.recall import recall_log

    app = App.open(home=home, cwd=workspace)
    log = recall_log(app.store, app.current_session(), limit=50)
    app.close()
    assert any("· request]" in x for x in log)  # (recall-log) for the agent is unchanged


def test_a_query_only_bookkeeping_rows_match_offers_the_key(nvim, sessions):
    open_context(nvim)
    nvim.command("NodecodeRecall export default")
    hint = wait_rows(nvim, lambda rows: True)["rows"]
    assert len(hint) == 1 and "<M-o>" in hint[0], hint

    nvim.input("<M-o>")

    shown = wait_rows(nvim, lambda rows: len(rows) == 1 and "· export]" in rows[0])
    assert shown["prompt"] == "export default"


def drop_first_block(home: Path, workspace: Path) -> int:
    """Take an edit of the current session's context dropping its first block
    (the first ask); returns that message's seq."""
    from nodecode.app import App
    from nodecode.context import take

    app = App.open(home=home, cwd=workspace)
    sid = app.current_session()
    path = take.export(app.workspace, sid)
    text = path.read_text()
    nonce = text.split("\n", 1)[0].split()[-1].rstrip("]")
    user_seq = int(text.split(f"[[m:{nonce} ")[1].split(" ")[0])
    first = text.index(f"[[m:{nonce} ")
    cut = text.index(f"[[m:{nonce} ", first + 1)  # drop the first block (the first ask)
    path.write_text(text[: text.index("\n") + 1] + text[cut:])
    take.take(
        app.workspace, sid, take.head_turn(app.store, sid)
    )  # an idle take belongs to the head
    app.close()
    return user_seq


def test_restore_action_puts_the_header_into_the_context_buffer(nvim, sessions, home, workspace):
    user_seq = drop_first_block(home, workspace)
    open_context(nvim)
    new_nonce = nvim.current.buffer[0].split()[-1].rstrip("]")
    assert nvim.current.buffer[1] != f"[[m:{new_nonce} {user_seq} user]]"
    nvim.command("NodecodeRecall how do I run")
    wait_rows(nvim, lambda rows: len(rows) == 1)

    nvim.input(picker_key(nvim, "restore"))

    wait_for(lambda: nvim.current.buffer[1] == f"[[m:{new_nonce} {user_seq} user]]")
    assert nvim.eval("&modified") == 1


def test_sessions_picker_resumes_another_session(nvim, sessions):
    older, current = sessions
    assert nvim.exec_lua("return require('nodecode.rpc').call('info').id") == current
    nvim.command("NodecodeSessions")
    rows = wait_rows(nvim, lambda rows: len(rows) == 3)["rows"]
    assert rows[0].startswith(f"* {current}") and rows[-1] == "+ new session"

    nvim.input("where is<CR>")

    wait_for(lambda: nvim.exec_lua("return require('nodecode.rpc').call('info').id") == older)


def test_enter_at_once_in_the_sessions_picker_stays_in_the_current_session(nvim, sessions):
    _, current = sessions
    before = nvim.exec_lua("return #require('nodecode.rpc').call('sessions')")
    nvim.command("NodecodeSessions")
    wait_rows(nvim, lambda rows: len(rows) == 3)

    nvim.input("<CR>")

    wait_for(lambda: nvim.exec_lua("return vim.bo.filetype") != "nodecode-prompt")
    assert nvim.exec_lua("return require('nodecode.rpc').call('info').id") == current
    assert nvim.exec_lua("return #require('nodecode.rpc').call('sessions')") == before


# Why telescope's checkout cannot load in this Neovim, if it cannot (read once).
TELESCOPE_UNMET = guard_unmet(DEPS_DIR / "telescope.nvim") if DEPS_DIR else None


@pytest.mark.skipif(
    DEPS_DIR is None,
    reason="set NODECODE_TEST_DEPS to a directory holding checkouts named "
    "plenary.nvim and telescope.nvim",
)
@pytest.mark.skipif(bool(TELESCOPE_UNMET), reason=TELESCOPE_UNMET or "")
def test_recall_in_telescope_when_it_is_installed(nvim, sessions):
    assert DEPS_DIR is not None
    for name in ("plenary.nvim", "telescope.nvim"):
        assert (DEPS_DIR / name / "lua").is_dir(), f"NODECODE_TEST_DEPS has no {name} checkout"
    nvim.exec_lua(
        "local a, b = ...; vim.opt.rtp:append(a); vim.opt.rtp:append(b)",
        str(DEPS_DIR / "plenary.nvim"),
        str(DEPS_DIR / "telescope.nvim"),
    )
    nvim.command("runtime! plugin/telescope.lua")
    assert nvim.exec_lua("return require('nodecode.ui.picker').backend()") == "telescope"
    nvim.command("Telescope nodecode recall")
    count = """
        local state = require('telescope.actions.state')
        local p = state.get_current_picker(vim.api.nvim_get_current_buf())
        return p and p.manager and p.manager:num_results() or 0"""
    wait_for(lambda: nvim.exec_lua(count) >= 4)
    nvim.input("did they")
    wait_for(lambda: nvim.exec_lua(count) == 1)
    nvim.input(
        picker_key(nvim, "toggle")
    )  # every session: a word search, rows naming their session
    first_row = """
        local state = require('telescope.actions.state')
        local p = state.get_current_picker(vim.api.nvim_get_current_buf())
        local e = p.manager:get_entry(1)
        return e and e.display or ''"""
    wait_for(lambda: nvim.exec_lua(first_row).startswith(f"[{sessions[1]} · seq "))
    nvim.input("<CR>")
    wait_for(lambda: nvim.current.buffer.name.startswith("nodecode://entry/"))
    assert nvim.current.buffer[1:] == ["did they pass"]


def test_a_named_backend_not_installed_falls_back_to_the_builtin_picker_with_a_warning(
    nvim, sessions
):
    from .ui_helpers import notes, notified

    notified(nvim)
    nvim.exec_lua("require('nodecode').setup({ picker = { backend = 'snacks' } })")
    nvim.command("NodecodeRecall")

    assert wait_rows(nvim, lambda rows: len(rows) >= 4)
    wait_for(lambda: notes(nvim))
    assert notes(nvim) == [
        'nodecode: picker.backend is "snacks" but snacks.nvim is not installed: '
        "using the built-in picker"
    ]


def test_select_sends_the_simple_choices_to_vim_ui_select(nvim, sessions):
    older, _ = sessions
    nvim.exec_lua("""
        require('nodecode').setup({ picker = { backend = 'select' } })
        vim.ui.select = function(items, opts, on_choice)
          _G.asked = { prompt = opts.prompt, rows = vim.tbl_map(opts.format_item, items) }
          on_choice(items[2])
        end""")

    nvim.command("NodecodeSessions")

    wait_for(lambda: nvim.exec_lua("return require('nodecode.rpc').call('info').id") == older)
    asked = nvim.exec_lua("return _G.asked")
    assert asked["prompt"] == "sessions" and asked["rows"][-1] == "+ new session"
    nvim.command("NodecodeRecall")  # a search with actions: the built-in picker
    assert wait_rows(nvim, lambda rows: len(rows) >= 2)
