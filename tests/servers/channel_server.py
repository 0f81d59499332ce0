"""A stdio MCP backend whose answers break the channel on command (issue 13 tests).

Usage: ``python channel_server.py``

hopline's demo machinery (:mod:`hopline.demo`) with its own catalog, so the handshake
and both eras behave normally. Its tools:

- ``echo(text)``: a well-behaved call.
- ``bad_utf8()``: answers with a response line for its id whose JSON string holds the
  bytes ``\\xff\\xfe`` (invalid UTF-8), and never answers properly.
- ``bad_json()``: answers with a response line for its id that is not JSON (``NaN``),
  and never answers properly.
- ``env()``: answers with the sorted names of its environment variables (JSON), and the
  value of ``OWN_SETTING`` if set, so a test can see what it inherited.
"""

from __future__ import annotations

import asyncio
import json
import os
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


def _broken(result: bytes):
    async def run(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
        req.outbox.send_raw(b'{"jsonrpc":"2.0","id":' + json.dumps(req.id).encode() + b',"result":' + result + b"}\n")
        await asyncio.Event().wait()  # the broken line was the only answer
        raise AssertionError("unreachable")

    return run


async def _env(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text(json.dumps({"names": sorted(os.environ), "OWN_SETTING": os.environ.get("OWN_SETTING")}))


CATALOG = Catalog().add(
    Tool("echo", "Return the text.", {"type": "object", "properties": {"text": {"type": "string"}}}, _echo),
    Tool("bad_utf8", "Answer with invalid UTF-8 inside a JSON string.", _NO_ARGS, _broken(b'{"content":[{"type":"text","text":"bad \xff\xfe bytes"}]}')),
    Tool("bad_json", "Answer with a line that is not JSON.", _NO_ARGS, _broken(b'{"content":[{"type":"text","text":NaN}]}')),
    Tool("env", "Answer with the names of this process's environment variables.", _NO_ARGS, _env),
)


async def main() -> int:
    reader, outbox = await open_stdio()
    protocol = DemoProtocol(CATALOG, server_info={"name": "channel-server", "version": "1.0.0"}, instructions="Breaks its answers on command.")
    return await StdioServer(protocol, reader, outbox, drain=0.2).run()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
