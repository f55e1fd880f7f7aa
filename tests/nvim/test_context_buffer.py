""":NodecodeContext: context.txt as a real buffer with folds and marks, and
`:w` validating through the core; what the next request then reads."""

from __future__ import annotations

import re
from pathlib import Path

import pynvim
import pytest
from nodecode.app import App
from nodecode.context import take

from .conftest import configure, wait_for
from .conftest import open_context as open_and_wait
from .ui_helpers import make_session, notes, notified, screen, tokens, user_texts

ROUNDS = [
    {"text": "first answer\nits second line"},
    {"text": "second answer"},
    {"text": "third answer"},
    {"text": "fourth answer"},
]


@pytest.fixture
def two_turns(home: Path, workspace: Path, loopback):
    """A session with two finished turns (user 1, assistant 3, user 4, assistant 6)."""
    srv = loopback(ROUNDS, cache_min_tokens=1)
    configure(home, srv, model_fields={"cache_min_tokens": 1})
    make_session(home, workspace, ["first question", "second question"])
    return srv


def open_context(nv: pynvim.Nvim) -> Path:
    open_and_wait(nv)
    return Path(nv.current.buffer.name)


def folds(nv: pynvim.Nvim) -> list[tuple[int, int, str]]:
    """(line, foldclosed, foldtextresult) of every header line."""
    return nv.exec_lua("""
        local out = {}
        for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
          if l:find('^%[%[m:') then
            table.insert(out, { i, vim.fn.foldclosed(i), vim.fn.foldtextresult(i) })
          end
        end
        return out
    """)


def test_context_buffer_holds_the_export_with_a_fold_per_block(nvim, two_turns):
    nvim.exec_lua("require('nodecode').setup({ context = { open_newest = 2 } })")

    path = open_context(nvim)

    lines = nvim.current.buffer[:]
    assert path.name == "context.txt" and lines == path.read_text().split("\n")[:-1]
    nonce = lines[0].split()[-1].rstrip("]")
    assert lines[1:] == [
        f"[[m:{nonce} 1 user]]",
        "first question",
        f"[[m:{nonce} 3 assistant]]",
        "first answer",
        "its second line",
        f"[[m:{nonce} 4 user]]",
        "second question",
        f"[[m:{nonce} 6 assistant]]",
        "second answer",
    ]
    assert nvim.eval("&filetype") == "nodecode-context"
    assert [f[:2] for f in folds(nvim)] == [[2, 2], [4, 4], [7, -1], [9, -1]]  # newest 2 open
    assert [nvim.funcs.foldclosedend(n) for n in (2, 4)] == [3, 6]
    nvim.command("normal! zM")
    assert [f[2] for f in folds(nvim)] == [
        f"1 user · {tokens('first question')} tokens · first question",
        (
            f"3 assistant · {tokens('first answer' + chr(10) + 'its second line')} tokens"
            " · first answer"
        ),
        f"4 user · {tokens('second question')} tokens · second question",
        f"6 assistant · {tokens('second answer')} tokens · second answer",
    ]


def test_headers_show_token_counts_and_the_cached_prefix_is_marked(nvim, two_turns):
    nvim.ui_attach(72, 16, rgb=True)
    open_context(nvim)
    nvim.command("only")  # the whole screen (it opens beside the file)

    shown = screen(nvim, 12)
    nonce = nvim.current.buffer[0].split()[-1].rstrip("]")
    answer = tokens(ROUNDS[0]["text"])
    report = nvim.exec_lua("return require('nodecode.rpc').call('status')")
    last, cache = report["last_request"], report["cache"]
    # The last request read everything up to the second ask: the mark sits
    # above the header of the reply that came after it, with the figures of
    # :NodecodeStatus (the prompt through 4, what the last request read).
    cached = (
        f"──── cached through 4 · {cache['tokens']} tokens · the last request read "
        f"{last['cache_read']} of {last['prompt']} ────"
    )
    assert (
        [re.sub(r" {2,}", " | ", line) for line in shown[:10]]
        == [
            nvim.current.buffer[0],
            f"1 user · {tokens('first question')} tokens · first question",  # folded: once
            f"[[m:{nonce} 3 assistant]] | {answer} tok",
            "first answer",
            "its second line",
            f"[[m:{nonce} 4 user]] | {tokens('second question')} tok",
            "second question",
            cached[:72].rstrip(),
            f"[[m:{nonce} 6 assistant]] | {tokens('second answer')} tok",
            "second answer",
        ]
    )


