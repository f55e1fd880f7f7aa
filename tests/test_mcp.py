"""MCP tools (design.md §Cells and verbs): real MCP servers, started by nodecode
through the official SDK — the reference servers from PyPI (mcp-server-time,
mcp-server-git), the npm reference server where node is present, and a small
server of our own (tests/mcp_servers/toolbox.py) for errors, crashes and slow
calls — driven through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, run_cli, write_config

TOOLBOX = ROOT / "tests" / "mcp_servers" / "toolbox.py"
TOKEN = "tbx-secret-0123456789abcdefghij"


def toolbox(*flags: str, **extra) -> dict:
    return {"command": sys.executable, "args": [str(TOOLBOX), *flags], **extra}


def configure(home: Path, srv, servers: dict, **extra) -> None:
    write_config(home, srv, mcp_servers=servers, **extra)


@pytest.fixture
def place(tmp_path, loopback, workspace):
    home = tmp_path / "home"
    srv = loopback([])
    configure(
        home,
        srv,
        {
            "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
            "toolbox": toolbox(env={"TOOLBOX_TOKEN": TOKEN}),
        },
    )
    return home, workspace, srv


def cell(place, code: str, **kw):
    home, workspace, _ = place
    return run_cli("eval", code, home=home, cwd=workspace, timeout=120, **kw)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def test_mcp_tools_lists_each_tool_with_its_arguments_required_marked(place):
    done = cell(place, "(mcp-tools)")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(
        line.startswith("time/get_current_time — Get current time") and "(timezone*)" in line
        for line in lines
    ), lines
    assert (
        "toolbox/echo — Repeat TEXT (TIMES times; LOUD: upper case). (text*, times, loud)" in lines
    )
    one = cell(place, '(mcp-tools "toolbox")')
    assert one.returncode == 0 and all(x.startswith("toolbox/") for x in one.stdout.splitlines())


def test_a_call_passes_keywords_as_its_json_arguments(place):
    done = cell(place, '(mcp "toolbox" "echo" :text "hi" :times 2 :loud t)')
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "HI HI"
    done = cell(place, '(mcp "time" "get_current_time" :timezone "UTC")')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["timezone"] == "UTC"


def test_structured_content_is_json_text(place):
    done = cell(place, '(mcp "toolbox" "shape" :width 2 :height 3)')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"width": 2, "height": 3, "area": 6}


def test_a_tools_error_is_an_error_result(place):
    done = cell(place, '(mcp "toolbox" "fail" :why "no")')
    assert done.returncode == 1
    assert done.stderr.startswith("error: toolbox/fail failed: ")


def test_an_unknown_server_or_tool_is_one_line_naming_what_exists(place):
    done = cell(place, '(mcp "nope" "x")')
    assert done.returncode == 1
    assert done.stderr.strip() == 'error: mcp: no MCP server "nope" (servers: time, toolbox)'
    done = cell(place, '(mcp "toolbox" "nope")')
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'error: MCP server "toolbox" has no tool "nope" '
        "(its tools: crash, echo, fail, pid, secret, shape, slow)"
    )
    done = cell(place, '(mcp "toolbox" "echo" :text (1 2 (list)))')
    assert done.returncode == 1 and "must be a string, a number, t, nil or a list" in done.stderr


def test_what_the_config_gives_a_server_is_redacted_from_its_results(place):
    done = cell(place, '(mcp "toolbox" "secret")')
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout
    assert "[redacted:mcp_servers.toolbox.env.TOOLBOX_TOKEN]" in done.stdout


def test_a_server_that_cannot_start_names_itself_and_its_last_stderr_line(
    tmp_path, loopback, workspace
):
    home = tmp_path / "home"
    configure(home, loopback([]), {"broken": toolbox("--broken")})
    done = run_cli("eval", '(mcp "broken" "echo" :text "x")', home=home, cwd=workspace)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith('error: MCP server "broken" could not start')
    assert line.endswith("its stderr ends: toolbox: cannot start: missing TOOLBOX_CONFIG")


def test_a_server_that_dies_is_restarted_once(place):
    code = '(mcp "toolbox" "pid") (mcp "toolbox" "crash")'
    done = cell(place, code)
    assert done.returncode == 1  # the crash ended the call: an error result
    # in one cell (one App): crash, then a call restarts it, a second crash ends it for good
    cells = [
        '(mcp "toolbox" "crash")',
        '(mcp "toolbox" "echo" :text "back")',
        '(mcp "toolbox" "crash")',
        '(mcp "toolbox" "echo" :text "again")',
    ]
    home, workspace, _ = place
    script = "\n".join(
        [
            "import sys",
            "from nodecode.app import App",
            "from nodecode.cells.evaluate import evaluate",
            f"app = App.open({str(home)!r}, cwd={str(workspace)!r})",
            "sid = app.resolve_session(None)",
            "env = app.cell_env(sid, approve=lambda k, d: True)",
            f"for code in {cells!r}:",
            "    r = evaluate(code, env)",
            "    print(('ERR ' if r.error else 'OK ') + r.output.splitlines()[0])",
            "app.close()",
        ]
    )
    env = {**os.environ, "NODECODE_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    lines = out.stdout.splitlines()
    assert [line.split(" ")[0] for line in lines] == ["ERR", "OK", "ERR", "ERR"], out
    assert lines[1] == "OK back"
    assert lines[3].startswith('ERR error: MCP server "toolbox" ended'), lines


@pytest.fixture
def remote_toolbox():
    """The toolbox over streamable HTTP, wanting ``Bearer TOKEN``: its /mcp URL."""
    proc = subprocess.Popen(
        [sys.executable, str(TOOLBOX), "--http", TOKEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_url_server_gets_the_configured_headers(tmp_path, loopback, workspace, remote_toolbox):
    home = tmp_path / "home"
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    configure(
        home,
        loopback([]),
        {"remote": {"url": remote_toolbox, "headers": bearer}, "bare": {"url": remote_toolbox}},
    )
    done = run_cli("eval", '(mcp "remote" "echo" :text "over http")', home=home, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "over http"
    refused = run_cli("eval", '(mcp "bare" "echo" :text "x")', home=home, cwd=workspace)
    assert refused.returncode == 1
    assert refused.stderr.startswith('error: MCP server "bare" could not start'), refused.stderr


def test_a_call_has_a_time_limit(tmp_path, loopback, workspace):
    home = tmp_path / "home"
    configure(home, loopback([]), {"toolbox": toolbox()}, mcp_timeout=1)
    started = time.monotonic()
    call = '(mcp "toolbox" "slow" :seconds 300)'
    done = run_cli("eval", call, home=home, cwd=workspace, timeout=290)
    assert done.returncode == 1
    assert "MCP toolbox/slow: no answer within 1 s (mcp_timeout)" in done.stderr
    # Far below the call's 300 s, with room for starting the CLI and the server on a
    # loaded machine.
    assert time.monotonic() - started < 120


def test_nodecode_mcp_lists_each_server_status_and_tools(tmp_path, loopback, workspace):
    home = tmp_path / "home"
    configure(home, loopback([]), {"toolbox": toolbox(), "broken": toolbox("--broken")})
    done = run_cli("mcp", home=home, cwd=workspace, timeout=120)
    assert done.returncode == 1  # one server failed
    lines = done.stdout.splitlines()
    assert lines[0].startswith("broken: failed · 0 tools · ")
    assert "missing TOOLBOX_CONFIG" in lines[0]
    assert lines[1] == "toolbox: running · 7 tools"
    assert "  toolbox/pid — This server's process id. (no arguments)" in lines
    rows = json.loads(run_cli("mcp", "--json", home=home, cwd=workspace, timeout=120).stdout)
    assert [(r["name"], r["status"], len(r["tools"])) for r in rows] == [
        ("broken", "failed", 0),
        ("toolbox", "running", 7),
    ]


def test_no_server_process_outlives_the_cli(place):
    done = cell(place, '(mcp "toolbox" "pid")')
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def test_a_turn_calls_a_tool_approved_by_the_config_and_logs_its_result(
    tmp_path, loopback, workspace
):
    home = tmp_path / "home"
    srv = loopback(
        [
            {"calls": [{"code": ';; the time\n(mcp "time" "get_current_time" :timezone "UTC")'}]},
            {"text": "it is now"},
        ]
    )
    configure(
        home,
        srv,
        {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}},
        auto_approve=["mcp:time/get_current_time"],
    )
    done = run_cli("ask", "what time is it", home=home, cwd=workspace, timeout=120)
    assert done.returncode == 0, done.stderr
    system = "".join(b["text"] for b in srv.model_requests[0].body["system"])
    assert "MCP servers are configured: time." in system
    assert '(mcp "SERVER" "TOOL" :ARG VALUE …) - Call an MCP tool' in system
    result = srv.model_requests[1].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and '"timezone": "UTC"' in result["content"]
    search = run_cli("recall-search", "timezone", home=home, cwd=workspace)
    assert "tool" in search.stdout and "UTC" in search.stdout


def test_a_turns_call_needs_approval_unless_the_config_gives_it(tmp_path, loopback, workspace):
    home = tmp_path / "home"
    srv = loopback(
        [{"calls": [{"code": '(mcp "toolbox" "echo" :text "x")'}]}, {"text": "refused, fine"}]
    )
    configure(home, srv, {"toolbox": toolbox()}, auto_approve=["mcp:other"])
    done = run_cli("ask", "echo", home=home, cwd=workspace, input="n\n", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "mcp" in done.stderr and "toolbox/echo" in done.stderr  # the prompt showed the call
    result = srv.model_requests[1].body["messages"][-1]["content"][0]
    assert result.get("is_error") and "mcp toolbox/echo not approved" in result["content"]


def test_a_projects_mcp_json_is_read_only_when_the_config_says_so(tmp_path, loopback, workspace):
    home = tmp_path / "home"
    srv = loopback([])
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": toolbox()}}))
    configure(home, srv, {})
    done = run_cli("eval", '(mcp "proj" "pid")', home=home, cwd=workspace)
    assert done.returncode == 1 and 'unknown verb "mcp"' in done.stderr  # no servers, no verbs
    configure(home, srv, {}, mcp_project_servers=True)
    done = run_cli("eval", '(mcp "proj" "pid")', home=home, cwd=workspace, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="mcp-server-git needs git")
def test_the_reference_git_server_reports_a_repositorys_status(tmp_path, loopback, workspace):
    repo = workspace / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "new.txt").write_text("x\n")
    home = tmp_path / "home"
    configure(
        home,
        loopback([]),
        {"git": {"command": sys.executable, "args": ["-m", "mcp_server_git"]}},
    )
    done = run_cli(
        "eval",
        f'(mcp "git" "git_status" :repo_path "{repo}")',
        home=home,
        cwd=workspace,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "new.txt" in done.stdout


def test_stopping_a_turn_cancels_its_running_call(tmp_path, loopback, workspace):
    home = tmp_path / "home"
    srv = loopback([{"calls": [{"code": '(mcp "toolbox" "slow" :seconds 60)'}]}])
    configure(home, srv, {"toolbox": toolbox()}, auto_approve=["mcp"])
    cmd = [sys.executable, "-m", "nodecode", "--home", str(home), "--cwd", str(workspace)]
    proc = subprocess.Popen(
        [*cmd, "ask", "wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        log = home / "mcp" / "toolbox.stderr"
        while time.monotonic() < deadline and not (log.exists() and srv.model_requests):
            time.sleep(0.2)
        time.sleep(2)  # the call is under way
        stopped = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - stopped < 10


@pytest.mark.skipif(
    shutil.which("npm") is None, reason="the npm reference server needs node and npm"
)
def test_the_npm_reference_server_everything(tmp_path, loopback, workspace):
    prefix = tmp_path / "npm"
    install = subprocess.run(
        [
            "npm",
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "@modelcontextprotocol/server-everything",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if install.returncode != 0:
        pytest.skip(f"npm could not install the reference server: {install.stderr.strip()[:200]}")
    entry = prefix / "node_modules" / ".bin" / "mcp-server-everything"
    home = tmp_path / "home"
    configure(home, loopback([]), {"everything": {"command": str(entry), "args": ["stdio"]}})
    done = run_cli(
        "eval", '(mcp "everything" "echo" :message "hello")', home=home, cwd=workspace, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout
