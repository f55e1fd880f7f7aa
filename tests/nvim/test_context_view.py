"""How the context buffer draws its blocks: a folded block shows its token count
once, in its fold text (no right-aligned count over it), with the noun agreeing
("1 token"); an open header keeps the count at its right."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import configure, open_context, wait_for
from .ui_helpers import log_turns, make_session, screen, tokens

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
    open_context(nvim)
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


FOLDS = """
_G.folds = function()
  local out = {}
  for i, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
    if line:match('^%[%[m:') then
      local shut = vim.fn.foldclosed(i) == i
      out[#out + 1] = vim.fn.foldlevel(i) == 0 and 'none' or (shut and 'shut' or 'open')
    end
  end
  return out
end
"""

# The folds as they are when the event that opened the buffer ends.
AT_OPEN = """
local context = require('nodecode.ui.context')
local opened = context.opened
context.opened = function(ev)
  opened(ev)
  _G.at_open = _G.folds()
end
"""


def test_a_long_context_is_folded_whole_the_blocks_around_the_cursor_at_once(
    nvim, home, workspace, loopback
):
    configure(home, loopback([]))
    log_turns(home, workspace, 600)  # 1,200 blocks: more than one slice of folds
    nvim.exec_lua("require('nodecode').setup({ context = { open_newest = 2 } })")
    nvim.exec_lua(FOLDS)

    nvim.exec_lua(AT_OPEN)
    open_context(nvim)
    at_once = nvim.exec_lua("return _G.at_open")

    assert at_once[0] == "shut" and "none" in at_once  # the first blocks, not yet the rest
    folds = wait_for(lambda: "none" not in (f := nvim.exec_lua("return _G.folds()")) and f)
    assert folds == ["shut"] * 1198 + ["open"] * 2
