"""MCP client nodes: ``mcp.server`` gives an agent the tools of an MCP
server (Model Context Protocol), through the official ``mcp`` SDK, imported
when the first connection opens, never here: the designer's palette imports
every node package."""

from .server_node import McpServer

__all__ = ["McpServer"]
