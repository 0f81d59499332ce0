"""hopline's built-in demo MCP server: stdlib and orjson only, never the mcp SDK.

It speaks both MCP eras on one stdio process, locking the era on the first
request as the official SDK does, and serves the tools ``echo``, ``add``,
``countdown`` and ``whoami``, the resource ``demo://readme`` and the prompt
``greet``. ``hopline demo-server`` and ``python -m hopline.demo`` run it;
``hopline relay`` serves it when given no command.

Modules: :mod:`.context` (what a handler sees), :mod:`.catalog` (the tools,
resource and prompt), :mod:`.protocol` (era lock, envelope checks, dispatch;
no I/O) and :mod:`.server` (the asyncio stdio shell).
"""

from hopline.demo.catalog import DEMO, Catalog, Prompt, Resource, Tool
from hopline.demo.context import Request, ToolError
from hopline.demo.protocol import DemoProtocol
from hopline.demo.server import StdioServer, open_stdio, serve_stdio

__all__ = [
    "DEMO",
    "Catalog",
    "DemoProtocol",
    "Prompt",
    "Request",
    "Resource",
    "StdioServer",
    "Tool",
    "ToolError",
    "open_stdio",
    "serve_stdio",
]
