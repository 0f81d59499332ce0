"""A loopback TCP proxy that misbehaves on command (toxiproxy's "toxics", in-process).

Put it between the gateway and an HTTP backend::

    proxy = await FaultProxy.start(backend_port)
    ... configure the gateway with proxy.url("/mcp") ...
    proxy.delay(0.5)     # each chunk, either way, is held 0.5 s (latency)
    proxy.drop()         # black hole: bytes are read and discarded, no FIN, no RST (half-open)
    proxy.cut()          # reset every open connection now (RST); new ones still pass
    proxy.refuse()       # reset new connections as they arrive (backend down)
    proxy.corrupt()      # flip the bits of what the backend sends back
    proxy.heal()         # back to a plain pass-through
    await proxy.aclose()

Commands take effect at once, for open and new connections alike, and can be
combined (``delay`` with ``corrupt``). ``proxy.stats`` counts connections and
bytes, so a test can check that traffic happened at all. It runs on the test's own
event loop; the gateway under test is a separate process, so nothing is shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass, field

CHUNK = 64 * 1024


@dataclass
class Stats:
    accepted: int = 0
    refused: int = 0
    reset: int = 0
    up: int = 0  # bytes client → backend
    down: int = 0  # bytes backend → client
    dropped: int = 0  # bytes swallowed by drop()


@dataclass(eq=False)  # hashed by identity: a connection is a thing, not a value
class _Conn:
    client: asyncio.StreamWriter
    backend: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task] = field(default_factory=list)


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.stats = Stats()
        self._delay = 0.0
        self._drop = False
        self._refuse = False
        self._corrupt = False
        self._conns: set[_Conn] = set()
        self._handlers: set[asyncio.Task] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    @classmethod
    async def start(cls, target_port: int, target_host: str = "127.0.0.1") -> FaultProxy:
        proxy = cls(target_port, target_host)
        proxy._server = await asyncio.start_server(proxy._accept, "127.0.0.1", 0)
        proxy.port = proxy._server.sockets[0].getsockname()[1]
        return proxy

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # -- commands ---------------------------------------------------------------------------
    def delay(self, seconds: float) -> None:
        self._delay = seconds

    def drop(self) -> None:
        self._drop = True

    def refuse(self) -> None:
        self._refuse = True

    def corrupt(self) -> None:
        self._corrupt = True

    def cut(self) -> None:
        """Reset every open connection, both sides, now."""
        for conn in list(self._conns):
            self._reset(conn)

    def heal(self) -> None:
        self._delay, self._drop, self._refuse, self._corrupt = 0.0, False, False, False

    # -- the proxy ----------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # aclose(): nobody awaits a connection handler, so end it quietly
        finally:
            self._handlers.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refuse:
            self.stats.refused += 1
            _rst(writer)
            return
        self.stats.accepted += 1
        conn = _Conn(writer)
        self._conns.add(conn)
        try:
            try:
                b_reader, b_writer = await asyncio.open_connection(*self.target)
            except OSError:
                _rst(writer)
                return
            conn.backend = b_writer
            up = asyncio.create_task(self._pipe(reader, b_writer, up=True))
            down = asyncio.create_task(self._pipe(b_reader, writer, up=False))
            conn.tasks = [up, down]
            await asyncio.wait(conn.tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in conn.tasks:
                task.cancel()
            await asyncio.gather(*conn.tasks, return_exceptions=True)
            for w in (writer, b_writer):
                with contextlib.suppress(Exception):
                    w.close()
        finally:
            self._conns.discard(conn)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, up: bool) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(CHUNK):
                if self._drop:  # black hole: keep reading so the sender never blocks or sees an error
                    self.stats.dropped += len(data)
                    continue
                if self._delay:
                    await asyncio.sleep(self._delay)
                if self._corrupt and not up:
                    data = bytes(b ^ 0x5A for b in data)
                if up:
                    self.stats.up += len(data)
                else:
                    self.stats.down += len(data)
                writer.write(data)
                await writer.drain()
            if not self._drop:
                with contextlib.suppress(Exception):
                    writer.write_eof()  # pass a clean close on
        if self._drop:  # a black hole never closes either side
            await asyncio.Event().wait()

    def _reset(self, conn: _Conn) -> None:
        self.stats.reset += 1
        for task in conn.tasks:
            task.cancel()
        _rst(conn.client)
        if conn.backend is not None:
            _rst(conn.backend)

    async def aclose(self) -> None:
        self.heal()
        if self._server is not None:
            self._server.close()
        self.cut()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def __repr__(self) -> str:
        modes = [m for m, on in (("delay", bool(self._delay)), ("drop", self._drop), ("refuse", self._refuse), ("corrupt", self._corrupt)) if on]
        return f"<FaultProxy :{self.port} -> {self.target[0]}:{self.target[1]} {'+'.join(modes) or 'pass'} open={len(self._conns)}>"


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with RST, not FIN: SO_LINGER with a zero timeout."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(Exception):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.transport.abort()