def test_invalid_write_leaves_the_file_untouched_and_puts_diagnostics_on_the_lines(nvim, two_turns):
    path = open_context(nvim)
    before = path.read_bytes()
    buf = nvim.current.buffer
    buf[3] = buf[3].replace("assistant", "user")  # line 4: a role changed
    buf[5] = buf[5] + "]]"  # line 6: body text, fine
    buf.append("stray text before any header", 1)  # line 2
    notified(nvim)

    nvim.command("write")

    wait_for(lambda: any("not written, 2 problems" in n for n in notes(nvim)))
    assert path.read_bytes() == before
    diags = nvim.exec_lua("return vim.diagnostic.get(0)")
    assert sorted((d["lnum"] + 1, d["severity"]) for d in diags) == [(2, 1), (5, 1)]
    assert "role of message 3 changed" in next(d["message"] for d in diags if d["lnum"] == 4)
    assert nvim.eval("&modified") == 1


def test_write_is_refused_when_a_newer_export_is_on_disk(nvim, two_turns, home, workspace):
    path = open_context(nvim)
    nvim.current.buffer[2] = "first question, rewritten"
    app = App.open(home=home, cwd=workspace)
    take.export(app.workspace, app.current_session())
    app.close()
    newer = path.read_bytes()
    notified(nvim)

    nvim.command("write")

    wait_for(lambda: any("a newer export is on disk" in n for n in notes(nvim)))
    assert path.read_bytes() == newer
    assert [d["lnum"] for d in nvim.exec_lua("return vim.diagnostic.get(0)")] == [0]


def test_valid_write_is_byte_exact_and_the_next_request_reads_the_edit(nvim, two_turns):
    notified(nvim)
    path = open_context(nvim)
    nvim.command("4,6delete")  # the first answer's block
    nvim.current.buffer[2] = "first question, as I should have asked it"
    nvim.current.buffer.append(["[[note]]", "the user prefers short answers"], 3)

    nvim.command("write")

    lines = nvim.current.buffer[:]
    assert path.read_bytes() == ("\n".join(lines) + "\n").encode()
    assert nvim.eval("&modified") == 0 and nvim.exec_lua("return vim.diagnostic.get(0)") == []
    wait_for(
        lambda: any(
            "delete 1 (3)" in n and "rewrite 1 (1)" in n and "note 1" in n for n in notes(nvim)
        )
    )

    sent = len(two_turns.model_requests)
    nvim.command("Nodecode third question")

    wait_for(lambda: any(n.startswith("nodecode: context edit taken: ") for n in notes(nvim)))
    # The receipt comes at the take, just before the request is sent: wait for it.
    wait_for(lambda: len(two_turns.model_requests) > sent)
    texts = user_texts(two_turns.model_requests[-1].body)
    assert "first answer\nits second line" not in texts
    assert "first question, as I should have asked it" in texts
    assert "the user prefers short answers" in texts
    # After the turn the buffer follows a new export (export 2).
    wait_for(lambda: " 2 " in nvim.current.buffer[0])
    assert nvim.current.buffer[:] == path.read_text().split("\n")[:-1]
    assert nvim.current.buffer[-1] == "third answer"


def test_restore_key_picks_a_removed_message_and_inserts_its_header(nvim, two_turns):
    open_context(nvim)
    nvim.command("4,6delete")
    nvim.command("write")
    nvim.command("Nodecode third question")  # takes the deletion
    wait_for(lambda: nvim.current.buffer[-1] == "third answer")
    nonce = nvim.current.buffer[0].split()[-1].rstrip("]")
    assert f"[[m:{nonce} 3 assistant]]" not in nvim.current.buffer[:]

    nvim.input("\\m")
    wait_for(lambda: nvim.exec_lua("return require('nodecode.ui.float_picker').current ~= nil"))
    shown = nvim.exec_lua("""
        local st = require('nodecode.ui.float_picker').current
        return { vim.api.nvim_buf_get_lines(st.lbuf, 0, -1, false),
                 vim.api.nvim_buf_get_lines(st.vbuf, 0, -1, false) }
    """)
    assert shown[0] == ["3 assistant · first answer"]
    assert shown[1][1:] == ["first answer", "its second line"]
    nvim.input("<CR>")

    wait_for(lambda: f"[[m:{nonce} 3 assistant]]" in nvim.current.buffer[:])
    lines = nvim.current.buffer[:]
    assert lines.index(f"[[m:{nonce} 3 assistant]]") == lines.index(f"[[m:{nonce} 4 user]]") - 1
    assert nvim.eval("&modified") == 1
