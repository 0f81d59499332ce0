"""FastMCP's proxy as a benchmark target (run with bench/.fastmcp-venv/bin/python, not the project venv).

    python bench/fastmcp_proxy.py --url http://127.0.0.1:8801/mcp --port 8820              # keeps its backend session
    python bench/fastmcp_proxy.py --url http://127.0.0.1:8801/mcp --port 8820 --session fresh
    python bench/fastmcp_proxy.py --config servers.json --port 8820                        # mcpServers, several backends

``--session keep`` (default) is FastMCP's documented way to reuse one backend session: connect a
``fastmcp.Client`` first and hand the connected client to ``create_proxy``, which then "reuses the
existing session for all requests". ``--session fresh`` is ``create_proxy(url_or_config)``, its
default: a new backend client (and session; for stdio backends, new processes) per request.
The proxy is served over Streamable HTTP at ``http://HOST:PORT/mcp`` with uvicorn, on uvloop (as
hopline runs), JSON responses unless ``--sse``, logging at WARNING, no banner.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys


async def serve(args) -> None:
    from fastmcp import Client
    from fastmcp.server import create_proxy

    target = args.url if args.url else json.loads(open(args.config).read())
    run = dict(
        show_banner=False,
        transport="http",
        host=args.host,
        port=args.port,
        log_level="warning",
        json_response=not args.sse,
        path="/mcp",
    )
    if args.session == "keep":
        client = Client(target, mode=args.mode) if args.mode else Client(target)
        async with client:
            proxy = create_proxy(client, name="fastmcp-bench-proxy")
            print(f"fastmcp proxy (keep session) at http://{args.host}:{args.port}/mcp", file=sys.stderr, flush=True)
            await proxy.run_http_async(**run)
    else:
        proxy = create_proxy(target, name="fastmcp-bench-proxy", **({"mode": args.mode} if args.mode else {}))
        print(f"fastmcp proxy (fresh session per request) at http://{args.host}:{args.port}/mcp", file=sys.stderr, flush=True)
        await proxy.run_http_async(**run)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--url", help="one Streamable HTTP backend")
    src.add_argument("--config", help="a JSON file with mcpServers (several backends, stdio or url)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--session", choices=["keep", "fresh"], default="keep")
    p.add_argument("--mode", default=None, help="fastmcp Client mode (auto | legacy | a version); default: fastmcp's own")
    p.add_argument("--sse", action="store_true", help="SSE responses instead of JSON")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        import uvloop

        uvloop.run(serve(args))
    except ImportError:
        asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
