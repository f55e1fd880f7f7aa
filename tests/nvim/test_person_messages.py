"""What the person is told, and how: the 85% warning and stale edits name the
Neovim commands, multi-line reports never stop Neovim at "Press ENTER", busy
messages say what to do, provider errors name the configured provider."""

from __future__ import annotations

from pathlib import Path

import pynvim
import pytest
from nodecode.app import App
from nodecode.budget.evict import manual
from nodecode.context import take

from .conftest import chat, configure, open_context, wait_for
from .ui_helpers import make_session, messages_of, no_press_enter, record_notes

LONG = " ".join(f"word{i}" for i in range(60))


def small_window(home: Path, srv, ptype: str = "anthropic", pid: str = "loopback", **extra) -> None:
    """A provider whose model has a budget of 800 tokens (window 1000, reply 200):
    the system prompt and tools alone are most of it, so the first ask warns."""
    base = srv.url if ptype == "anthropic" else srv.url + "/v1"
    model = {"id": "loopback-model", "context_window": 1000, "max_tokens": 200}
    provider = {"type": ptype, "base_url": base, "api_key_env": None, "models": [model]}
    configure(home, srv, provider=pid, providers={pid: provider}, **extra)


def notes(nv: pynvim.Nvim) -> list[dict]:
    return nv.exec_lua("return _G.notes")


def floats(nv: pynvim.Nvim) -> list[list[str]]:
    """The text of every floating window on the screen."""
    return nv.exec_lua("""
        local out = {}
        for _, w in ipairs(vim.api.nvim_list_wins()) do
          if vim.api.nvim_win_get_config(w).relative ~= '' then
            out[#out + 1] = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)
          end
        end
        return out
    """)


# -- item 4: the 85% warning and stale edits reach the person -----------------------------


def test_the_85_percent_warning_is_a_notification_naming_the_neovim_commands(
    nvim, home, workspace, loopback
):
    small_window(home, loopback([{"text": "hello back"}]))
    nvim.ui_attach(220, 40)  # wide enough that no message is cut

    nvim.command("Nodecode hello")

    wait_for(lambda: nvim.exec_lua("return require('nodecode.ui.chat').job()") is None)
    assert "> notice: [context at " in chat(nvim)  # the chat quotes what the agent read
    wait_for(lambda: ":NodecodeContext" in messages_of(nvim))
    said = next(x for x in messages_of(nvim).splitlines() if ":NodecodeContext" in x)
    assert said.startswith("nodecode: context at ") and ":NodecodeEvict" in said, said
    assert "(context)" not in said
    app = App.open(home=home, cwd=workspace)
    sid = app.current_session()
    agent_notice = [e.text for e in app.store.events(sid) if e.role == "notice"]
    app.close()
    assert len(agent_notice) == 1 and "edit it with (context)" in agent_notice[0]


def test_a_stale_write_is_refused_naming_nodecode_context(nvim, home, workspace, loopback):
    # Replies long enough that evicting one shrinks the context (a stub costs some).
    configure(home, loopback([{"text": "one " + LONG}, {"text": "two " + LONG}]))
    make_session(home, workspace, ["first ask", "second ask"])
    open_context(nvim)
    buf = nvim.current.buffer
    record_notes(nvim)
    del buf[1:3]  # the first ask goes: the buffer now holds unsaved changes
    nvim.command("NodecodeEvict through 1")  # a take: the buffer's export is now stale
    wait_for(lambda: [n for n in notes(nvim) if "evicted at seq" in n["msg"]])  # its receipt

    nvim.command("write")

    refused = wait_for(
        lambda: [n for n in notes(nvim) if n["msg"].startswith("nodecode: not written")]
    )
    assert ":NodecodeContext" in refused[0]["msg"] and "(context)" not in refused[0]["msg"]


def test_a_stale_edit_refused_at_the_request_is_a_warning_naming_nodecode_context(
    nvim, home, workspace, loopback
):
    # The first reply is long: a turn smaller than its stub is not evicted.
    long_reply = "one " + " ".join(f"word{i}" for i in range(200))
    configure(home, loopback([{"text": long_reply}, {"text": "two"}, {"text": "three"}]))
    sid = make_session(home, workspace, ["first ask", "second ask"])
    app = App.open(home=home, cwd=workspace)
    path = take.export(app.workspace, sid)
    manual(app.workspace, app.config, sid, through=1)  # a take after the export
    # An edit of the stale export that changes a block the take after it evicted:
    # it cannot be carried over (issue 24 item 2 carries only edits whose blocks remain).
    path.write_text(path.read_text().replace("\nfirst ask\n", "\nfirst ask, rewritten\n", 1))
    app.close()
    record_notes(nvim)

    nvim.command("Nodecode third ask")

    wait_for(lambda: "three" in chat(nvim))
    said = wait_for(lambda: [n for n in notes(nvim) if "refused" in n["msg"]])
    assert said[0]["level"] == nvim.exec_lua("return vim.log.levels.WARN")
    assert ":NodecodeContext" in said[0]["msg"] and "(context)" not in said[0]["msg"]
    assert "\n" not in said[0]["msg"]
    assert "refused at seq" in chat(nvim)  # the whole receipt is in the chat


