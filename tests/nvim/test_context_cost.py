"""`:w` of an edit in the context buffer says, without a prompt, what the edit
does to the next request's cache in tokens and money (`:help nodecode-cost`):
the same figures `nodecode status --json` then gives for the next request."""

from __future__ import annotations

import json
import re
from pathlib import Path

from helpers import run_cli

from .conftest import configure, wait_for
from .ui_helpers import make_session

LINE = re.compile(
    r"cache kept through message (\d+) \(([\d,]+) tokens\); the next request re-writes "
    r"([\d,]+) tokens: about \$([\d.]+) more than without the edit"
)


def priced(home: Path, srv) -> None:
    """claude-sonnet-4-5, priced by models.dev's anthropic entry, on the loopback."""
    configure(home, srv)
    path = home / "config.jsonc"
    config = json.loads(path.read_text().split("\n", 1)[1])
    config["model"] = "claude-sonnet-4-5"
    config["providers"]["loopback"]["models_dev"] = "anthropic"
    path.write_text(json.dumps(config))


def floats(nv) -> list[str]:
    """The lines of every floating window now shown."""
    return nv.exec_lua("""
        local out = {}
        for _, w in ipairs(vim.api.nvim_list_wins()) do
          if vim.api.nvim_win_get_config(w).relative ~= '' then
            local b = vim.api.nvim_win_get_buf(w)
            vim.list_extend(out, vim.api.nvim_buf_get_lines(b, 0, -1, false))
          end
        end
        return out
    """)


def test_write_of_an_edit_shows_its_cost_line_without_a_prompt(nvim, home, workspace, loopback):
    srv = loopback([{"text": f"reply {i}"} for i in range(3)])
    priced(home, srv)
    make_session(
        home,
        workspace,
        [f"topic{i} " + " ".join(f"w{i}x{j}" for j in range(400)) for i in range(3)],
    )
    nvim.command("NodecodeContext")
    lines = nvim.current.buffer[:]
    heads = [i for i, line in enumerate(lines) if line.startswith("[[m:")]
    second_ask = next(i for i in heads if lines[i].endswith(" 4 user]]"))
    end = heads[heads.index(second_ask) + 1]
    del nvim.current.buffer[second_ask:end]

    nvim.input(":w<CR>")

    shown = wait_for(lambda: next((x for x in floats(nvim) if LINE.search(x)), None))
    assert nvim.api.get_mode()["blocking"] is False  # no hit-enter prompt
    through, kept, rewrite, more = LINE.search(shown).groups()
    assert through == "3" and int(rewrite.replace(",", "")) > 0 and float(more) > 0
    status = run_cli("status", "--json", home=home, cwd=workspace)
    ahead = json.loads(status.stdout)["next"]  # the saved edit is pending: the same reckoning
    assert int(kept.replace(",", "")) == ahead["cache_read"]
