"""Where the windows go: :NodecodeContext opens beside the chat (the file you
were in stays), and :NodecodeToggle twice puts the chat back in its column."""

from __future__ import annotations

import json

import pytest

from .conftest import configure, open_context
from .ui_helpers import make_session

LAYOUT = """
local function d(l)
  if l[1] == 'leaf' then
    local w = l[2]
    return { vim.fn.fnamemodify(vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)), ':t'),
             vim.api.nvim_win_get_width(w) }
  end
  local o = { l[1] }
  for _, c in ipairs(l[2]) do o[#o + 1] = d(c) end
  return o
end
return vim.json.encode(d(vim.fn.winlayout()))
"""


def layout(nv) -> list:
    """The tab's window tree: ["row"|"col", …] of [buffer name's tail, width]."""
    return json.loads(nv.exec_lua(LAYOUT))


@pytest.fixture
def calc(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "hello"}]))
    make_session(home, workspace, ["hi"])
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    nvim.ui_attach(160, 40)
    nvim.command("edit calc.py")
    return nvim


def test_context_from_a_source_window_opens_above_the_chat_and_the_file_stays(calc):
    nvim = calc
    nvim.command("Nodecode")
    nvim.command("stopinsert")
    nvim.command("wincmd h")
    assert nvim.current.buffer.name.endswith("calc.py")

    open_context(nvim)

    assert nvim.current.buffer.name.endswith("context.txt")
    assert layout(nvim) == [
        "row",
        ["calc.py", 79],
        ["col", ["context.txt", 80], ["chat", 80], ["input", 80]],
    ]
    nvim.command("wincmd h")
    open_context(nvim)  # again: the same window, none added
    assert len(nvim.api.list_wins()) == 4


def test_context_with_no_chat_shown_opens_at_the_right(calc):
    nvim = calc

    open_context(nvim)

    assert layout(nvim) == ["row", ["calc.py", 79], ["context.txt", 80]]


def test_toggle_twice_puts_the_chat_back_under_the_context_buffer(calc):
    nvim = calc
    nvim.command("Nodecode")
    nvim.command("stopinsert")
    nvim.command("wincmd k")  # in the chat
    open_context(nvim)
    nvim.command("NodecodeTree")
    before = layout(nvim)
    assert before[0] == "col" and before[1][2][1] == ["context.txt", 80]

    nvim.command("NodecodeToggle")
    nvim.command("NodecodeToggle")

    after = layout(nvim)
    assert after[0] == "col" and after[2][0] == "tree"
    assert after[1] == ["row", ["calc.py", 79], ["col", ["context.txt", 80], ["chat", 80]]]


def test_the_status_report_at_80_columns_wraps_at_words_and_shows_every_line(
    nvim, home, workspace, loopback
):
    configure(home, loopback([{"text": "one"}, {"text": "two"}]))
    make_session(home, workspace, ["first ask", "second ask"])
    nvim.ui_attach(80, 40)

    nvim.command("NodecodeStatus")

    lines = nvim.current.buffer[:]
    assert max(len(x) for x in lines) > 76  # some line is wider than the float
    win = nvim.current.window
    row, col = (x + 1 for x in nvim.funcs.win_screenpos(win.handle))  # inside its border
    width, height = win.width, win.height
    nvim.command("redraw!")
    shown = nvim.exec_lua(
        """local row, col, width, height = ...
        local out = {}
        for r = row, row + height - 1 do
          local cells = {}
          for c = col, col + width - 1 do cells[#cells + 1] = vim.fn.screenstring(r, c) end
          out[#out + 1] = table.concat(cells)
        end
        return out""",
        row,
        col,
        width,
        height,
    )
    assert " ".join(shown).split() == " ".join(lines).split(), shown  # no word cut, none missing
