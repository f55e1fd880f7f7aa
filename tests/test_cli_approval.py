"""`nodecode ask` on a terminal: the approval prompt shows a write's unified diff
and a command's directory, and a typed reason reaches the agent as the result."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest
from helpers import run_cli, write_config


def ask_on_a_terminal(home, workspace, answer: str, *args: str) -> subprocess.CompletedProcess:
    """Run `nodecode ask` with a pseudo-terminal as stdin holding ``answer``."""
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode() + b"\n")
        env = {k: v for k, v in os.environ.items() if k != "NODECODE_SESSION"}
        cmd = [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace)]
        return subprocess.run(
            [*cmd, "ask", *args],
            stdin=slave,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        os.close(slave)
        os.close(master)


@pytest.mark.parametrize("ptype", ["anthropic", "openai"])
def test_the_prompt_shows_the_diff_and_a_reason_becomes_the_result(
    loopback, home, workspace, ptype
):
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    srv = loopback([{"calls": [{"code": '(edit-file "calc.py" "a - b" "a + b")'}]}, {"text": "ok"}])
    write_config(home, srv, ptype)
    run_cli("new", home=home)

    done = ask_on_a_terminal(home, workspace, "use a helper instead", "fix it")

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

    done = ask_on_a_terminal(home, workspace, "y", "run it")

    assert f"── approve shell? touch ran.txt (in {workspace})\n" in done.stderr
    assert (workspace / "ran.txt").exists()
