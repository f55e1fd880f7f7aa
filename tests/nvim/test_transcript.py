"""The chat is the transcript of what happened, from the log: eviction and
undo do not rewrite it, failed and stopped turns keep their asks and markers
after a restart; new output scrolls into view unless the person moved away."""

from __future__ import annotations

import re
import threading

import pynvim
from nodecode.agent.loop import Agent
from nodecode.app import App

from .conftest import buffer_lines, chat, configure, wait_for
from .ui_helpers import make_session

LONG = " ".join(f"word{i}" for i in range(60))


def open_chat(nv: pynvim.Nvim) -> None:
    nv.exec_lua("require('nodecode.ui.chat').open()")


def chat_win(nv: pynvim.Nvim, expr: str):
    """``expr`` evaluated in the chat's window (line('.'), line('w0')…)."""
    return nv.exec_lua(
        "local e = ...; return vim.api.nvim_win_call(vim.fn.bufwinid('nodecode://chat'),"
        " function() return vim.fn.eval(e) end)",
        expr,
    )


def idle(nv: pynvim.Nvim) -> bool:
    return nv.exec_lua("return require('nodecode.ui.chat').job()") is None


# -- item 11: the transcript ----------------------------------------------------------------


def test_eviction_leaves_the_chat_as_it_happened_and_marks_it(nvim, home, workspace, loopback):
    long = " with enough words that a stub is smaller" * 8  # else nothing is evicted
    replies = [{"text": "the first answer" + long}, {"text": "the second answer"}]
    configure(home, loopback(replies))
    make_session(home, workspace, ["the first ask", "the second ask"])
    open_chat(nvim)
    before = buffer_lines(nvim, "nodecode://chat")

    nvim.command("NodecodeEvict through 1")

    wait_for(
        lambda: any(x.startswith("_evicted at seq ") for x in buffer_lines(nvim, "nodecode://chat"))
    )
    lines = buffer_lines(nvim, "nodecode://chat")
    assert lines[: len(before)] == before  # the asks and replies, untouched
    assert not any(x.startswith("> stub") for x in lines), lines
    marks = [x for x in lines[len(before) :] if x]
    assert len(marks) == 1 and marks[0].startswith("_evicted at seq ") and "turn 1" in marks[0]


def test_after_a_restart_failed_and_stopped_turns_show_their_asks_and_markers(
    nvim, home, workspace, loopback
):
    srv = loopback([{"text": "fine"}, {"text": "never read"}, {"text": "fine again"}])
    configure(home, srv, max_retries=0)
    app = App.open(home=home, cwd=workspace)
    sid = app.new_session()
    Agent(app, sid).ask("a good ask")
    srv.add_fault({"kind": "400"})
    Agent(app, sid).ask("an ask that fails")
    stop = threading.Event()
    stop.set()
    Agent(app, sid).ask("an ask that is stopped", None, stop)
    app.close()

    open_chat(nvim)

    text = chat(nvim)
    failed = text.index("an ask that fails")
    stopped = text.index("an ask that is stopped")
    assert failed < text.index("_failed: ") < stopped < text.index("_stopped_"), text
    assert "HTTP 400" in text[failed:stopped]


def test_an_undone_turn_stays_in_the_chat_marked_until_it_is_redone(
    nvim, home, workspace, loopback
):
    configure(home, loopback([{"text": "the first answer"}, {"text": "the second answer"}]))
    make_session(home, workspace, ["the first ask", "the second ask"])
    open_chat(nvim)

    nvim.command("NodecodeUndo")

    lines = buffer_lines(nvim, "nodecode://chat")
    assert "the second ask" in lines and "the second answer" in lines
    assert lines.index("the second answer") < lines.index("_undone_")
    nvim.command("NodecodeRedo")
    assert "_undone_" not in chat(nvim) and "the second answer" in chat(nvim)


# -- item 16: following new output ----------------------------------------------------------


def test_a_new_ask_scrolls_into_view_wherever_the_cursor_was(nvim, home, workspace, loopback):
    rounds = [{"text": "\n".join(f"line {i} of answer {n}" for i in range(30))} for n in range(3)]
    configure(home, loopback(rounds))
    make_session(home, workspace, ["ask one", "ask two"])
    nvim.ui_attach(100, 30)
    open_chat(nvim)
    nvim.current.window = nvim.funcs.bufwinid("nodecode://chat")
    nvim.input("gg")  # the person reads from the top, in the chat window
    wait_for(lambda: nvim.current.window.cursor[0] == 1)

    nvim.command("Nodecode ask three")

    wait_for(lambda: idle(nvim) and "line 29 of answer 2" in chat(nvim))
    last = len(buffer_lines(nvim, "nodecode://chat"))
    assert chat_win(nvim, "line('.')") == last and chat_win(nvim, "line('w$')") == last


