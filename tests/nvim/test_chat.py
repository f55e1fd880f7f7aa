""":Nodecode against a loopback provider: what the person sees in the chat and
what the provider receives."""

from __future__ import annotations

import json
import re

from nodecode.agent.loop import Agent
from nodecode.app import App

from .conftest import buffer_lines, chat, configure, last_user_text, wait_for

LONG = " ".join(f"word{i}" for i in range(60))


def test_ask_streams_the_reply_into_the_chat(nvim, home, loopback):
    srv = loopback([{"text": "hello from loopback"}])
    configure(home, srv)

    nvim.command("Nodecode hello")

    wait_for(lambda: "hello from loopback" in chat(nvim))
    assert buffer_lines(nvim, "nodecode://chat")[:5] == [
        "## you",
        "hello",
        "",
        "## nodecode",
        "hello from loopback",
    ]
    assert last_user_text(srv.requests[0].body) == "hello"
    assert (
        nvim.exec_lua("return vim.bo[vim.fn.bufnr('nodecode://chat')].filetype") == "nodecode-chat"
    )


def test_tool_round_shows_the_call_and_result_folded_then_the_reply(
    nvim, home, workspace, loopback
):
    (workspace / "a.txt").write_text("hello from a.txt\n")
    srv = loopback(
        [
            {
                "text": "Let me read it.",
                "calls": [{"code": ';; read the file\n(read-file "a.txt")'}],
            },
            {"text": "It says hello."},
        ]
    )
    configure(home, srv, auto_approve=["write", "shell"])

    nvim.command("Nodecode what does a.txt say?")

    wait_for(lambda: "It says hello." in chat(nvim))
    lines = buffer_lines(nvim, "nodecode://chat")
    text = "\n".join(lines)
    assert re.search(
        r'```lisp call #\d+\n;; read the file\n\(read-file "a.txt"\)\n```\n'
        r"```text result #\d+\nhello from a.txt\n\[seq \d+\]\n```",
        text,
    ), text
    assert text.index("Let me read it.") < text.index("```lisp") < text.index("It says hello.")
    call = lines.index(next(x for x in lines if x.startswith("```lisp call"))) + 1
    folded = nvim.exec_lua(
        """
        local lnum = ...
        return vim.api.nvim_win_call(vim.fn.bufwinid('nodecode://chat'), function()
          local f = vim.fn
          return { f.foldclosed(lnum), f.foldclosedend(lnum), f.foldtextresult(lnum) }
        end)
    """,
        call,
    )
    assert folded[0] == call and lines[folded[1] - 1] == "```"
    assert folded[2].startswith("▸ call #") and ";; read the file" in folded[2]


def test_stop_during_a_slow_stream_stops_it_and_the_chat_says_stopped(nvim, home, loopback):
    configure(home, loopback([{"text": LONG}], chunk_delay=0.2))

    nvim.command("Nodecode tell me a long story")
    wait_for(lambda: "word0" in chat(nvim))
    nvim.command("NodecodeStop")

    wait_for(lambda: "_stopped_" in chat(nvim))
    assert "word59" not in chat(nvim)
    assert nvim.exec_lua("return require('nodecode.ui.chat').job()") is None


def test_sync_error_is_a_one_line_lua_error_and_async_calls_still_work(nvim, home, loopback):
    configure(home, loopback([{"text": LONG}], chunk_delay=0.2))

    ok, err = nvim.exec_lua(
        "return { pcall(require('nodecode.rpc').call, 'approval', 999, 1, true) }"
    )

    assert ok is False and err == "nodecode: approval: no job 999 in this Neovim"
    nvim.command("Nodecode still there?")
    wait_for(lambda: "word0" in chat(nvim))
    nvim.command("NodecodeStop")  # an async (rpcnotify) handler: not queued behind the error
    wait_for(lambda: "_stopped_" in chat(nvim))


def test_input_area_sends_its_whole_text_as_the_ask(nvim, home, loopback):
    srv = loopback([{"text": "got both lines"}])
    configure(home, srv)

    nvim.command("Nodecode")
    assert nvim.current.buffer.name == "nodecode://input"
    assert nvim.api.get_mode()["mode"] == "i"
    nvim.input("line one<CR>line two<C-s>")

    wait_for(lambda: "got both lines" in chat(nvim))
    assert last_user_text(srv.requests[0].body) == "line one\nline two"
    assert "## you\nline one\nline two\n" in chat(nvim)
    assert buffer_lines(nvim, "nodecode://input") == [""]


