"""``hopline demo-server``: run the built-in demo MCP server on stdin/stdout.

This is what ``hopline relay --port 8000`` serves when no command is given, so a
newcomer reaches a working endpoint. ``python -m hopline.demo`` runs the same.
"""

from __future__ import annotations

import argparse
import asyncio

from hopline.demo.protocol import DemoProtocol
from hopline.demo.server import DEFAULT_MAX_FRAME, serve_stdio


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ttl-ms",
        type=int,
        default=60_000,
        metavar="MS",
        help="ttlMs on cacheable 2026-07-28 results (default: 60000)",
    )
    parser.add_argument(
        "--cache-scope",
        choices=["public", "private"],
        default="public",
        help="cacheScope on cacheable 2026-07-28 results (default: public)",
    )
    parser.add_argument(
        "--max-frame",
        type=int,
        default=DEFAULT_MAX_FRAME,
        metavar="BYTES",
        help="longest accepted input line (default: 16 MiB)",
    )


def run(args: argparse.Namespace) -> int:
    protocol = DemoProtocol(ttl_ms=args.ttl_ms, cache_scope=args.cache_scope)
    return asyncio.run(serve_stdio(protocol, max_frame=args.max_frame))
