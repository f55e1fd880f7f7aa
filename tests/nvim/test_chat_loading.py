"""The first :Nodecode never waits for the host: the chat opens at once, and
the session's history arrives after, newest part first (doc/design.md
"Decisions": the chat's history loads in the background)."""

from __future__ import annotations

from .conftest import buffer_lines, configure, wait_for
from .ui_helpers import log_turns

OPEN_AND_LOOK = """
vim.cmd('Nodecode')
local buf = vim.fn.bufnr('nodecode://chat')
return {
  ready = require('nodecode.rpc').ready(),
  lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
  input = vim.api.nvim_buf_get_name(0),
}
"""

# Every change of the chat, as the first and last line the buffer then held.
WATCH = """
_G.chat_changes = {}
vim.api.nvim_create_autocmd('FileType', {
  pattern = 'nodecode-chat',
  once = true,
  callback = function(ev)
    vim.api.nvim_buf_attach(ev.buf, false, {
      on_lines = function(_, buf)
        vim.schedule(function()
          local n = vim.api.nvim_buf_line_count(buf)
          table.insert(_G.chat_changes, {
            vim.api.nvim_buf_get_lines(buf, 0, 2, false)[2] or '',
            vim.api.nvim_buf_get_lines(buf, n - 1, n, false)[1],
          })
        end)
      end,
    })
  end,
})
"""


def test_the_first_nodecode_returns_before_the_host_answers_then_the_history_arrives(
    nvim, home, workspace, loopback
):
    configure(home, loopback([]))
    expected = log_turns(home, workspace, 2)

    seen = nvim.exec_lua(OPEN_AND_LOOK)

    assert seen["ready"] is False  # the host had not answered when :Nodecode returned
    assert seen["lines"] == [""]
    assert seen["input"] == "nodecode://input"  # the input area is open, to type in
    assert buffer_lines(nvim, "nodecode://chat") == expected
    assert nvim.exec_lua("return require('nodecode.rpc').ready()") is True


def test_a_long_history_arrives_newest_part_first_and_whole(nvim, home, workspace, loopback):
    configure(home, loopback([]))
    expected = log_turns(home, workspace, 400)  # 800 messages: more than one part
    nvim.exec_lua(WATCH)

    nvim.command("Nodecode")

    assert buffer_lines(nvim, "nodecode://chat") == expected
    changes = wait_for(lambda: nvim.exec_lua("return _G.chat_changes"))
    first_line, last_line = changes[0]
    assert last_line == "answer 400"  # the newest turn came first...
    assert first_line != "question 1"  # ...without the oldest
    assert changes[-1] == ["question 1", "answer 400"]


def test_a_host_that_dies_before_answering_is_said_in_the_chat_and_the_next_call_starts_one(
    nvim, home, workspace, loopback, tmp_path
):
    configure(home, loopback([]))
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: no pynvim here' >&2\nexit 1\n")
    broken.chmod(0o755)
    good = nvim.vars["nodecode_python"]
    nvim.vars["nodecode_python"] = str(broken)

    nvim.command("Nodecode")

    said = "> error: the host did not start: ModuleNotFoundError: no pynvim here"
    assert wait_for(lambda: said in buffer_lines(nvim, "nodecode://chat"))
    nvim.vars["nodecode_python"] = good
    assert nvim.exec_lua("return require('nodecode.rpc').call('info').id").startswith("s-")


def test_nodecode_context_returns_before_the_export_and_the_buffer_opens_after(
    nvim, home, workspace, loopback
):
    configure(home, loopback([]))
    log_turns(home, workspace, 3)
    nvim.exec_lua("require('nodecode.rpc').call('info')")  # the host runs

    right_after = nvim.exec_lua("vim.cmd('NodecodeContext') return vim.bo.filetype")

    assert right_after != "nodecode-context"
    assert wait_for(lambda: nvim.exec_lua("return vim.bo.filetype") == "nodecode-context")
    assert nvim.current.buffer[1].startswith("[[m:")  # a block header
    assert "question 3" in nvim.current.buffer[:]
