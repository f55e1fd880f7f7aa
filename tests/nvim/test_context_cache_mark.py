"""The context buffer's cached-prefix line and :NodecodeStatus tell one story:
what the last request really read from cache (its usage) and where the next
request can read through, the same figures in both; an edit above the line
moves it up at once, to where the take's receipt then says the cache holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import run_cli

from .conftest import chat, configure, open_context, wait_for
from .ui_helpers import make_session, notes, notified, screen

MARK = re.compile(
    r"──── cached through (\d+) · (\d+) tokens · the last request read (\d+) of (\d+) ────"
)


@pytest.fixture
def two_turns(home: Path, workspace: Path, loopback):
    """user 1, assistant 3, user 4, assistant 6; every prefix is cacheable."""
    srv = loopback(
        [{"text": "first answer\nits second line"}, {"text": "second answer"}, {"text": "third"}],
        cache_min_tokens=1,
    )
    configure(home, srv, model_fields={"cache_min_tokens": 1})
    make_session(home, workspace, ["first question", "second question"])
    return srv


def mark(nv) -> tuple[int, int, int, int] | None:
    for line in screen(nv, 20):
        found = MARK.search(line)
        if found:
            return tuple(int(x) for x in found.groups())
    return None


def status_text(nv) -> str:
    return nv.exec_lua("return require('nodecode.rpc').call('status').text")


def test_the_mark_and_status_agree_and_an_edit_above_moves_the_mark(nvim, two_turns):
    nvim.ui_attach(140, 24, rgb=True)
    nvim.exec_lua("require('nodecode').setup({ context = { open_newest = 9 } })")
    open_context(nvim)
    nvim.command("only")  # the whole screen (it opens beside the file)

    through, tokens, read, prompt = mark(nvim)
    text = status_text(nvim)
    assert f"read {read} of {prompt} prompt tokens from cache" in text, text
    assert f"next request: cached through message {through} · {tokens} tokens" in text, text
    assert through == 4 and read > 0

    lines = nvim.current.buffer[:]
    at = next(i for i, line in enumerate(lines) if line.endswith(" 3 assistant]]"))
    nvim.command(f"{at + 1},{at + 3}delete")  # the first answer, above the mark

    moved = wait_for(lambda: (m := mark(nvim)) and m[0] != through and m)
    assert moved[0] == 1 and moved[1] < tokens and moved[2:] == (read, prompt)

    notified(nvim)
    nvim.command("write")
    wait_for(lambda: any("saved: " in n for n in notes(nvim)))
    assert mark(nvim) == moved
    assert f"next request: cached through message 1 · {moved[1]} tokens" in status_text(nvim)
    nvim.command("Nodecode third question")
    # The whole receipt is quoted in the chat; the person is told its one line.
    receipt = wait_for(lambda: (t := chat(nvim)) and "> receipt: [[receipt " in t and t)
    receipt = receipt[receipt.index("> receipt: [[receipt ") :].split("\n\n")[0]
    assert "cache: unchanged through 1" in receipt, receipt
    assert wait_for(lambda: [n for n in notes(nvim) if "context edit taken: " in n])


def test_the_mark_says_what_the_last_request_missed_and_why(nvim, home, workspace, loopback):
    srv = loopback(
        [{"text": "first answer, long enough " * 20}, {"text": "second"}, {"text": "third"}],
        cache_min_tokens=1,
    )
    configure(home, srv, model_fields={"cache_min_tokens": 1})
    make_session(home, workspace, ["first question", "second question"])
    dropped = run_cli("eval", "(context :drop ((3 . 3)))", home=home, cwd=workspace)
    assert dropped.returncode == 0, dropped.stderr
    asked = run_cli("ask", "third question", home=home, cwd=workspace)
    assert asked.returncode == 0, asked.stderr
    second, third = srv.model_requests[1].usage, srv.model_requests[2].usage
    expected = second["input"] + second["cache_read"] + second["cache_write"]
    prompt = third["input"] + third["cache_read"] + third["cache_write"]
    missed = expected - third["cache_read"]
    assert missed > 0

    nvim.ui_attach(300, 24, rgb=True)
    nvim.exec_lua("require('nodecode').setup({ context = { open_newest = 9 } })")
    open_context(nvim)
    nvim.command("only")  # the whole screen (it opens beside the file)
    line = wait_for(lambda: next((x for x in screen(nvim, 20) if "──── cached" in x), None))
    assert (
        f"· the last request read {third['cache_read']} of {prompt} · missed {missed}: the context changed above the cache mark (message 4): "
        "message 3 is no longer in the context ────"
    ) in line, line
    assert f"cache miss: expected {expected} tokens from cache" in status_text(nvim)
