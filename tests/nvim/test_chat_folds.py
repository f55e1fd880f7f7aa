"""The chat folds a call with its result as one block, also when the person's
approval of the call was written between them."""

from __future__ import annotations

from .conftest import buffer_lines, chat, configure, wait_for


def test_a_call_and_its_result_fold_together_around_the_approval(nvim, home, workspace, loopback):
    srv = loopback(
        [
            {"calls": [{"code": ';; write it\n(write-file "b.txt" "new text")'}]},
            {"text": "Written."},
        ]
    )
    configure(home, srv)
    nvim.exec_lua("""
        require('nodecode').setup({ approve = 'select' })
        vim.ui.select = function(items, opts, on_choice) on_choice('Yes') end
    """)

    nvim.command("Nodecode write b.txt")

    wait_for(lambda: "Written." in chat(nvim))
    lines = buffer_lines(nvim, "nodecode://chat")
    call = next(i for i, line in enumerate(lines, 1) if line.startswith("```lisp call #"))
    result = next(i for i, line in enumerate(lines, 1) if line.startswith("```text result #"))
    approved = lines.index("> write: approved") + 1
    assert call < approved < result
    win = nvim.exec_lua("return vim.fn.bufwinid('nodecode://chat')")
    closed = nvim.exec_lua(
        """
        local win, call, result = ...
        return vim.api.nvim_win_call(win, function()
          vim.cmd('normal! zM')
          return { vim.fn.foldclosed(call), vim.fn.foldclosed(result), vim.fn.foldclosedend(call) }
        end)
        """,
        win,
        call,
        result,
    )
    assert closed[0] == call and closed[1] == call  # one fold from the call
    assert closed[2] >= result + 2  # through the result's closing fence
