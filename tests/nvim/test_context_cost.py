"""`:w` of an edit in the context buffer says, without a prompt, what the edit
does to the next request's cache in tokens and money (`:help nodecode-cost`):
the same figures `nodecode status --json` then gives for the next request."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_cli

from .conftest import ROOT, configure, wait_for
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


def header_notes(nv) -> list[str]:
    """The virtual text beside the chat's `## nodecode` headers."""
    return nv.exec_lua("""
        local buf = vim.fn.bufnr('nodecode://chat')
        local ns = vim.api.nvim_create_namespace('nodecode_cost')
        local out = {}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
          local line = vim.api.nvim_buf_get_lines(buf, m[2], m[2] + 1, false)[1]
          if m[4].virt_text then
            table.insert(out, line .. m[4].virt_text[1][1])
          end
        end
        return out
    """)


def by_hand(usage: dict) -> float:
    """claude-sonnet-4-5 at models.dev's prices (input 3, output 15, read 0.3, write
    3.75 per million) and Anthropic's 1-hour write, 2× input."""
    p = json.loads((ROOT / "python/nodecode/data/models_dev/anthropic.json").read_text())
    p = p["claude-sonnet-4-5"]["cost"]
    return (
        usage["input"] * p["input"]
        + usage["cache_read"] * p["cache_read"]
        + usage["cache_write_5m"] * p["cache_write"]
        + usage["cache_write_1h"] * 2 * p["input"]
        + usage["output"] * p["output"]
    ) / 1e6


def test_the_chat_header_and_the_statusline_show_what_was_spent(nvim, home, loopback):
    srv = loopback([{"calls": [{"code": '(context :note "plan")'}]}, {"text": "Noted."}])
    priced(home, srv)
    assert nvim.exec_lua("return require('nodecode').status()") == ""  # a statusline asks
    nvim.exec_lua("""
        _G.costs = {}
        vim.api.nvim_create_autocmd('User', { pattern = 'NodecodeRequestFinished',
          callback = function(ev) table.insert(_G.costs, ev.data.cost) end })
    """)

    nvim.command("Nodecode " + " ".join(f"w{j}" for j in range(600)))

    notes = wait_for(lambda: (n := header_notes(nvim)) and "2 requests" in n[0] and n)
    turn = sum(by_hand(r.usage) for r in srv.model_requests)
    assert notes == [f"## nodecode  ${turn:.4f} · 2 requests"]
    each = [pytest.approx(by_hand(r.usage), abs=1e-12) for r in srv.model_requests]
    assert nvim.exec_lua("return _G.costs") == each  # NodecodeRequestFinished's data.cost
    status = "return require('nodecode').status()"
    assert wait_for(lambda: nvim.exec_lua(status).endswith(f" · ${turn:.4f}"))

    nvim.command("bwipeout! nodecode://chat")
    nvim.command("Nodecode")  # the chat again, drawn from the log
    assert wait_for(lambda: header_notes(nvim)) == notes


def test_a_model_without_a_price_shows_tokens_in_the_chat_header(nvim, home, loopback):
    srv = loopback([{"text": "hello back"}])
    configure(home, srv)  # loopback-model: no price

    nvim.command("Nodecode hello")

    notes = wait_for(lambda: header_notes(nvim))
    usage = srv.model_requests[0].usage
    prompt = usage["input"] + usage["cache_read"] + usage["cache_write"]
    assert notes == [f"## nodecode  {prompt:,} in · {usage['output']} out · 1 request"]
    status = "return require('nodecode').status()"
    assert wait_for(lambda: nvim.exec_lua(status).startswith("ctx "))
    assert "$" not in nvim.exec_lua(status)
