"""Relay mode (draft §5.1): transport adaptation, protocol-unaware, Layer 1 only.

A relay forwards envelopes and never inspects content: it reads what it must to
move a message (``method``, ``id``, the era, the mirror headers) and nothing
else; it never answers ``initialize`` itself (§7.1: no dual handshake). Two
compositions:

- **a listener in front of one backend** (``hopline relay --port P -- CMD`` or
  ``… --port P URL``): :class:`StdioBackends` / :class:`RemoteBackends` give each
  handshake-era client session its own backend session (a child process, or a
  session on the remote server) and serve stateless exchanges from one shared
  connection per era through a :class:`Multiplexer` (ids remapped per client).
  ``shared=True`` puts handshake sessions on one shared child too.
- **our stdio in front of a remote server** (``hopline relay --stdio URL``):
  :func:`pump` joins the two channels.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from hopline.binding import Era
from hopline.layers.session.mux import Multiplexer
from hopline.transports.base import Channel, ChannelClosed

log = logging.getLogger("hopline.relay")


@dataclass
class StdioTarget:
    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None


@dataclass
class RemoteTarget:
    url: str
    transport: str = "auto"  # "streamable-http" | "sse" | "auto" (by URL path)
    headers: dict[str, str] = field(default_factory=dict)

    def is_sse(self) -> bool:
        if self.transport == "auto":
            return self.url.rstrip("/").endswith("/sse")
        return self.transport == "sse"


class _SharedPerEra:
    """One lazily (re)opened shared connection per era, behind a multiplexer."""

    def __init__(self, connect: Callable[[], Awaitable[Channel]], name: str) -> None:
        self._connect = connect
        self._name = name
        self._muxes: dict[Era, Multiplexer] = {}
        self._lock = asyncio.Lock()

    async def view(self, era: Era) -> Channel:
        mux = self._muxes.get(era)
        if mux is None or mux.is_closed():
            async with self._lock:
                mux = self._muxes.get(era)
                if mux is None or mux.is_closed():
                    if mux is not None:
                        await mux.aclose()
                    channel = await self._connect()
                    mux = Multiplexer(channel, name=f"{self._name}/{era.value}", share_handshake=era is Era.HANDSHAKE)
                    self._muxes[era] = mux
        return mux.view()

    async def aclose(self) -> None:
        muxes, self._muxes = list(self._muxes.values()), {}
        await asyncio.gather(*(m.aclose() for m in muxes), return_exceptions=True)


class StdioBackends:
    """Backends for one stdio server command (``Backends`` protocol)."""

    def __init__(self, target: StdioTarget, *, shared: bool = False, name: str | None = None) -> None:
        from hopline.transports.stdio import StdioChild

        self.target = target
        self.shared = shared
        self.name = name or target.argv[0]
        self._spawn = lambda: StdioChild.spawn(target.argv, env=target.env, cwd=target.cwd, name=self.name)
        self._pool = _SharedPerEra(self._spawn, self.name)

    async def open_session(self, era: Era) -> Channel:
        if self.shared:
            return await self._pool.view(era)
        return await self._spawn()

    async def open_exchange(self, era: Era) -> Channel:
        return await self._pool.view(era)

    async def aclose(self) -> None:
        await self._pool.aclose()


class RemoteBackends:
    """Backends for one remote Streamable HTTP or legacy SSE server."""

    def __init__(self, target: RemoteTarget, *, shared: bool = False) -> None:
        import httpx

        self.target = target
        self.shared = shared
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None), limits=httpx.Limits(max_connections=512, max_keepalive_connections=64))
        self._pool = _SharedPerEra(self._connect, target.url)

    async def _connect(self) -> Channel:
        if self.target.is_sse():
            from hopline.transports.sse_client import SseUpstream

            return await SseUpstream.connect(self.target.url, headers=self.target.headers, client=self._client)
        from hopline.transports.streamable_http_client import StreamableHttpUpstream

        return await StreamableHttpUpstream.connect(self.target.url, headers=self.target.headers, client=self._client)

    async def open_session(self, era: Era) -> Channel:
        if self.shared:
            return await self._pool.view(era)
        return await self._connect()

    async def open_exchange(self, era: Era) -> Channel:
        return await self._pool.view(era)

    async def aclose(self) -> None:
        await self._pool.aclose()
        await self._client.aclose()


async def pump(client: Channel, backend: Channel) -> str:
    """Copy messages both ways until either side closes; close both; return why."""

    async def copy(src: Channel, dst: Channel) -> str:
        try:
            while True:
                await dst.send(await src.receive())
        except ChannelClosed as exc:
            return exc.reason

    tasks = [asyncio.create_task(copy(client, backend)), asyncio.create_task(copy(backend, client))]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for t in pending:
        t.cancel()
    reason = next(iter(done)).result()
    for ch in (client, backend):
        with contextlib.suppress(Exception):
            await ch.aclose()
    return reason
