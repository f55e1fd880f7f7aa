"""The shell verb: output and exit code, timeouts that kill, keys kept out."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from nodecode.cells.env import CellEnv
from nodecode.cells.evaluate import evaluate
from nodecode.secrets.redact import Redactor
from nodecode.verbs.table import VERBS

SECRET = "sk-ant-test-0123456789abcdef"


def test_shell_reports_output_and_exit_code(env, approvals):
    result = evaluate('(shell "echo out; echo err >&2; exit 3")', env)
    assert not result.error
    assert result.output == "out\nerr\n[exit 3]"
    assert approvals == [("shell", "echo out; echo err >&2; exit 3")]


def test_shell_without_output_and_without_final_newline(env):
    assert evaluate('(shell "true")', env).output == "[exit 0]"
    assert evaluate('(shell "printf abc")', env).output == "abc\n[exit 0]"


def test_shell_runs_in_the_workspace_with_no_stdin(env, ws):
    assert evaluate('(shell "pwd; cat")', env).output == f"{ws}\n[exit 0]"


def test_timeout_kills_the_whole_process_group(env, ws):
    started = time.monotonic()
    cmd = "sleep 30 & echo $! > bg.pid; echo started; sleep 30"
    result = evaluate(f'(shell "{cmd}" :timeout 0.5)', env)
    elapsed = time.monotonic() - started
    assert result.output == "started\n[timed out after 0.5 s]"
    assert elapsed < 3
    background = int((ws / "bg.pid").read_text())
    time.sleep(0.1)
    assert not _alive(background)


def test_env_timeout_applies_when_none_is_given(ws):
    env = CellEnv(workspace=ws, verbs=VERBS, approve=lambda kind, detail: True, shell_timeout=0.3)
    assert evaluate('(shell "sleep 30")', env).output == "[timed out after 0.3 s]"


def test_bad_timeout_is_an_error(env):
    assert "must be more than 0" in evaluate('(shell "true" :timeout 0)', env).output
    assert ":timeout must be a number" in evaluate('(shell "true" :timeout "5")', env).output


def test_background_job_holding_output_does_not_block(env):
    started = time.monotonic()
    result = evaluate('(shell "sleep 5 & echo done")', env)
    assert time.monotonic() - started < 3
    assert result.output.startswith("done\n[exit 0")


def test_provider_keys_are_removed_and_output_redacted(ws, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OTHER_SECRET", "hunter2-and-more")
    env = CellEnv(
        workspace=ws,
        verbs=VERBS,
        approve=lambda kind, detail: True,
        env_remove={"ANTHROPIC_API_KEY"},
        redact=Redactor.from_env(["ANTHROPIC_API_KEY", "OTHER_SECRET"]),
    )
    listing = evaluate('(shell "env")', env).output
    assert "ANTHROPIC_API_KEY" not in listing
    assert SECRET not in listing
    assert "OTHER_SECRET=[redacted:OTHER_SECRET]" in listing
    printed = evaluate(f'(shell "echo {SECRET}")', env).output
    assert printed == "[redacted:ANTHROPIC_API_KEY]\n[exit 0]"


def test_shell_denied_runs_nothing(ws):
    env = CellEnv(workspace=ws, verbs=VERBS, approve=lambda kind, detail: False)
    result = evaluate('(shell "touch ran")', env)
    assert (result.error, result.output) == (True, "error: shell not approved")
    assert not (ws / "ran").exists()


def test_signal_exit_is_reported_like_a_shell(env):
    assert evaluate('(shell "kill -9 $$")', env).output == "[exit 137]"


def test_invalid_utf8_output_is_replaced(env):
    assert evaluate("(shell \"printf 'a\\\\377b'\")", env).output == "a\ufffdb\n[exit 0]"


@pytest.mark.parametrize(
    "tail",
    ["sleep 600", "exec >/dev/null 2>&1; sleep 600"],
    ids=["writing", "output-closed"],
)
def test_a_stop_ends_a_running_command_and_its_group(ws, tail):
    env = CellEnv(workspace=ws, verbs=VERBS, approve=lambda kind, detail: True, shell_timeout=600)
    os.mkfifo(ws / "started")

    def stop_once_started() -> None:
        with open(ws / "started") as f:  # opens once the command writes to it: it runs
            f.read()
        env.cancel.set()

    threading.Thread(target=stop_once_started, daemon=True).start()
    cmd = f"sleep 600 & echo $! > bg.pid; echo begun; echo > started; {tail}"
    box: list = []
    runner = threading.Thread(target=lambda: box.append(evaluate(f'(shell "{cmd}")', env)))
    runner.daemon = True
    runner.start()
    runner.join(10)
    assert not runner.is_alive(), "the stop did not reach the command"
    assert box[0].output == "begun\n[stopped by the person]"
    background = int((ws / "bg.pid").read_text())
    for _ in range(200):  # SIGKILL lands asynchronously; wait for it, within a bound
        if not _alive(background):
            break
        time.sleep(0.05)
    assert not _alive(background)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(autouse=True)
def _no_stray_keys(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


# A process that left the command's session (Trust, third round, item 10)

ESCAPING = "setsid sleep 600 & echo $! > escaped.pid; echo started; sleep 600"


def escaped(ws) -> int:
    """The pid of the command's setsid child, once it is in a session of its own."""
    for _ in range(200):
        if (ws / "escaped.pid").exists() and (ws / "escaped.pid").read_text().endswith("\n"):
            pid = int((ws / "escaped.pid").read_text())
            if _alive(pid) and os.getsid(pid) == pid:
                return pid
        time.sleep(0.05)
    raise AssertionError("the setsid child never started")


