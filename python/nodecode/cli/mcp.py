"""`nodecode mcp`: each configured MCP server, its status and its tools."""

from __future__ import annotations

import argparse
import json
import sys

from nodecode.app import App
from nodecode.cli.common import EXIT_OK, EXIT_USER, Command


def cmd_mcp(app: App, args: argparse.Namespace) -> int:
    """Start each server (as a first use would), then list it: status, tools."""
    hub = app.mcp()
    if hub is None:
        print("[]" if args.json else "no MCP servers configured (config.jsonc: mcp_servers)")
        return EXIT_OK
    listed = hub.status(start=True)
    if args.json:
        rows = [
            {
                "name": s.name,
                "status": s.state,
                "detail": app.redact_known(s.detail),
                "tools": [{"name": t.name, "description": t.description} for t in s.tools],
            }
            for s in listed
        ]
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for s in listed:
            head = f"{s.name}: {s.state} · {len(s.tools)} tool{'s' * (len(s.tools) != 1)}"
            print(head + (f" · {app.redact_known(s.detail)}" if s.state != "running" else ""))
            for tool in s.tools:
                print("  " + app.redact_known(tool.line()))
    return EXIT_OK if all(s.state == "running" for s in listed) else EXIT_USER


COMMANDS = (
    Command(
        "mcp",
        "the MCP servers: each one's status and tools (each is started to list them)",
        cmd_mcp,
        lambda p: p.add_argument("--json", action="store_true"),
    ),
)
