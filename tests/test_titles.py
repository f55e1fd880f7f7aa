"""Session and turn titles: the ask's first line of words, without the fenced
blocks a range, #buffer or #file put in; `nodecode sessions` and `nodecode
tree` show them for sessions started anywhere (not only `nodecode new --title`)."""

from __future__ import annotations

from helpers import run_cli, write_config
from nodecode.agent.loop import Agent
from nodecode.app import App
from nodecode.views.titles import ask_title

RANGE_ASK = (
    "```python calc.py:9-11\ndef add(a, b):\n    return a - b\n```\n\nwhy does add subtract?"
)


def test_a_range_ask_is_titled_by_its_question():
    assert ask_title(RANGE_ASK) == "why does add subtract?"


def test_an_ask_of_blocks_only_is_titled_by_the_first_blocks_path():
    assert ask_title("```python calc.py:9-11\nx = 1\n```") == "calc.py:9-11"


def test_file_markup_reads_as_the_path_and_a_long_line_is_cut():
    assert ask_title("explain #file:calc.py and #buffer please") == "explain calc.py and please"
    assert ask_title("word " * 30) == ("word " * 12)[:60] + "…"


def test_sessions_and_tree_show_the_title_of_a_session_without_one(home, workspace, loopback):
    write_config(home, loopback([{"text": "it subtracts"}]))
    app = App.open(home=home, cwd=workspace)
    sid = app.new_session()  # as Neovim makes them: no --title
    Agent(app, sid).ask(RANGE_ASK)
    app.close()

    listed = run_cli("sessions", home=home, cwd=workspace)
    tree = run_cli("tree", home=home, cwd=workspace)

    (row,) = [line for line in listed.stdout.splitlines() if sid in line]
    assert row.endswith("turns=1  why does add subtract?"), row
    assert "1  why does add subtract? · seq 1–" in tree.stdout, tree.stdout
    assert "```" not in listed.stdout + tree.stdout
