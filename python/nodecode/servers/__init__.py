"""Processes nodecode runs on the agent's behalf and talks to: the MCP servers
(``mcp``), started at their first use and ended with the App."""
