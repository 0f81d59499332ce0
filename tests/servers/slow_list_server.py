"""A stdio MCP backend with a slow (or hung) ``tools/list`` and as many tools as asked.

Usage::

    python slow_list_server.py [--list-delay SECONDS | --hang-list] [--tools N]

Built on hopline's demo server machinery (:mod:`hopline.demo`, like
``fault_server.py``), so ``initialize`` / ``server/discover`` and both eras behave
normally and promptly. Only ``tools/list`` is affected:

- ``--list-delay SECONDS``: sleep that long before answering ``tools/list``.
- ``--hang-list``: never answer ``tools/list`` (``notifications/cancelled`` ends
  the wait, still without an answer).
- ``--tools N``: publish ``echo`` plus ``N - 1`` filler tools ``t0001`` … (all on
  one page; a gateway that pages its composed list gets a real ``nextCursor``
  from a big enough catalogue).

Tools: ``echo(text)`` (returns the text), ``tNNNN()`` (returns its own name).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

try:
    import hopline  # noqa: F401
except ImportError:  # run from a checkout without an installed hopline
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from hopline.demo import Catalog, DemoProtocol, Request, StdioServer, Tool, open_stdio
from hopline.demo.catalog import text

_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


async def _echo(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text(str(args.get("text", "")))


def _filler(name: str):
    async def run(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
        return text(name)

    return run


def catalog(tools: int) -> Catalog:
    cat = Catalog().add(Tool("echo", "Return the text.", {"type": "object", "properties": {"text": {"type": "string"}}}, _echo))
    for n in range(1, max(tools, 1)):
        name = f"t{n:04d}"
        cat.add(Tool(name, f"Filler tool {n}.", _NO_ARGS, _filler(name)))
    return cat


class SlowListProtocol(DemoProtocol):
    def __init__(self, tools: int, delay: float | None) -> None:
        super().__init__(catalog(tools), server_info={"name": "slow-list-server", "version": "1.0.0"},
                         instructions="A test backend whose tools/list is slow.", ttl_ms=0, cache_scope="private")
        self.delay = delay  # None: never answer

    async def _tools_list(self, req: Request) -> dict[str, Any]:
        if self.delay is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.delay or 0)
        return await super()._tools_list(req)


async def main(args: argparse.Namespace) -> int:
    reader, outbox = await open_stdio()
    delay = None if args.hang_list else args.list_delay
    return await StdioServer(SlowListProtocol(args.tools, delay), reader, outbox, drain=0.2).run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a stdio MCP backend with a slow tools/list")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--list-delay", type=float, default=0.0, metavar="SECONDS", help="sleep this long before answering tools/list")
    group.add_argument("--hang-list", action="store_true", help="never answer tools/list")
    parser.add_argument("--tools", type=int, default=1, metavar="N", help="publish echo plus N-1 filler tools")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
