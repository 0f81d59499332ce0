"""The asyncio shell around :class:`~hopline.demo.protocol.DemoProtocol`: MCP over stdio.

Contract (reference/mcp-wire.md §2 and §5 "stdio (2026)")
- stdin carries one JSON-RPC message per line; stdout carries only our messages,
  one per line; logs go to stderr.
- A line that is not JSON is answered with -32700 and ``id: null``; JSON that is
  not a JSON-RPC message with -32600; a line longer than ``max_frame`` is skipped
  up to its newline and answered with -32600, ``id: null``. Reading goes on.
- Requests are admitted and run by :class:`~hopline.demo.dispatch.Dispatcher`: each
  in its own task, so a slow ``countdown`` never holds up an ``echo``;
  ``notifications/cancelled`` cancels one (no answer, the spec's SHOULD NOT respond);
  an id still in flight is refused with -32600 (python-sdk#3137); client responses
  are ignored.
- stdin EOF or SIGTERM: stop reading, give requests in flight ``drain`` seconds,
  cancel the rest, return 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
from typing import Any

import orjson

from hopline.demo.dispatch import Dispatcher
from hopline.demo.protocol import DemoProtocol
from hopline.jsonrpc import InvalidRequest, ProtocolError, parse

log = logging.getLogger("hopline.demo")

DEFAULT_MAX_FRAME = 16 * 1024 * 1024


class LineOutbox:
    """Writes lines to stdout: through an asyncio pipe, or plainly if stdout is a file."""

    def __init__(self, writer: asyncio.StreamWriter | None) -> None:
        self._writer = writer

    def send(self, body: dict[str, Any]) -> None:
        self.send_raw(orjson.dumps(body) + b"\n")

    def send_raw(self, line: bytes) -> None:
        if self._writer is None:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        elif not self._writer.is_closing():
            self._writer.write(line)

    async def drain(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()

    async def aclose(self) -> None:
        await self.drain()
        if self._writer is not None:
            self._writer.close()


async def open_stdio(max_frame: int = DEFAULT_MAX_FRAME) -> tuple[asyncio.StreamReader, LineOutbox]:
    """Our stdin as a StreamReader and our stdout as a :class:`LineOutbox`."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=max_frame)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except ValueError:  # stdin is a regular file, which asyncio cannot watch
        threading.Thread(target=_pump_file, args=(loop, reader), name="stdin", daemon=True).start()
    try:
        transport, flow = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    except ValueError:
        return reader, LineOutbox(None)
    return reader, LineOutbox(asyncio.StreamWriter(transport, flow, None, loop))


def _pump_file(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    while chunk := sys.stdin.buffer.read1(65536):
        loop.call_soon_threadsafe(reader.feed_data, chunk)
    loop.call_soon_threadsafe(reader.feed_eof)


class StdioServer:
    def __init__(
        self, protocol: DemoProtocol, reader: asyncio.StreamReader, outbox: LineOutbox, *, drain: float = 1.0
    ) -> None:
        self.protocol, self.reader, self.outbox = protocol, reader, outbox
        self.drain = drain
        self.dispatcher = Dispatcher(protocol, outbox)
        self.inflight = self.dispatcher.inflight  # requests in flight, by id

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        reading = asyncio.create_task(self._read_loop(), name="demo-stdin")
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, self._on_sigterm, reading)
        try:
            await asyncio.wait([reading])
        finally:
            reading.cancel()
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signal.SIGTERM)
            await self._shutdown()
        failed = not reading.cancelled() and reading.exception() is not None
        if failed:
            log.error("reading stdin failed: %r", reading.exception())
        return 1 if failed else 0

    def _on_sigterm(self, reading: asyncio.Task[None]) -> None:
        log.info("SIGTERM; shutting down")
        reading.cancel()

    async def _shutdown(self) -> None:
        tasks = list(self.inflight.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.drain)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.outbox.aclose()

    async def _read_loop(self) -> None:
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # EOF; a last line may lack its newline
                if exc.partial.strip():
                    self._on_line(exc.partial)
                log.info("stdin closed; shutting down")
                return
            except asyncio.LimitOverrunError:
                await self._skip_line()
                continue
            self._on_line(line)

    async def _skip_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                break
            except asyncio.LimitOverrunError as exc:
                await self.reader.read(exc.consumed)
            except asyncio.IncompleteReadError:
                break
        log.warning("skipped a line longer than the frame limit")
        self.outbox.send(InvalidRequest("message too large").to_response(None).body)

    def _on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            msg = parse(line)
        except ProtocolError as exc:
            log.warning("bad line (%s): %r", exc.message, line[:80])
            self.outbox.send(exc.to_response().body)
            return
        self.dispatcher.dispatch(msg)


async def serve_stdio(
    protocol: DemoProtocol | None = None, *, drain: float = 1.0, max_frame: int = DEFAULT_MAX_FRAME
) -> int:
    """Serve ``protocol`` (the demo catalog by default) on our own stdin/stdout until EOF."""
    reader, outbox = await open_stdio(max_frame)
    return await StdioServer(protocol or DemoProtocol(), reader, outbox, drain=drain).run()
