"""hopline: a gateway for agent-tool protocols (MCP, ACP)."""

__version__ = "0.1.0"
NAME = "hopline"
