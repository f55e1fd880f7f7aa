"""What an ask carries: a range or selection as a fenced block headed
`PATH:FIRST-LAST`, `#buffer` and `#file:PATH` expanded (in the request, the chat
and context.txt), completion of them, and asks from any window."""

from __future__ import annotations

import pytest
from helpers import write_config

from .conftest import buffer_lines, chat, last_user_text, open_context, wait_for
from .ui_helpers import idle, notes, notified

CALC = [
    "import math",
    "",
    "def add(a, b):",
    "    return a + b",
    "",
    "print(add(1, 2))",
]
BLOCK = "```python calc.py:3-5\ndef add(a, b):\n    return a + b\n\n```"


@pytest.fixture
def calc(workspace):
    (workspace / "calc.py").write_text("\n".join(CALC) + "\n")
    (workspace / "ops.py").write_text("def sub(a, b):\n    return a - b\n")
    return workspace / "calc.py"


def folded(nv, lnum: int) -> bool:
    return (
        nv.exec_lua(
            "local lnum = ... return vim.api.nvim_win_call(vim.fn.bufwinid('nodecode://chat'), "
            "function() return vim.fn.foldclosed(lnum) end)",
            lnum,
        )
        != -1
    )


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_range_sends_its_lines_as_a_block_headed_by_path_and_lines(
    nvim, home, loopback, calc, ptype
):
    srv = loopback([{"text": "It adds."}])
    write_config(home, srv, ptype)
    nvim.command("edit calc.py")

    nvim.command("3,5Nodecode what does this do?")

    wait_for(lambda: "It adds." in chat(nvim))
    assert last_user_text(srv.model_requests[0].body) == BLOCK + "\n\nwhat does this do?"
    lines = buffer_lines(nvim, "nodecode://chat")
    assert lines[:8] == ["## you", *BLOCK.split("\n"), "", "what does this do?"]
    assert folded(nvim, 2) and not folded(nvim, 8)
    assert nvim.current.buffer.name == str(calc)  # the cursor stayed in calc.py


def test_a_range_without_text_and_the_selection_mapping_open_the_input_with_the_block(
    nvim, home, loopback, calc
):
    srv = loopback([{"text": "ok"}])
    write_config(home, srv)
    nvim.command("edit calc.py")
    nvim.exec_lua("vim.keymap.set('x', 'ga', '<Plug>(nodecode-ask-selection)')")

    nvim.input("3GVjjga")

    wait_for(lambda: nvim.current.buffer.name == "nodecode://input")
    assert buffer_lines(nvim, "nodecode://input") == [*BLOCK.split("\n"), "", ""]
    assert nvim.api.get_mode()["mode"] == "i"
    nvim.input("why?<C-s>")
    wait_for(lambda: srv.model_requests)
    assert last_user_text(srv.model_requests[0].body) == BLOCK + "\n\nwhy?"


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_buffer_and_file_expand_in_the_request_the_chat_and_the_context_file(
    nvim, home, loopback, calc, ptype
):
    srv = loopback([{"text": "They differ."}])
    write_config(home, srv, ptype)
    nvim.command("edit calc.py")
    nvim.command("call setline(1, 'import cmath')")  # unsaved: #buffer is what you see

    nvim.command("Nodecode compare #buffer with #file:ops.py, please")

    wait_for(lambda: "They differ." in chat(nvim))
    buffer = "```python calc.py:1-6\n" + "\n".join(["import cmath", *CALC[1:]]) + "\n```"
    ops = "```python ops.py:1-2\ndef sub(a, b):\n    return a - b\n```"
    expected = f"compare\n{buffer}\nwith\n{ops}\n, please"
    assert last_user_text(srv.model_requests[0].body) == expected
    assert folded(nvim, 3) and folded(nvim, 12)
    open_context(nvim)
    context = "\n".join(nvim.current.buffer[:])
    assert f" user]]\n{expected}\n" in context


def test_buffer_typed_in_the_input_area_means_the_file_left_last(nvim, home, loopback, calc):
    srv = loopback([{"text": "ok"}])
    write_config(home, srv)
    nvim.command("edit ops.py")
    nvim.command("Nodecode")

    nvim.input("look at #buffer<C-s>")

    wait_for(lambda: srv.model_requests)
    assert last_user_text(srv.model_requests[0].body) == (
        "look at\n```python ops.py:1-2\ndef sub(a, b):\n    return a - b\n```"
    )


def test_the_input_area_completes_hash_words_and_workspace_files(nvim, home, loopback, calc):
    write_config(home, loopback([]))
    nvim.command("Nodecode")

    nvim.input("see #<C-x><C-o>")
    words = wait_for(
        lambda: [i["word"] for i in nvim.funcs.complete_info(["items"])["items"]] or None
    )
    assert words[:3] == ["#buffer", "#file:calc.py", "#file:ops.py"]
    nvim.input("<C-e><BS>#file:o<C-x><C-o>")
    wait_for(lambda: nvim.current.line == "see #file:ops.py")
    cmdline = nvim.funcs.getcompletion("Nodecode #file:c", "cmdline")
    assert cmdline == ["#file:calc.py"]


def test_a_bad_file_is_one_error_and_the_input_keeps_the_text(nvim, home, loopback, calc):
    srv = loopback([{"text": "never"}])
    write_config(home, srv)
    notified(nvim)
    nvim.command("Nodecode")

    nvim.input("read #file:nope.py<C-s>")

    message = wait_for(lambda: notes(nvim))
    assert message == [f"nodecode: #file:nope.py: no such file in the workspace {calc.parent}"]
    assert buffer_lines(nvim, "nodecode://input") == ["read #file:nope.py"]
    assert srv.model_requests == []


def test_an_ask_from_any_window_leaves_the_cursor_there_unless_configured(
    nvim, home, loopback, calc
):
    srv = loopback([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    write_config(home, srv)
    nvim.command("edit calc.py")
    nvim.command("vsplit ops.py")
    here = nvim.current.window

    nvim.command("Nodecode first")
    wait_for(lambda: "one" in chat(nvim))
    wait_for(lambda: idle(nvim))
    assert nvim.current.window == here and nvim.funcs.bufwinid("nodecode://chat") != -1

    nvim.exec_lua("require('nodecode').setup({ chat = { focus_on_ask = true } })")
    nvim.command("Nodecode second")
    assert nvim.current.buffer.name == "nodecode://chat"
    wait_for(lambda: "two" in chat(nvim))
    wait_for(lambda: idle(nvim))

    nvim.command("NodecodeToggle")
    assert nvim.funcs.bufwinid("nodecode://chat") == -1
    nvim.exec_lua("require('nodecode').setup({ chat = { open_on_ask = false } })")
    nvim.command("Nodecode third")
    wait_for(lambda: "three" in chat(nvim))
    assert nvim.funcs.bufwinid("nodecode://chat") == -1
    nvim.command("NodecodeToggle")
    assert nvim.funcs.bufwinid("nodecode://chat") != -1


def test_the_chat_opens_at_the_configured_side_and_width(nvim, home, loopback):
    write_config(home, loopback([{"text": "hi"}]))
    nvim.exec_lua("require('nodecode').setup({ chat = { position = 'left', size = 40 } })")

    nvim.command("Nodecode hello")

    win = nvim.funcs.bufwinid("nodecode://chat")
    assert nvim.funcs.win_screenpos(win) == [1, 1] and nvim.api.win_get_width(win) == 40
