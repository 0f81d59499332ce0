"""Gateway-benchmark backend: an SDK MCP server (``MCPServer``, mcp 2.3.0) with N dummy tools.

    python bench/gateway_backend.py stdio --tools 50             # what the gateways start, 10 times
    python bench/gateway_backend.py http --port 8811 --tools 50  # the same over Streamable HTTP

Tools:

``--tools N`` counts every tool: N-2 dummies, ``echo`` and ``grow``.

- ``tool_000`` … ``tool_{N-3}``: small schemas (``text: str``, ``n: int = 0``) and a one-line
  description, answering ``"<name>:<text>"``. They exist to be listed.
- ``echo(text)``: returns the text (so the gateway benchmark can also call through this backend).
- ``grow()``: registers one more dummy tool and sends ``notifications/tools/list_changed`` on the
  calling session; answers the new tool count. The benchmark uses it to check that a gateway
  drops its cached list when the backend says the list changed (and to time the re-list).

Each stdio process is one backend; the gateway benchmark runs ten of them.
"""

from __future__ import annotations

import argparse
import logging
import sys

from mcp.server.mcpserver import Context, MCPServer


def build_server(n_tools: int, label: str) -> MCPServer:
    server = MCPServer(f"hopline-bench-{label}", version="1.0.0", log_level="WARNING")
    count = [0]

    def add_dummy() -> None:
        i = count[0]
        name = f"tool_{i:03d}"

        def dummy(text: str, n: int = 0) -> str:
            return f"{name}:{text}"

        server.add_tool(dummy, name=name, description=f"Dummy tool {i} of {label}: returns its text argument, prefixed.")
        count[0] += 1

    for _ in range(max(0, n_tools - 2)):  # n_tools in all, with echo and grow
        add_dummy()

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add one dummy tool and announce notifications/tools/list_changed."""
        add_dummy()
        # handshake-era sessions get the notification on their own stream; 2026-07-28 clients
        # only through subscriptions/listen (the SDK's event bus)
        send = getattr(ctx.session, "send_tool_list_changed", None)
        if send is not None:
            await send()
        await ctx.notify_tools_changed()
        return str(count[0] + 2)  # dummies + echo + grow

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="transport", required=True)
    for name in ("stdio", "http"):
        sp = sub.add_parser(name)
        sp.add_argument("--tools", type=int, default=50, help="number of tools, echo and grow included (default 50)")
        sp.add_argument("--label", default="tools", help="server name suffix and description text")
        if name == "http":
            sp.add_argument("--port", type=int, required=True)
            sp.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = build_server(args.tools, args.label)
    if args.transport == "stdio":
        server.run("stdio")
        return 0

    import uvicorn

    app = server.streamable_http_app(json_response=True, host=args.host, max_sessions=None)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
