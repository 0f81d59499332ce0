"""The backend connectors (``Backends`` protocol: ``open_session``, ``open_exchange``,
``aclose``): Layer 1 channels to one backend, plus the id-remapping multiplexer of
Layer 6 (``layers/session/mux.py``) for the connections they share.

:class:`StdioBackends` / :class:`RemoteBackends` give each handshake-era client session
its own backend session (a child process, or a session on the remote server) and serve
stateless exchanges from one shared connection per era through a :class:`Multiplexer`
(ids remapped per client). ``shared=True`` puts handshake sessions on one shared
connection too. Children come from a capped, pre-warmed
:class:`~hopline.transports.child_pool.ChildPool`. The relay and the gateway both use
them; they live here, in the composition root, because transports may not import the
multiplexer.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Awaitable, Callable

from hopline.binding import Era
from hopline.layers.session.mux import Multiplexer
from hopline.layers.transport.channel import Channel
from hopline.transports.child_pool import DEFAULT_MAX_CHILDREN, AtCapacity, ChildPool, Lease
from hopline.transports.targets import RemoteTarget, StdioTarget

if TYPE_CHECKING:
    from hopline.transports.stdio import StdioChild

log = logging.getLogger("hopline.relay")

DEFAULT_RECLAIM_AFTER = 60.0  # at the cap: a relayed session idle this long gives its child up
FRESH_RECLAIM = 1.0  # ... or one that has done nothing but initialize, idle this long
ABSENT_RECLAIM = 5.0  # ... or one whose client holds no stream open (a one-shot client's), idle this long


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
    """Backends for one stdio server command (``Backends`` protocol).

    Every child, the shared ones included, comes from one :class:`ChildPool`, so the
    number of processes is bounded by ``max_children`` whatever the number of clients
    (DESIGN §7). ``relay=True`` is the protocol-unaware composition: a session's child
    idle for ``idle_timeout`` seconds is closed (the client gets 404 on its next request
    and re-initializes). At the cap, a new session takes the child of the least
    recently active session idle for ``reclaim_after`` seconds (``FRESH_RECLAIM`` if it
    did nothing but initialize, ``ABSENT_RECLAIM`` if its client holds no stream), waiting up to ``RECLAIM_WAIT``
    for one to become so;
    else it fails at once with the reason as its error (the listener answers it as
    -31001 to the ``initialize``, with 503 and Retry-After).
    """

    def __init__(
        self,
        target: StdioTarget,
        *,
        shared: bool = False,
        name: str | None = None,
        max_children: int = DEFAULT_MAX_CHILDREN,
        prewarm: int = 1,
        idle_timeout: float | None = None,
        wait: float = 0.0,
        relay: bool = True,
        retry_after: float = 5.0,
        reclaim_after: float = DEFAULT_RECLAIM_AFTER,
    ) -> None:
        from hopline.transports.stdio import StdioChild

        self.target = target
        self.shared = shared
        self.relay = relay
        self.name = name or os.path.basename(target.argv[0])
        self.last_child: StdioChild | None = None  # the child last started: what it said, if its start fails
        self.launcher = None
        start: Callable[[], Awaitable[StdioChild]] = lambda: StdioChild.spawn(  # noqa: E731
            target.argv, env=target.env, inherit=target.inherit_env, cwd=target.cwd, name=self.name
        )
        if target.sandbox is not None:  # a permission profile: every child through its launcher (issue 35)
            from hopline.transports.launcher import Launcher

            launcher = self.launcher = Launcher(
                target.sandbox, target.argv, env=target.env, cwd=target.cwd, hidden=target.hidden, name=self.name
            )
            start = lambda: launcher.spawn(inherit=target.inherit_env)  # noqa: E731

        async def spawn() -> StdioChild:
            child = await start()
            self.last_child = child
            return child

        self._spawn = spawn
        # Closing a relayed session is visible to its client (404, re-initialize), so at the
        # cap the relay closes only one idle for ``reclaim_after`` seconds, or sooner one its
        # client has most likely left: FRESH_RECLAIM after a bare handshake (a burst's),
        # ABSENT_RECLAIM with no stream open (a one-shot client's), rather than turn the
        # newcomer away. The gateway parks idle backend sessions without the client
        # noticing, so it may reclaim any idle one.
        pressure = min(reclaim_after, idle_timeout or float("inf"))
        self.children = ChildPool(
            self._spawn,
            name=self.name,
            max_children=max_children,
            prewarm=0 if shared else prewarm,
            wait=wait,
            idle_timeout=idle_timeout,
            pressure_idle=pressure if relay else 0.0,
            fresh_idle=min(FRESH_RECLAIM, pressure) if relay else None,
            absent_idle=min(ABSENT_RECLAIM, pressure) if relay else None,
            retry_after=retry_after,
            log_failures=relay,
        )
        self._pool = _SharedPerEra(self.children.acquire, self.name)

    def said(self) -> str | None:
        """What the child last started said outside the protocol (its stdout junk, its stderr's
        tail; quoted, redacted): for the line about a failed start (``StdioChild.said``)."""
        child = self.last_child
        return child.said() if child is not None else None

    async def open_session(self, era: Era) -> Channel:
        try:
            if self.shared:
                return await self._pool.view(era)
            lease = await self.children.acquire()
        except AtCapacity as exc:
            raise self._at_cap(exc) from None
        if self.relay:
            lease.reclaim = _closer(lease)
        return lease

    async def open_exchange(self, era: Era) -> Channel:
        try:
            return await self._pool.view(era)
        except AtCapacity as exc:
            raise self._at_cap(exc) from None

    def _at_cap(self, exc: AtCapacity) -> Exception:
        # The listener answers it to the request that wanted the session: 503 + Retry-After.
        return exc

    async def aclose(self) -> None:
        await self._pool.aclose()
        await self.children.aclose()
        if self.launcher is not None:
            await self.launcher.aclose()  # its egress proxy, after the last child


def _closer(lease: Lease) -> Callable[[], Awaitable[bool]]:
    async def close() -> bool:
        log.info("%s: closing the session of idle child %s", lease.pool.name, lease.pid)
        await lease.aclose()
        return True

    return close


class RemoteBackends:
    """Backends for one remote Streamable HTTP or legacy SSE server."""

    def __init__(self, target: RemoteTarget, *, shared: bool = False, reinitialize_on_404: bool = False) -> None:
        import httpx

        from hopline.transports.h1client import lean_or_httpx

        self.target = target
        self.shared = shared
        self.reinitialize_on_404 = reinitialize_on_404
        # No cap on connections: every handshake-era backend session holds one for its GET
        # stream, so a cap would deadlock every session once that many are open. The lean
        # HTTP/1.1 client unless the environment routes this URL through a proxy (h1client.py).
        self._client = lean_or_httpx(target.url, auth=target.auth, timeout=httpx.Timeout(30.0, read=None))
        # The multiplexer's name reaches clients' error data: never the URL's userinfo or query.
        from hopline.transports.http_util import public_url

        self._pool = _SharedPerEra(self._connect, target.name or public_url(target.url))

    async def _connect(self) -> Channel:
        if getattr(self.target.auth, "per_user", False):  # issue 32: user_oauth, maybe before the user's consent
            from hopline.compose.consent_gate import gated

            return await gated(self._open, self.target.auth.ready, self.target.name or "")
        return await self._open()

    async def _open(self) -> Channel:
        if self.target.is_sse():
            from hopline.transports.sse_client import SseUpstream

            return await SseUpstream.connect(
                self.target.url, headers=self.target.headers, client=self._client, name=self.target.name
            )
        from hopline.transports.streamable_http_client import StreamableHttpUpstream

        return await StreamableHttpUpstream.connect(
            self.target.url,
            headers=self.target.headers,
            client=self._client,
            reinitialize_on_404=self.reinitialize_on_404,
            name=self.target.name,
        )

    async def open_session(self, era: Era) -> Channel:
        if self.shared:
            return await self._pool.view(era)
        return await self._connect()

    async def open_exchange(self, era: Era) -> Channel:
        return await self._pool.view(era)

    async def aclose(self) -> None:
        await self._pool.aclose()
        await self._client.aclose()
