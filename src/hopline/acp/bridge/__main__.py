"""``python -m hopline.acp.bridge [--transport http|stdio] [--log-level L]``: run the bridge on our stdio.

Binds 127.0.0.1 on a free port before reading anything (so the URLs exist when
the first ``session/new`` is rewritten), serves the loopback endpoints with
uvicorn in the same loop, and on stdin EOF closes every MCP session (their
connections are disconnected over ACP), stops the listener and flushes stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import socket
import sys

from hopline.acp.bridge.proxy import Bridge
from hopline.acp.proxy_core import feed

log = logging.getLogger("hopline.acp.bridge")


async def serve(transport: str) -> int:
    import uvicorn

    from hopline.transports.stdio import open_own_stdio_halves

    inbound, outbound, feeder = await open_own_stdio_halves()
    bridge = Bridge(outbound, transport=transport)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    bridge.base = "http://127.0.0.1:%d" % sock.getsockname()[1]
    config = uvicorn.Config(
        bridge.app,
        http="httptools",
        loop="none",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    http = asyncio.create_task(server.serve(sockets=[sock]), name="bridge-http")
    writer = asyncio.create_task(bridge.write(), name="bridge-write")
    log.info("hopline MCP-over-ACP bridge: serving ACP-transport MCP servers at %s/mcp/… (%s)", bridge.base, transport)
    try:
        await feed(inbound, bridge.handle, name="bridge")
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(bridge.aclose(), 3)
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(http, 5)
        bridge.close_queue()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer, 5)
        if feeder is not None:
            feeder.cancel()
        await outbound.aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hopline.acp.bridge",
        description="hopline's MCP-over-ACP bridge (a proxy component; see hopline.acp.bridge)",
    )
    parser.add_argument(
        "--transport",
        choices=["http", "stdio"],
        default="http",
        help="how the agent is given each server (default: http)",
    )
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from hopline.runtime import run

    return run(serve(args.transport))


if __name__ == "__main__":
    raise SystemExit(main())
