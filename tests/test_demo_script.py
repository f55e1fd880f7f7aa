"""The demo's scripted model (python/nodecode/demo/script.jsonl) through the real
CLI against the demo's own loopback server: each question gets its own rounds,
whatever was asked before it, and anything else a short answer saying what the
scripted model knows, never another question's rounds."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli
from nodecode.demo.__main__ import prepare

KNOWS = "I am the demo's scripted model, not a real one"


@pytest.fixture
def demo(tmp_path, monkeypatch):
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "NODECODE_SESSION"):
        monkeypatch.delenv(key, raising=False)
    prepared = prepare(tmp_path / ".demo", {})
    yield prepared
    prepared.stop()


def ask(demo, text: str):
    out = run_cli("ask", text, home=demo.workspace.parent / "home", cwd=demo.workspace, input="")
    assert out.returncode == 0, out.stderr
    return out


def test_a_question_after_a_stopped_bug_fix_gets_no_bug_fix_round(demo):
    config = demo.workspace.parent / "home" / "config.jsonc"
    data = json.loads(config.read_text().split("\n", 1)[1])
    config.write_text(json.dumps({**data, "max_rounds": 1}))  # the fix stops after its read
    calc = (demo.workspace / "calc.py").read_text()
    run_cli("new", home=demo.workspace.parent / "home")

    first = ask(demo, "fix the bug in calc.py")
    assert "Let me look at calc.py first." in first.stdout
    other = ask(demo, "what is in this folder?")
    empty = ask(demo, "what does mean do with an empty list?")
    again = ask(demo, "what is in this folder?")

    assert KNOWS in other.stdout and "divides by" not in other.stdout, other.stdout
    assert (demo.workspace / "calc.py").read_text() == calc  # no edit was made, nor asked
    assert "ZeroDivisionError" in empty.stdout
    assert KNOWS in again.stdout  # the answer to anything else stays