def test_chat_opens_with_the_session_history(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "an earlier answer"}]))
    app = App.open(home=home, cwd=workspace)
    app.new_session()
    Agent(app, app.current_session()).ask("an earlier question")
    app.close()

    nvim.command("Nodecode")

    assert buffer_lines(nvim, "nodecode://chat") == [
        "## you",
        "an earlier question",
        "",
        "## nodecode",
        "an earlier answer",
    ]


def test_write_asks_for_approval_and_the_answer_reaches_the_agent(nvim, home, workspace, loopback):
    srv = loopback(
        [
            {"calls": [{"code": ';; write it\n(write-file "b.txt" "new text")'}]},
            {"text": "Written."},
        ]
    )
    configure(home, srv)
    nvim.exec_lua("""
        require('nodecode').setup({ approve = 'select' })
        _G.asked = {}
        vim.ui.select = function(items, opts, on_choice)
          table.insert(_G.asked, opts.prompt)
          on_choice('Yes')
        end
    """)

    nvim.command("Nodecode write b.txt")

    wait_for(lambda: "Written." in chat(nvim))
    assert (workspace / "b.txt").read_text() == "new text"
    assert nvim.exec_lua("return _G.asked")[0].startswith("nodecode wants to write")
    assert "> write: approved" in chat(nvim)


def test_a_dropped_attempt_is_marked_in_the_chat_before_the_reply(nvim, home, loopback):
    reply = "The answer, " + " ".join(f"w{i}" for i in range(60)) + "."
    srv = loopback([{"text": reply}], faults=[{"at": 1, "kind": "drop"}])
    configure(home, srv, max_retries=2, retry_backoff=0.01)

    nvim.command("Nodecode question")

    wait_for(lambda: reply in chat(nvim))
    lines = buffer_lines(nvim, "nodecode://chat")
    at = lines.index("## nodecode")
    dropped, retry, mark, answer = [x for x in lines[at + 1 :] if x]
    assert reply.startswith(dropped) and dropped != reply
    assert retry.startswith("> retry: retrying in ") and "connection dropped" in retry
    assert mark == "> dropped: the attempt above was discarded"
    assert answer == reply and len(srv.model_requests) == 2


def test_thinking_streams_into_a_block_folded_under_a_thinking_line(nvim, home, loopback):
    srv = loopback([{"thinking": ["First I weigh it.\nThen I decide."], "text": "The answer."}])
    configure(home, srv)
    path = home / "config.jsonc"
    config = json.loads(path.read_text().split("\n", 1)[1])
    config["providers"]["loopback"]["models"] = [
        {"id": "loopback-model", "max_tokens": 4096, "thinking": {"type": "adaptive"}}
    ]
    path.write_text("// thinking\n" + json.dumps(config))

    nvim.command("Nodecode think first")

    wait_for(lambda: "The answer." in chat(nvim))
    wait_for(lambda: nvim.exec_lua("return require('nodecode.ui.chat').job() == nil"))
    lines = buffer_lines(nvim, "nodecode://chat")
    assert lines[3:] == [
        "## nodecode",
        "",
        "```text thinking",
        "First I weigh it.",
        "Then I decide.",
        "```",
        "",
        "The answer.",
    ]
    fence = lines.index("```text thinking") + 1
    folded = nvim.exec_lua(
        """
        local lnum = ...
        return vim.api.nvim_win_call(vim.fn.bufwinid('nodecode://chat'), function()
          local f = vim.fn
          return { f.foldclosed(lnum), f.foldclosedend(lnum), f.foldtextresult(lnum) }
        end)
    """,
        fence,
    )
    assert folded[:2] == [fence, fence + 3]
    assert folded[2].startswith("▸ thinking") and "First I weigh it." in folded[2]

    nvim.exec_lua("require('nodecode.ui.chat').reload()")  # the same, from the log

    assert buffer_lines(nvim, "nodecode://chat") == lines
