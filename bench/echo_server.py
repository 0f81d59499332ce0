"""Benchmark backend: an MCP server built with the official SDK (mcp 2.3.0) exposing one ``echo`` tool.

    python bench/echo_server.py stdio                       # what relays front
    python bench/echo_server.py http --port 8801            # "direct": Streamable HTTP at http://127.0.0.1:8801/mcp

HTTP options: ``--stateless`` (legacy era without Mcp-Session-Id; the 2026 era is stateless
anyway), ``--sse`` (SSE responses instead of JSON). Defaults: stateful sessions, JSON responses,
which is the cheapest configuration the SDK offers for the direct baseline.
"""

from __future__ import annotations

import argparse
import logging
import sys

from mcp.server.mcpserver import MCPServer


def build_server() -> MCPServer:
    # WARNING keeps the SDK from logging every request (it would cost the backend CPU per call).
    server = MCPServer("hopline-bench-echo", version="1.0.0", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio", help="serve over stdio (newline-delimited JSON)")
    http = sub.add_parser("http", help="serve Streamable HTTP at http://HOST:PORT/mcp")
    http.add_argument("--port", type=int, required=True)
    http.add_argument("--host", default="127.0.0.1")
    http.add_argument("--stateless", action="store_true", help="legacy era without sessions (stateless_http=True)")
    http.add_argument("--sse", action="store_true", help="answer with text/event-stream instead of application/json")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
        return 0

    import uvicorn

    app = server.streamable_http_app(
        stateless_http=args.stateless,
        json_response=not args.sse,
        host=args.host,
        max_sessions=None,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
