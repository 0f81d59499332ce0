"""A stdio MCP backend that says which process it is, for the child-pool tests.

    python pid_server.py [--start-delay SECONDS]

hopline's demo server machinery with three tools: ``pid()`` (this process's id, so a
test can tell which child served a session), ``slow(ms)`` (answers after ``ms``
milliseconds, to hold a call in flight) and ``echo(text)`` (its description
``--echo-description``, for the pinning tests: two processes, two definitions). ``--start-delay`` sleeps
before reading anything, like a server whose start-up (npx) takes seconds; requests
sent meanwhile wait in the pipe.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

try:
    import hopline  # noqa: F401
except ImportError:  # run from a checkout without an installed hopline
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from hopline.demo import Catalog, DemoProtocol, Request, StdioServer, Tool, open_stdio
from hopline.demo.catalog import integer, text


async def _pid(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text(str(os.getpid()))


async def _slow(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    ms = integer(args, "ms", 500, 0, 600_000)
    await asyncio.sleep(ms / 1000)
    return text(f"slept {ms} ms")


async def _echo(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text(str(args.get("text", "")))


def catalog(echo_description: str = "Return the text.") -> Catalog:
    return Catalog().add(
        Tool("pid", "This backend process's id.", {"type": "object", "properties": {}}, _pid),
        Tool("slow", "Answer after `ms` milliseconds.", {"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}}, _slow),
        Tool("echo", echo_description, {"type": "object", "properties": {"text": {"type": "string"}}}, _echo),
    )


async def main(echo_description: str) -> int:
    reader, outbox = await open_stdio()
    protocol = DemoProtocol(catalog(echo_description), server_info={"name": "pid-server", "version": "1.0.0"}, instructions="Says which process it is.", ttl_ms=0, cache_scope="private")
    return await StdioServer(protocol, reader, outbox, drain=0.2).run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a stdio MCP backend that reports its pid")
    parser.add_argument("--start-delay", type=float, default=0.0, metavar="SECONDS", help="sleep this long before serving")
    parser.add_argument("--echo-description", default="Return the text.", metavar="TEXT", help="the echo tool's description")
    args = parser.parse_args()
    if args.start_delay:
        time.sleep(args.start_delay)
    raise SystemExit(asyncio.run(main(args.echo_description)))
