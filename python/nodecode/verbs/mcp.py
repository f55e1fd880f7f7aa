"""The MCP verbs: tools of Model Context Protocol servers, called from a cell.

``(mcp-tools)`` lists every configured server's tools (``(mcp-tools "SERVER")``
one server's); ``(mcp "SERVER" "TOOL" :ARG VALUE …)`` calls one, its keyword
arguments the JSON object of arguments. A call is approved like a shell
command unless ``auto_approve`` is true or names ``mcp``, ``mcp:SERVER`` or
``mcp:SERVER/TOOL``. Its result is the tool's text, logged, capped, redacted
and recallable like any result; a tool's own error is an error result.

The family exists only where servers are configured (``family(names)``): the
system prompt then names them and how to list their tools.
"""

from __future__ import annotations

import json
from typing import Any

from nodecode.cells import approval
from nodecode.cells.env import CellEnv
from nodecode.cells.registry import Family, verb
from nodecode.errors import CellError
from nodecode.servers.mcp import McpError
from nodecode.verbs.env import in_session

OUTSIDE = "mcp: this cell runs outside a session (no MCP servers)"


def _hub(env: CellEnv) -> Any:
    session = in_session(env, OUTSIDE)
    if session.mcp is None:
        raise CellError("mcp: no MCP servers are configured (config.jsonc: mcp_servers)")
    return session.mcp


@verb("mcp-tools", optional=["server"], metavars={"server": '"SERVER"'})
def mcp_tools(env: CellEnv, server: str | None = None) -> str:
    """Each MCP tool: SERVER/TOOL — description (arguments, required marked *)."""
    hub = _hub(env)
    try:
        tools = hub.tools(server, env.cancel)
    except McpError as e:
        raise CellError(str(e)) from None
    return "\n".join(t.line() for t in tools) or "(no tools)"


@verb(
    "mcp",
    args=["server", "tool"],
    rest="arguments",
    usage='(mcp "SERVER" "TOOL" :ARG VALUE …)',
)
def mcp_call(env: CellEnv, server: str, tool: str, *, arguments: dict[str, Any]) -> str:
    """Call an MCP tool; keyword arguments are its arguments (t/nil: true/false)."""
    hub = _hub(env)
    shown = json.dumps(arguments, ensure_ascii=False)
    request = approval.Approval(
        "mcp",
        f"{server}/{tool} {shown}",
        scope=("mcp", f"mcp:{server}", f"mcp:{server}/{tool}"),
    )
    if server not in hub.names():
        known = ", ".join(hub.names()) or "none"
        raise CellError(f'mcp: no MCP server "{server}" (servers: {known})')
    approval.ask(env, request, f"mcp {server}/{tool} not approved")
    try:
        outcome = hub.call(server, tool, arguments, env.cancel)
    except McpError as e:
        raise CellError(str(e)) from None
    if outcome.error:
        raise CellError(f"{server}/{tool} failed: {outcome.text or '(no text)'}")
    return outcome.text or "(no output)"


def family(names: list[str]) -> Family:
    """The MCP verbs, with the system prompt's word on the configured servers."""
    listed = ", ".join(names)
    guidance = (
        f"MCP servers are configured: {listed}. (mcp-tools) lists their tools and "
        '(mcp "SERVER" "TOOL" :ARG VALUE …) calls one; calls may need the person\'s approval.'
    )
    return Family("mcp", (mcp_tools, mcp_call), guidance=guidance)