# -- item 9: multi-line messages never stop at "Press ENTER" ------------------------------


def test_the_budget_report_shows_in_a_float_without_press_enter(nvim, home, loopback):
    small_window(home, loopback([]))
    nvim.ui_attach(80, 24)

    with no_press_enter(nvim):
        nvim.command("NodecodeBudget")

        shown = wait_for(lambda: [f for f in floats(nvim) if any("window" in x for x in f)])
        assert any("1000" in x and "config.jsonc" in x for x in shown[0]), shown
        assert nvim.current.window.api.get_config()["relative"] == ""  # focus stayed
        nvim.input("j")  # the next move closes it
        wait_for(lambda: floats(nvim) == [])


def test_receipts_during_a_turn_never_stop_at_press_enter(nvim, home, workspace, loopback):
    configure(home, loopback([{"text": "one"}, {"text": "two"}, {"text": "three"}]))
    sid = make_session(home, workspace, ["first ask", "second ask"])
    app = App.open(home=home, cwd=workspace)
    path = take.export(app.workspace, sid)
    text = path.read_text()
    nonce = text.split("\n", 1)[0].split()[-1].rstrip("]")
    path.write_text(text[: text.rindex(f"[[m:{nonce} ")])  # a valid edit, taken at the next ask
    app.close()
    nvim.ui_attach(80, 24)

    with no_press_enter(nvim):
        nvim.command("Nodecode third ask")

        wait_for(lambda: "three" in chat(nvim))
        said = wait_for(lambda: "nodecode: context edit taken: kept " in messages_of(nvim))
    assert said and "taken at seq" in chat(nvim)  # the whole receipt is in the chat


# -- item 15: busy messages say what to do -------------------------------------------------

BUSY = "a turn is running — :NodecodeStop to stop it"


def test_every_busy_refusal_says_a_turn_is_running_and_how_to_stop_it(
    nvim, home, workspace, loopback
):
    srv = loopback([{"text": "one"}, {"text": "two"}, {"text": LONG}], chunk_delay=0.2)
    configure(home, srv)
    other = make_session(home, workspace, [])
    make_session(home, workspace, ["first ask", "second ask"])  # the current session
    record_notes(nvim)
    nvim.command("Nodecode tell me a long story")
    wait_for(lambda: "word0" in chat(nvim))

    nvim.command("Nodecode another ask")
    nvim.command("NodecodeEvict through 1")
    nvim.command("NodecodeUndo")
    nvim.command(f"NodecodeSessions {other}")
    host_says = nvim.exec_lua("return { pcall(require('nodecode.rpc').call, 'ask', 'again') }")[1]

    said = wait_for(lambda: [n["msg"] for n in notes(nvim)] if len(notes(nvim)) >= 4 else None)
    nvim.command("NodecodeStop")
    wait_for(lambda: "_stopped_" in chat(nvim))
    assert said == [f"nodecode: {BUSY}"] * 4, said
    assert host_says == f"nodecode: {BUSY}"


# -- item 19: provider errors name the configured provider ---------------------------------


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_a_provider_error_names_the_configured_provider_not_its_type(nvim, home, loopback, ptype):
    srv = loopback([{"text": "never"}], faults=[{"at": 1, "kind": "400"}])
    small_window(home, srv, ptype, pid="workbox", max_retries=0)
    record_notes(nvim)

    nvim.command("Nodecode hello")

    failed = wait_for(lambda: [x for x in chat(nvim).splitlines() if x.startswith("_failed")])
    assert failed[0].startswith("_failed: workbox: HTTP 400"), failed
    errors = [n["msg"] for n in notes(nvim) if "HTTP 400" in n["msg"]]
    assert errors and errors[0].startswith("nodecode: workbox: HTTP 400")
    assert f"{ptype}:" not in chat(nvim)
