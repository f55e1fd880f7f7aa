"""MCP servers seen from Neovim: `:checkhealth nodecode` lists them as `nodecode
mcp` does, and no server process outlives the Neovim whose turn started it."""

from __future__ import annotations

import os
import sys
import time

from .conftest import ROOT, chat, configure, shutdown, spawn, wait_for

TOOLBOX = ROOT / "tests" / "mcp_servers" / "toolbox.py"


def servers(*flags: str) -> dict:
    return {
        "toolbox": {"command": sys.executable, "args": [str(TOOLBOX)]},
        **(
            {"broken": {"command": sys.executable, "args": [str(TOOLBOX), *flags]}} if flags else {}
        ),
    }


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_checkhealth_lists_each_server_its_status_and_tools(nvim, home, loopback):
    configure(home, loopback([]), mcp_servers=servers("--broken"))

    nvim.command("checkhealth nodecode")

    report = "\n".join(nvim.current.buffer[:])
    assert "OK MCP server toolbox: running · 7 tools: " in report, report
    assert "echo" in report.split("MCP server toolbox", 1)[1].splitlines()[0]
    assert "ERROR MCP server broken: failed" in report
    assert "missing TOOLBOX_CONFIG" in report
    assert nvim.call("remote#host#IsRunning", "nodecode") == 0  # it never starts the host


def test_no_server_process_outlives_neovim(nvim_env, home, workspace, loopback, monkeypatch):
    srv = loopback([{"calls": [{"code": '(mcp "toolbox" "pid")'}]}, {"text": "its pid, noted"}])
    configure(home, srv, mcp_servers=servers(), auto_approve=["mcp:toolbox"])
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("NODECODE_HOME", str(home))
    nv = spawn()
    try:
        nv.command("Nodecode what is your pid")
        wait_for(lambda: "its pid, noted" in chat(nv), timeout=60)
        result = srv.model_requests[1].body["messages"][-1]["content"][0]["content"]
        pid = int(result.splitlines()[0])
        assert alive(pid)
    finally:
        shutdown(nv)
    deadline = time.monotonic() + 15
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), f"MCP server {pid} outlived Neovim"
