"""Key hints: `?` (the picker: <C-/>) lists the keys of the buffer it is pressed
in, as configured; the empty chat says how to ask; picker titles name the toggle."""

from __future__ import annotations

from .conftest import configure, open_context, wait_for
from .ui_helpers import make_session


def hints(nv) -> dict | None:
    return nv.exec_lua("""
        local win = require('nodecode.ui.hints').win
        if not (win and vim.api.nvim_win_is_valid(win)) then return nil end
        local c = vim.api.nvim_win_get_config(win)
        return { lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false),
                 title = c.title[1][1], focused = vim.api.nvim_get_current_win() == win }
    """)


def test_question_mark_in_the_chat_lists_its_keys_as_configured(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "hello"}]))
    make_session(home, workspace, ["hi"])
    nvim.exec_lua(
        "require('nodecode').setup({ keymaps = { undo = 'gu', fork = false, stop = '<C-x>' } })"
    )
    nvim.command("Nodecode")
    nvim.command("stopinsert")
    nvim.command("wincmd k")
    assert nvim.current.buffer.name == "nodecode://chat"

    nvim.input("?")

    shown = wait_for(lambda: hints(nvim))
    assert shown["lines"] == [
        "<C-x>           stop the running turn",
        "gu              undo the last turn and its file changes",
        "<localleader>r  redo the turn the last undo took back",
        "<localleader>t  open the session tree",
        "<localleader>s  show the /context report",
        "<localleader>/  recall from the log",
        "<localleader>e  evict down to 50% of the budget",
        "<localleader>c  export the context and open it",
        "?               these keys",
        "<localleader> is \\ here (:help maplocalleader)",
    ]
    assert shown["title"] == " keys · chat " and not shown["focused"]
    nvim.input("j")  # the next key closes it
    wait_for(lambda: hints(nvim) is None)


def test_the_key_that_closes_the_list_does_nothing_else(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "hello"}]))
    make_session(home, workspace, ["hi"])
    nvim.command("Nodecode")
    nvim.command("stopinsert")
    nvim.command("wincmd k")
    nvim.input("?")
    wait_for(lambda: hints(nvim))

    nvim.input("qa")  # q closes the list; it does not then record into register a

    wait_for(lambda: hints(nvim) is None)
    assert nvim.funcs.reg_recording() == ""
    nvim.input("?")
    wait_for(lambda: hints(nvim))
    nvim.input("q?")  # q closes it, ? opens it again: no command-line window
    wait_for(lambda: hints(nvim))
    assert nvim.funcs.getcmdwintype() == ""
    assert nvim.current.buffer.name == "nodecode://chat"


def test_the_list_says_what_localleader_is(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "hello"}]))
    make_session(home, workspace, ["hi"])
    nvim.command("let maplocalleader = ' '")
    nvim.command("Nodecode")
    nvim.command("stopinsert")
    nvim.command("wincmd k")

    nvim.input("?")

    lines = wait_for(lambda: hints(nvim))["lines"]
    assert lines[-1] == "<localleader> is <Space> here (:help maplocalleader)"


def test_the_input_area_and_the_context_buffer_list_their_own_keys(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "hello"}]))
    make_session(home, workspace, ["hi"])
    nvim.exec_lua("require('nodecode').setup({ keymaps = { send = 'gs', help = 'g?' } })")
    nvim.command("Nodecode")
    nvim.command("stopinsert")

    nvim.input("g?")
    lines = wait_for(lambda: hints(nvim))["lines"]
    assert lines[:3] == [
        "gs              send the whole input as the ask",
        "<C-s>           send the ask (insert mode)",
        "<C-c>           stop the running turn",
    ]
    assert lines[-2:] == [
        "g?              these keys",
        "<localleader> is \\ here (:help maplocalleader)",
    ]

    nvim.command("wincmd k")
    open_context(nvim)
    nvim.input("g?")
    lines = wait_for(
        lambda: (hints(nvim) or {}).get("title") == " keys · context " and hints(nvim)
    )["lines"]
    assert lines[-4:-1] == [
        "<localleader>n  open the chat and its input area",
        "<localleader>m  restore a removed message into the context buffer",
        "g?              these keys",
    ]


def test_the_tree_lists_its_keys_with_remaps(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "one"}, {"text": "two"}]))
    make_session(home, workspace, ["first", "second"])
    nvim.exec_lua("require('nodecode').setup({ keymaps = { tree_buffer = { rewind = 'x' } } })")
    nvim.command("NodecodeTree")

    nvim.input("?")

    assert wait_for(lambda: hints(nvim))["lines"] == [
        "c     continue from this turn (files stay)",
        "x     rewind to this turn (files follow)",
        "R     rewind, overwriting files changed since",
        "f     fork a new session at this turn",
        "<CR>  open this turn's messages",
        "q     close the tree",
        "?     these keys",
    ]


def test_the_picker_names_its_toggle_key_and_lists_its_keys(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "one"}]))
    make_session(home, workspace, ["first"])
    nvim.exec_lua("require('nodecode').setup({ keymaps = { picker = { toggle = '<C-g>' } } })")
    windows = """local st = require('nodecode.ui.float_picker').current
        local prompt, results = vim.api.nvim_win_get_config(st.pwin), vim.api.nvim_win_get_config(st.lwin)
        return { prompt.title[1][1], results.footer[1][1] }"""
    nvim.exec_lua("vim.o.columns = 200")  # room in the footer for every hint
    nvim.command("NodecodeRecall")
    title, footer = nvim.exec_lua(windows)
    assert title == " recall: this session "
    assert footer == " <C-g> this / every session · <M-o> exports and requests · <C-/> keys "

    nvim.input("<C-/>")

    shown = wait_for(lambda: hints(nvim))
    assert shown["lines"] == [
        "<CR>   open",
        "<M-y>  insert",
        "<M-u>  restore",
        "<M-o>  show or hide export and request rows",
        "<C-g>  switch: this session / every session",
        "<C-n>  next row",
        "<C-p>  previous row",
        "<Esc>  close",
        "<C-/>  these keys",
    ]
    assert nvim.exec_lua("return require('nodecode.ui.float_picker').current ~= nil")


def test_the_empty_chat_says_how_to_ask_until_it_has_text(nvim, home, loopback):
    configure(home, loopback([{"text": "hello back"}]))
    nvim.command("Nodecode")
    shown = "return require('nodecode.ui.hints').shown(vim.fn.bufnr('nodecode://chat'))"

    assert nvim.exec_lua(shown) == (
        ":Nodecode {text} asks · :Nodecode opens the input area · ? lists the keys"
    )
    nvim.command("Nodecode hello")
    wait_for(lambda: nvim.exec_lua(shown) is None)


def test_the_empty_input_area_shows_a_placeholder_until_it_has_text(nvim, home, loopback):
    configure(home, loopback([{"text": "hello"}]))
    nvim.command("Nodecode")
    placeholder = "return require('nodecode.ui.input').shown_placeholder()"

    shown = wait_for(lambda: nvim.exec_lua(placeholder))

    assert shown == "Ask here · <CR> sends, <C-s> in insert mode · #file:PATH, #buffer · /help"
    nvim.input("hi")
    wait_for(lambda: nvim.exec_lua(placeholder) is None)
    nvim.input("<C-s>")  # sent: the input is empty again
    wait_for(lambda: nvim.exec_lua(placeholder) == shown)
