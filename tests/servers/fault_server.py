"""A stdio MCP backend that misbehaves on command, for the gateway's fault tests.

Usage::

    python fault_server.py [--crash-after N] [--garbage-first]

It is hopline's demo server machinery (:mod:`hopline.demo`, stdlib + orjson)
with its own catalog, so ``initialize``, ``tools/list`` and both eras behave
normally. Its tools:

- ``echo(text)``: a well-behaved call, to show the server is still alive.
- ``crash()``: the process exits with status 3 mid-call, without answering.
- ``hang()``: never answers (``notifications/cancelled`` ends it, still without an answer).
- ``garbage()``: writes a non-JSON line, then a response whose id was never
  requested (``"fault-unknown-<n>"``), then the real answer.
- ``stderr_noise(bytes=1048576)``: writes that much to stderr (blocking, so a
  parent that does not drain stderr stalls us, as real servers do), then answers.
- ``big(bytes=1048576)``: answers with one text block of that many bytes.
- ``slow(ms=500)``: answers after ``ms`` milliseconds.
- ``meta()``: answers with the request's ``params._meta`` as JSON text (what the
  gateway forwarded: trace context, hop entries).
- ``stall()``: never answers; when cancelled, writes ``cancelled stall <id>`` to the
  events file (so a test can see the ``notifications/cancelled`` arrive).
- ``flood(count=100000, bytes=1024)``: sends ``count`` ``notifications/progress`` (each
  message text ``bytes`` long; progress token from the request, else ``"flood"``) as fast
  as its stdout drains, then never answers; when cancelled, writes ``cancelled flood <id>``
  to the events file (a slow-reader test's backend).
- ``burst(count=20000, bytes=100)``: sends ``count`` ``notifications/progress`` as fast as
  its stdout drains (as ``flood``), then answers.
- ``touch(uri)``: sends ``notifications/resources/updated`` for ``uri``, then answers.
- ``log(level, text)``: sends ``notifications/message`` at ``level`` if the session's
  ``logging/setLevel`` lets it through, then answers whether it did.
- ``effect()`` / ``effect_idempotent()`` (annotated ``idempotentHint``) /
  ``effect_readonly()`` (annotated ``readOnlyHint``): write ``effect <name>`` to the
  events file, then exit with status 3 without answering: a side effect whose
  response is lost (test-battery FAULT-16).

Flags:

- ``--crash-after N``: after answering its N-th ``tools/call`` the process exits
  with status 3 (the answer is flushed first); later calls are never answered.
- ``--garbage-first``: before reading anything, print chatter to stdout: a plain
  text banner and a JSON line that is not JSON-RPC.
- ``--slow-list-ms MS``: answer ``tools/list`` only after MS milliseconds.
- ``--events FILE``: append one line per ``tools/call`` (``call <tool>``) and per
  event of the tools above to FILE, so tests can count executions and cancellations.
- ``--starts FILE``: append this process's pid to FILE when it starts, so tests can
  count how many times the gateway started the backend.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

try:
    import hopline  # noqa: F401
except ImportError:  # run from a checkout without an installed hopline
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from hopline.binding import Era
from hopline.demo import Catalog, DemoProtocol, Request, StdioServer, Tool, open_stdio
from hopline.demo.catalog import integer, text

EXIT_STATUS = 3
_unknown_ids = itertools.count(1)
_events: list[str | None] = [None]  # the --events file, if any
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def _die() -> None:
    sys.stderr.write(f"fault_server: exiting with status {EXIT_STATUS} as asked\n")
    sys.stderr.flush()
    os._exit(EXIT_STATUS)


async def _echo(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text(str(args.get("text", "")))


async def _crash(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    _die()
    raise AssertionError("unreachable")


async def _hang(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    sys.stderr.write(f"fault_server: hanging on request {req.id!r}\n")  # tests wait for this line
    sys.stderr.flush()
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _garbage(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    req.outbox.send_raw(b"this line is not JSON at all\n")
    stray = {"jsonrpc": "2.0", "id": f"fault-unknown-{next(_unknown_ids)}", "result": {"content": text("stray")}}
    req.outbox.send(stray)
    return text("garbage sent, and this is the real answer")


async def _stderr_noise(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    size = integer(args, "bytes", 1 << 20, 0, 1 << 30)
    line = b"fault_server noise " + b"." * 80 + b"\n"
    written = 0
    while written < size:
        chunk = line[: size - written]
        sys.stderr.buffer.write(chunk)
        written += len(chunk)
    sys.stderr.buffer.flush()
    return text(f"wrote {written} bytes to stderr")


async def _big(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text("x" * integer(args, "bytes", 1 << 20, 0, 1 << 28))


def _event(line: str) -> None:
    if _events[0] is not None:
        with open(_events[0], "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


async def _slow(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    ms = integer(args, "ms", 500, 0, 600_000)
    await asyncio.sleep(ms / 1000)
    return text(f"slept {ms} ms")


async def _meta(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text(json.dumps(req.meta, sort_keys=True))


async def _stall(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        _event(f"cancelled stall {req.id}")
        raise
    raise AssertionError("unreachable")


async def _flood(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    count = integer(args, "count", 100_000, 0, 10_000_000)
    pad = "x" * integer(args, "bytes", 1024, 0, 1 << 24)
    token = req.progress_token if req.progress_token is not None else "flood"
    try:
        for n in range(1, count + 1):
            req.outbox.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n, "message": pad}})
            await req.outbox.drain()
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        _event(f"cancelled flood {req.id}")
        raise
    raise AssertionError("unreachable")


async def _burst(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    count = integer(args, "count", 20_000, 0, 10_000_000)
    pad = "x" * integer(args, "bytes", 100, 0, 1 << 24)
    token = req.progress_token if req.progress_token is not None else "burst"
    for n in range(1, count + 1):
        req.outbox.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n, "message": pad}})
        await req.outbox.drain()
    return text(f"sent {count} notifications")


async def _touch(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    req.outbox.send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": str(args.get("uri", ""))}})
    return text("touched")


async def _log(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
    return text("sent" if req.log(str(args.get("level", "info")), str(args.get("text", ""))) else "not sent")


def _effect(name: str):
    async def run(args: dict[str, Any], req: Request) -> list[dict[str, Any]]:
        _event(f"effect {name}")
        _die()
        raise AssertionError("unreachable")

    return run


def _size_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0, "default": 1 << 20}}}


CATALOG = Catalog().add(
    Tool("echo", "Return the text.", {"type": "object", "properties": {"text": {"type": "string"}}}, _echo),
    Tool("crash", f"Exit with status {EXIT_STATUS} without answering.", _NO_ARGS, _crash),
    Tool("hang", "Never answer.", _NO_ARGS, _hang),
    Tool("garbage", "Write a non-JSON line and a response with an unknown id, then answer.", _NO_ARGS, _garbage),
    Tool("stderr_noise", "Write `bytes` bytes to stderr, then answer.", _size_schema(), _stderr_noise),
    Tool("big", "Answer with `bytes` bytes of text.", _size_schema(), _big),
    Tool("slow", "Answer after `ms` milliseconds.", {"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0, "default": 500}}}, _slow),
    Tool("meta", "Answer with the request's _meta as JSON.", _NO_ARGS, _meta, annotations={"readOnlyHint": True}),
    Tool("stall", "Never answer; record the cancellation.", _NO_ARGS, _stall),
    Tool("burst", "Send `count` progress notifications of `bytes` bytes as fast as stdout drains, then answer.",
         {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}, "bytes": {"type": "integer", "minimum": 0}}}, _burst),
    Tool("flood", "Send `count` progress notifications of `bytes` bytes, then never answer; record the cancellation.",
         {"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}, "bytes": {"type": "integer", "minimum": 0}}}, _flood),
    Tool("touch", "Announce that resource `uri` changed.", {"type": "object", "properties": {"uri": {"type": "string"}}}, _touch),
    Tool("log", "Log `text` at `level` (if logging lets it through).",
         {"type": "object", "properties": {"level": {"type": "string"}, "text": {"type": "string"}}}, _log),
    Tool("effect", "Record a side effect, then exit without answering.", _NO_ARGS, _effect("effect")),
    Tool("effect_idempotent", "Record a side effect, then exit without answering (idempotent).", _NO_ARGS, _effect("effect_idempotent"), annotations={"idempotentHint": True}),
    Tool("effect_readonly", "Record a read, then exit without answering (read-only).", _NO_ARGS, _effect("effect_readonly"), annotations={"readOnlyHint": True}),
)


class FaultProtocol(DemoProtocol):
    def __init__(self, crash_after: int | None, slow_list_ms: int = 0, subscribe: bool = False) -> None:
        super().__init__(CATALOG, server_info={"name": "fault-server", "version": "1.0.0"},
                         instructions="A test backend that misbehaves on command.", ttl_ms=0, cache_scope="private")
        if subscribe:  # handshake-era resource subscriptions, recorded as events
            self.capabilities["resources"]["subscribe"] = True
            self.methods[Era.HANDSHAKE].update({"resources/subscribe": "_subscribe", "resources/unsubscribe": "_subscribe"})
        self.crash_after = crash_after
        self.slow_list_ms = slow_list_ms
        self.tool_calls = 0

    async def _subscribe(self, req: Request) -> dict[str, Any]:
        _event(f"{req.method.split('/')[1]} {req.params.get('uri')}")
        return {}

    async def call(self, req: Request) -> dict[str, Any]:
        if req.method == "tools/call":
            _event(f"call {req.params.get('name')}")
        if req.method == "tools/list" and self.slow_list_ms:
            await asyncio.sleep(self.slow_list_ms / 1000)
        if req.method != "tools/call" or self.crash_after is None:
            return await super().call(req)
        if self.tool_calls >= self.crash_after:  # the process is about to exit: never answer
            await asyncio.Event().wait()
        self.tool_calls += 1
        value = await super().call(req)
        if self.tool_calls >= self.crash_after:
            # Runs after the server has written this answer (same task step).
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(_flush_and_die(req)))
        return value


async def _flush_and_die(req: Request) -> None:
    await req.outbox.drain()
    _die()


async def main(args: argparse.Namespace) -> int:
    _events[0] = args.events
    if args.starts:
        with open(args.starts, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    reader, outbox = await open_stdio()
    if args.garbage_first:
        outbox.send_raw(b"fault_server v1.0 starting up (this banner is not JSON)\n")
        outbox.send_raw(b'{"log": "a JSON line that is not JSON-RPC"}\n')
    return await StdioServer(FaultProtocol(args.crash_after, args.slow_list_ms, args.subscribe), reader, outbox, drain=0.2).run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a stdio MCP backend that misbehaves on command")
    parser.add_argument("--crash-after", type=int, metavar="N", help=f"exit with status {EXIT_STATUS} after answering N tool calls")
    parser.add_argument("--garbage-first", action="store_true", help="print non-JSON chatter to stdout before anything else")
    parser.add_argument("--slow-list-ms", type=int, default=0, metavar="MS", help="answer tools/list only after MS milliseconds")
    parser.add_argument("--events", metavar="FILE", help="append a line per tool call and per fault event to FILE")
    parser.add_argument("--starts", metavar="FILE", help="append this process's pid to FILE at start")
    parser.add_argument("--subscribe", action="store_true", help="support resources/subscribe (handshake era), recording `subscribe URI` events")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