def test_output_stays_where_the_person_moved_to(nvim, home, workspace, loopback):
    rounds = [{"text": "\n".join(f"line {i}" for i in range(40))}, {"text": LONG}]
    configure(home, loopback(rounds, chunk_delay=0.1))
    make_session(home, workspace, ["an earlier ask"])
    nvim.ui_attach(100, 30)
    open_chat(nvim)
    nvim.current.window = nvim.funcs.bufwinid("nodecode://chat")

    nvim.command("Nodecode tell me a long story")
    wait_for(lambda: "word1" in chat(nvim))
    nvim.input("gg")  # moved away on purpose while it streams
    wait_for(lambda: nvim.current.window.cursor[0] == 1)
    nvim.command("wincmd p")  # and left the chat: it still stays where it was left

    wait_for(lambda: idle(nvim))
    assert chat_win(nvim, "line('.')") == 1 and chat_win(nvim, "line('w0')") == 1


def test_a_long_tool_result_folds_without_leaving_a_blank_window(nvim, home, workspace, loopback):
    (workspace / "big.txt").write_text("".join(f"row {i}\n" for i in range(300)))
    srv = loopback(
        [
            {"text": "Reading it.", "calls": [{"code": ';; read it\n(read-file "big.txt")'}]},
            {"text": "It has 300 rows."},
        ]
    )
    configure(home, srv)
    nvim.ui_attach(100, 30)
    open_chat(nvim)

    nvim.command("Nodecode how long is big.txt?")

    wait_for(lambda: idle(nvim) and "It has 300 rows." in chat(nvim))
    last = len(buffer_lines(nvim, "nodecode://chat"))
    assert chat_win(nvim, "foldclosed(line('w0'))") in (-1, 1)  # no fold cut at the top
    assert chat_win(nvim, "line('w0')") == 1  # everything fits once folded: no blank window
    assert chat_win(nvim, "line('w$')") == last


def rows_below_the_end(nv: pynvim.Nvim) -> int:
    """Screen rows of the chat's window left blank under the buffer's last line."""
    return nv.exec_lua("""
        local win = vim.fn.bufwinid('nodecode://chat')
        return vim.api.nvim_win_call(win, function()
          local used = vim.api.nvim_win_text_height(win, {
            start_row = vim.fn.line('w0') - 1, end_row = vim.fn.line('$') - 1 }).all
          return vim.fn.line('w0') > 1 and vim.api.nvim_win_get_height(win) - used or 0
        end)
    """)


def test_a_redrawn_chat_keeps_its_end_at_the_bottom_of_the_window(nvim, home, workspace, loopback):
    (workspace / "big.txt").write_text("".join(f"row {i}\n" for i in range(100)))
    rounds = []
    for n in range(6):
        call = {"code": f';; read it again ({n})\n(read-file "big.txt")'}
        rounds += [{"text": f"Reading, take {n}.", "calls": [call]}, {"text": f"Read it {n}."}]
    configure(home, loopback(rounds))
    make_session(home, workspace, [f"read big.txt, take {n}" for n in range(6)])
    nvim.ui_attach(100, 30)
    open_chat(nvim)
    nvim.command("wincmd p")
    assert rows_below_the_end(nvim) == 0

    nvim.command("NodecodeUndo")  # the chat is redrawn, the input area opens under it

    assert chat_win(nvim, "line('w$')") == len(buffer_lines(nvim, "nodecode://chat"))
    assert rows_below_the_end(nvim) == 0


def test_the_redrawn_chat_reads_as_the_live_one_did(nvim, home, workspace, loopback):
    (workspace / "a.txt").write_text("hello from a.txt\n")
    srv = loopback(
        [
            {"text": "Let me read it.", "calls": [{"code": ';; read it\n(read-file "a.txt")'}]},
            {"text": "It says hello."},
            {"text": "You are welcome."},
        ]
    )
    model = {"id": "loopback-model", "context_window": 1300, "max_tokens": 400}
    provider = {"type": "anthropic", "base_url": srv.url, "api_key_env": None, "models": [model]}
    configure(home, srv, providers={"loopback": provider})
    open_chat(nvim)
    for ask in ("what does a.txt say?", "thanks"):
        nvim.command(f"Nodecode {ask}")
        wait_for(lambda: idle(nvim))
    live = chat(nvim)
    assert "_evicted at seq " in live and "[context at " in live  # warned, then evicted

    nvim.exec_lua("require('nodecode.ui.chat').reload()")

    assert re.sub(r"^> (\w+) #\d+:", r"> \1:", chat(nvim), flags=re.M) == live


def test_the_redrawn_chat_keeps_the_models_thinking(nvim, home, workspace, loopback):
    """The transcript read from the log holds the thinking the live chat showed."""
    srv = loopback([{"thinking": ["First I weigh it.\nThen I decide."], "text": "The answer."}])
    model = {"id": "loopback-model", "max_tokens": 4096, "thinking": {"type": "adaptive"}}
    provider = {"type": "anthropic", "base_url": srv.url, "api_key_env": None, "models": [model]}
    configure(home, srv, providers={"loopback": provider})
    open_chat(nvim)
    nvim.command("Nodecode think first")
    wait_for(lambda: idle(nvim))
    live = chat(nvim)
    assert "```text thinking\nFirst I weigh it.\nThen I decide.\n```" in live

    nvim.exec_lua("require('nodecode.ui.chat').reload()")

    assert chat(nvim) == live
