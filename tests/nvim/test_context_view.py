"""How the context buffer draws its blocks: a folded block shows its token count
once, in its fold text (no right-aligned count over it), with the noun agreeing
("1 token"); an open header keeps the count at its right."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import configure
from .ui_helpers import make_session, screen, tokens

LONG = "a first line of the answer that runs on well past the edge of the window " * 2


@pytest.fixture
def short_and_long(home: Path, workspace: Path, loopback):
    """Ask 1 is one token; reply 3 has a first line wider than the window."""
    srv = loopback([{"text": LONG + "\nits second line"}, {"text": "second answer"}])
    configure(home, srv)
    make_session(home, workspace, ["hi", "second question"])
    assert tokens("hi") == 1
    return srv


def test_a_folded_block_shows_its_count_once_and_its_text_is_not_overwritten(nvim, short_and_long):
    nvim.exec_lua("require('nodecode').setup({ context = { open_newest = 1 } })")
    nvim.ui_attach(72, 12, rgb=True)
    nvim.command("NodecodeContext")
    nvim.command("only")  # the whole screen (it opens beside the file)

    shown = screen(nvim, 6)

    nonce = nvim.current.buffer[0].split()[-1].rstrip("]")
    reply = tokens(LONG + "\nits second line")
    assert shown[1] == "1 user · 1 token · hi"
    assert shown[2] == f"3 assistant · {reply} tokens · {LONG.strip()}"[:72]
    assert shown[3] == "4 user · 2 tokens · second question"
    assert re.sub(r" {2,}", " | ", shown[4]) == (
        f"[[m:{nonce} 6 assistant]] | {tokens('second answer')} tok"
    )