def wait_dead(pid: int, limit: float = 10.0) -> bool:
    end = time.monotonic() + limit
    while _alive(pid):
        if time.monotonic() > end:
            os.kill(pid, 9)  # the test's own cleanup: never leave it running
            return False
        time.sleep(0.05)
    return True


def test_a_timeout_ends_a_child_that_moved_to_a_session_of_its_own(env, ws):
    result = evaluate(f'(shell "{ESCAPING}" :timeout 1)', env)
    pid = int((ws / "escaped.pid").read_text())
    assert wait_dead(pid, 2), "the setsid child outlived the timeout"
    assert result.output == "started\n[timed out after 1 s]"


def test_a_stop_ends_a_child_that_moved_to_a_session_of_its_own(ws):
    env = CellEnv(workspace=ws, verbs=VERBS, approve=lambda kind, detail: True, shell_timeout=600)
    box: list = []
    runner = threading.Thread(target=lambda: box.append(evaluate(f'(shell "{ESCAPING}")', env)))
    runner.daemon = True
    runner.start()
    pid = escaped(ws)
    env.cancel.set()  # what Ctrl-C does
    runner.join(10)
    assert wait_dead(pid, 2), "the setsid child outlived the stop"
    assert box[0].output == "started\n[stopped by the person]"


def test_the_watchdog_ends_a_child_that_moved_to_a_session_of_its_own(ws):
    # nodecode killed with SIGKILL mid-command: only the watchdog is left to act.
    runner = (
        "import sys\n"
        "from nodecode.cells.env import CellEnv\n"
        "from nodecode.cells.evaluate import evaluate\n"
        "from nodecode.verbs.table import VERBS\n"
        "env = CellEnv(workspace=sys.argv[1], verbs=VERBS, approve=lambda k, d: True)\n"
        "evaluate(sys.argv[2], env)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", runner, str(ws), f'(shell "{ESCAPING}")'])
    try:
        pid = escaped(ws)
    finally:
        proc.kill()
        proc.wait()
    assert wait_dead(pid), "the setsid child outlived nodecode and its watchdog"


def test_a_child_that_cannot_be_killed_is_named_in_the_result(env, ws, monkeypatch):
    from nodecode.verbs import shell

    real_kill = os.kill

    def kill_all_but_the_escaped(pid: int, sig: int) -> None:
        escaped_pid = (ws / "escaped.pid").read_text().strip()
        if str(pid) == escaped_pid:
            raise PermissionError(1, "Operation not permitted")  # as another user's would
        real_kill(pid, sig)

    monkeypatch.setattr(shell.os, "kill", kill_all_but_the_escaped)
    result = evaluate(f'(shell "{ESCAPING}" :timeout 1)', env)
    monkeypatch.undo()
    pid = int((ws / "escaped.pid").read_text())
    try:
        assert result.output == (
            f"started\n[timed out after 1 s] [still running, could not be killed: {pid} (sleep)]"
        )
    finally:
        wait_dead(pid, 0)
