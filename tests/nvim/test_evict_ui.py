""":NodecodeEvict from Neovim: one stub per evicted span (a note the person put
inside a turn goes into it), stub words that agree with their numbers, and a
percentage out of reach that says what holds the fill up."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodecode.agent.loop import Agent
from nodecode.app import App
from nodecode.context import take
from nodecode.views import status

from .conftest import configure, open_context, wait_for
from .ui_helpers import after_scheduled, messages_of, no_press_enter, notes, notified, screen

READ = {"text": "reading", "calls": [{"code": ';; read a\n(read-file "a.txt")'}]}


def floats(nv) -> list[dict]:
    """Every floating window: its lines and its size."""
    return nv.exec_lua("""
        local out = {}
        for _, w in ipairs(vim.api.nvim_list_wins()) do
          local c = vim.api.nvim_win_get_config(w)
          if c.relative ~= '' then
            local lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)
            out[#out + 1] = { lines = lines, width = c.width, height = c.height }
          end
        end
        return out
    """)


def ask_all(home: Path, workspace: Path, asks: list[str]) -> str:
    app = App.open(home=home, cwd=workspace)
    try:
        sid = app.current_session() if asks[0] != "new" else app.new_session()
        for ask in asks[asks[0] == "new" :]:
            Agent(app, sid).ask(ask)
        return sid
    finally:
        app.close()


@pytest.fixture
def noted_turn(home: Path, workspace: Path, loopback):
    """Turn 1 reads a file and answers; the person wrote a note into context.txt
    after the result, which turn 2's first request took."""
    (workspace / "a.txt").write_text("hello\n")
    srv = loopback([READ, {"text": "done reading"}, {"text": "second answer"}])
    configure(home, srv)
    sid = ask_all(home, workspace, ["new", "first question"])
    app = App.open(home=home, cwd=workspace)
    path = take.export(app.workspace, sid)
    lines = path.read_text().split("\n")
    reply = max(i for i, line in enumerate(lines) if line.endswith(" assistant]]"))
    lines[reply:reply] = ["[[note]]", "the file says hello"]
    path.write_text("\n".join(lines))
    app.close()
    ask_all(home, workspace, ["second question"])
    return sid


def stubs_in_buffer(nv) -> list[str]:
    """The bodies of the stub blocks of the context buffer."""
    open_context(nv)
    lines = nv.current.buffer[:]
    out, body = [], None
    for line in lines[1:]:
        if line.startswith("[[m:"):
            body = [] if line.endswith(" stub]]") else None
            if body is not None:
                out.append(body)
        elif body is not None:
            body.append(line)
    return ["\n".join(b) for b in out]


def test_evicting_one_turn_with_a_note_inside_makes_one_stub_carrying_the_note(
    nvim, noted_turn, home, workspace
):
    notified(nvim)

    nvim.command("NodecodeEvict through 1")

    receipt = wait_for(lambda: next((n for n in notes(nvim) if "evicted at seq" in n), None))
    assert "turn 1 (seq 1–7)" in receipt, receipt
    (stub,) = stubs_in_buffer(nvim)
    assert stub.split("\n") == [
        '[history evicted: seq 1–7 · 1 turn · recall: (recall-log :match "text" :before 8)]',
        ";; read a",
        "note: the file says hello",
    ]


@pytest.fixture
def small_window(home: Path, workspace: Path, loopback):
    """Three turns in a window where the system prompt and tools are about 14% of
    the budget."""
    srv = loopback([{"text": f"answer {n} " + "word " * 80} for n in range(3)])
    configure(home, srv)
    app = App.open(home=home, cwd=workspace)
    report = status.report(app.workspace, app.basis(strict=True), app.new_session())
    fixed = report["parts"]["system"] + report["parts"]["tools"]
    app.close()
    window = round(fixed / 0.14 / 0.75)  # the budget is three quarters of it
    configure(home, srv, model_fields={"context_window": window})
    return ask_all(home, workspace, ["first question", "second question", "third question"])


def test_evict_to_a_percent_below_the_fixed_part_says_what_it_is(
    nvim, small_window, home, workspace
):
    notified(nvim)

    nvim.command("NodecodeEvict 10")

    receipt = wait_for(lambda: next((n for n in notes(nvim) if "evicted at seq" in n), None))
    app = App.open(home=home, cwd=workspace)
    report = status.report(app.workspace, app.basis(strict=True), small_window)
    app.close()
    fixed = report["parts"]["system"] + report["parts"]["tools"]
    share = round(100 * fixed / report["budget"])
    assert share == 14 and report["percent"] > 10
    assert f"({report['percent']}%)" in receipt
    assert (
        f"10% is out of reach: the system prompt and tools alone are {share}% "
        f"({fixed} tokens)" in receipt
    ), receipt

    nvim.command("NodecodeEvict 10")  # nothing left to evict: the same reason

    again = wait_for(lambda: next((n for n in notes(nvim) if "nothing to evict" in n), None))
    assert f"the system prompt and tools alone are {share}%" in again, again


def test_a_message_wider_than_the_screen_is_whole_in_a_float_and_in_messages(
    nvim, small_window, home, workspace
):
    nvim.ui_attach(80, 24)
    nvim.command("NodecodeEvict 10")
    wait_for(lambda: "evicted at seq" in messages_of(nvim))  # its receipt comes as an event
    after_scheduled(nvim)

    with no_press_enter(nvim):
        nvim.command("NodecodeEvict 10")  # nothing left: a reason three screen lines long

        said = wait_for(
            lambda: next((x for x in messages_of(nvim).splitlines() if "nothing to evict" in x), "")
        )
        shown = wait_for(lambda: floats(nvim))
    assert len(said) > 80 and said.endswith(")"), said  # :messages keeps it whole
    assert "…" not in said
    (win,) = shown
    assert "\n".join(win["lines"]) == said
    assert win["height"] >= -(-len(said) // win["width"]), win  # every wrapped row shows
    assert not any("@@@" in row for row in screen(nvim, 24))


def test_evict_with_summaries_on_shows_the_summary_in_the_stub_of_the_context_buffer(
    nvim, home, workspace, loopback
):
    (workspace / "a.txt").write_text("hello\n")
    summary = {"text": "Turn 1 read a.txt: it says hello.", "match": "are leaving the context"}
    srv = loopback([summary, READ, {"text": "done reading"}, {"text": "second answer"}])
    configure(home, srv, evict_summary="auto")
    ask_all(home, workspace, ["new", "first question", "second question"])
    notified(nvim)

    nvim.command("NodecodeEvict through 1")

    receipt = wait_for(lambda: next((n for n in notes(nvim) if "evicted at seq" in n), None))
    assert "failed" not in receipt, receipt
    (stub,) = stubs_in_buffer(nvim)
    head, cell, note, text = stub.split("\n")
    assert head.startswith("[history evicted: seq 1–") and cell == ";; read a"
    output = srv.model_requests[-1].usage["output"]
    assert note.startswith("note: summary of seq 1–")
    assert note.endswith(f"(loopback-model, {output} tokens):")
    assert text == "  Turn 1 read a.txt: it says hello."


def test_a_long_message_stays_until_a_key_is_typed_not_when_nodecode_scrolls(nvim):
    """In a real terminal the float vanished at once: the chat's own `:normal! zb`
    after a change reached on_key like a typed key and closed it."""
    nvim.ui_attach(80, 24)
    long = "nothing to evict: " + "the fill is 889 tokens (76% of 1170); " * 4
    nvim.exec_lua("require('nodecode.message').info('%s', ...)", long)
    wait_for(lambda: floats(nvim))
    nvim.exec_lua("vim.cmd('normal! zb'); vim.cmd('normal! zE')")  # nodecode's own keys
    after_scheduled(nvim)
    (win,) = floats(nvim)
    assert long in "".join(win["lines"])
    nvim.input("<Esc>")  # the person's next key closes it
    wait_for(lambda: floats(nvim) == [])
