"""`nodecode ask` on a terminal: the approval prompt shows a write's unified diff
and a command's directory, and a typed reason reaches the agent as the result."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli, run_cli_on_a_terminal, write_config


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_the_prompt_shows_the_diff_and_a_reason_becomes_the_result(
    loopback, home, workspace, ptype
):
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    srv = loopback([{"calls": [{"code": '(edit-file "calc.py" "a - b" "a + b")'}]}, {"text": "ok"}])
    write_config(home, srv, ptype)
    run_cli("new", home=home)

    done = run_cli_on_a_terminal(home, workspace, "use a helper instead", "ask", "fix it")

    assert done.returncode == 0, done.stderr
    assert (
        "── approve write? calc.py\n"
        "--- a/calc.py\n"
        "+++ b/calc.py\n"
        "@@ -1,2 +1,2 @@\n"
        " def add(a, b):\n"
        "-    return a - b\n"
        "+    return a + b\n"
        "[y/N, or a reason to refuse] "
    ) in done.stderr
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    second = json.dumps(srv.model_requests[1].body)
    assert "write to calc.py not approved: use a helper instead" in second


def test_a_shell_prompt_names_the_directory_and_y_runs_it(loopback, home, workspace):
    srv = loopback([{"calls": [{"code": '(shell "touch ran.txt")'}]}, {"text": "ok"}])
    write_config(home, srv)
    run_cli("new", home=home)

    done = run_cli_on_a_terminal(home, workspace, "y", "ask", "run it")

    assert f"── approve shell? touch ran.txt (in {workspace})\n" in done.stderr
    assert (workspace / "ran.txt").exists()
