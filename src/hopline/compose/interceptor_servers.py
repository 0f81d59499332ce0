"""SEP-2624 interceptor servers from configuration (``policy.interceptor_servers``).

Each configured server becomes a :class:`ServerLink`: the :class:`~hopline.layers.policy.remote.Server`
the sans-io :class:`~hopline.layers.policy.remote.RemoteChain` calls. A link speaks MCP over
hopline's own upstream channels — a stdio child (:class:`~hopline.transports.stdio.StdioChild`)
or Streamable HTTP (:class:`~hopline.transports.streamable_http_client.StreamableHttpUpstream`) —
through an :class:`~hopline.layers.transport.rpc.RpcPeer`, with the same handshake as a
backend (``layers/discovery/backend.py``, the handshake era preferred).

It connects on first use (a call that needs it), lists the interceptors once per
connection, and reconnects on the next call after the server went away (a crashed stdio
child is started again), no sooner than ``RETRY_INTERVAL`` seconds after a failed start.
At most ``max_concurrency`` invocations are in flight per server; the rest wait (inside
their own timeout).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Sequence

from hopline.binding import Era
from hopline.config.policy import InterceptorOverride, InterceptorServerConfig
from hopline.layers.discovery.backend import _handshake
from hopline.layers.policy.remote import (
    InterceptorFailure,
    Member,
    Override,
    RemoteChain,
    member,
    parse_list,
)
from hopline.layers.transport.rpc import RpcPeer

log = logging.getLogger("hopline.policy.remote")
RETRY_INTERVAL = 1.0  # seconds between attempts to start a server that failed to start
CONNECT_TIMEOUT = 10.0  # seconds for the handshake and interceptors/list, at most


def _override(o: InterceptorOverride | None) -> Override:
    if o is None:
        return Override()
    return Override(o.mode, o.fail_open, o.timeout, o.priority, frozenset(o.events) if o.events else None)


def _merge(outer: Override, inner: Override) -> Override:
    return Override(
        inner.mode or outer.mode,
        outer.fail_open if inner.fail_open is None else inner.fail_open,
        inner.timeout or outer.timeout,
        outer.priority if inner.priority is None else inner.priority,
        inner.events if inner.events is not None else outer.events,
    )


class ServerLink:
    """One interceptor server: its connection, its interceptors, its concurrency bound."""

    def __init__(self, spec: InterceptorServerConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self.name = spec.name
        self.fail_open = spec.fail_open is True  # when the server itself is unreachable
        self._server_override = _override(spec)
        self._overrides = {name: _merge(self._server_override, _override(o)) for name, o in spec.interceptors.items()}
        self._sem = asyncio.Semaphore(spec.max_concurrency)
        self._lock = asyncio.Lock()
        self._peer: RpcPeer | None = None
        self._channel: Any = None
        self._http: Any = None
        self._members: list[Member] = []
        self._failed_at: float | None = None
        self._last_error = ""
        self._clock = clock

    # -- Server (remote.py) ---------------------------------------------------------------------
    async def members(self, timeout: float | None) -> Sequence[Member]:
        peer = self._peer
        if peer is not None and not peer.is_closed():
            return self._members
        async with self._lock:
            if self._peer is not None and not self._peer.is_closed():
                return self._members
            await self._drop()
            if self._failed_at is not None and self._clock() - self._failed_at < RETRY_INTERVAL:
                raise InterceptorFailure(self._last_error)
            budget = CONNECT_TIMEOUT if timeout is None else min(timeout, CONNECT_TIMEOUT)
            try:
                async with asyncio.timeout(budget):
                    await self._connect()
            except Exception as exc:
                await self._drop()
                self._failed_at = self._clock()
                self._last_error = f"no answer within {budget:g} s" if isinstance(exc, TimeoutError) else _short(exc)
                log.warning("interceptor server %s: %s", self.name, self._last_error)
                raise InterceptorFailure(self._last_error) from None
            self._failed_at = None
            return self._members

    async def invoke(self, params: dict[str, Any], timeout: float | None) -> Any:
        async with self._sem:
            peer = self._peer
            if peer is None or peer.is_closed():
                raise InterceptorFailure(f"interceptor server {self.name} is not connected")
            answer = await peer.call("interceptor/invoke", params, timeout=timeout)
        error = answer.body.get("error")
        if error is not None and peer.is_closed():  # the server died with the invocation in flight
            raise InterceptorFailure(f"server went away: {peer.closed_reason}")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            raise InterceptorFailure(f"error {code}: {str(message)[:200]}")
        return answer.body.get("result")

    # -- the connection -------------------------------------------------------------------------
    async def _connect(self) -> None:
        spec = self.spec
        if spec.command is not None:
            from hopline.transports.stdio import StdioChild

            self._channel = await StdioChild.spawn([spec.command, *spec.args], env=spec.env, name=self.name)
        else:
            assert spec.url is not None
            from hopline.transports.h1client import lean_or_httpx
            from hopline.transports.streamable_http_client import StreamableHttpUpstream

            self._http = lean_or_httpx(spec.url)
            self._channel = await StreamableHttpUpstream.connect(spec.url, client=self._http, name=self.name)
        peer = RpcPeer(self._channel, name=self.name)
        self._peer = peer
        await _handshake(peer, {}, None, Era.HANDSHAKE, {})
        answer = await peer.call("interceptors/list", {})
        if "error" in answer.body:
            err = answer.body["error"]
            raise InterceptorFailure(
                f"interceptors/list failed: {str(err.get('message') if isinstance(err, dict) else err)[:200]}"
            )
        found = parse_list(answer.body.get("result"), self.name)
        self._members = [
            member(self, d, self._overrides.get(d.name, self._server_override), self.spec.default_timeout)
            for d in found
        ]
        unknown = sorted(set(self._overrides) - {d.name for d in found})
        if unknown:
            log.warning("interceptor server %s does not offer %s (configured overrides)", self.name, unknown)
        log.info(
            "interceptor server %s: %s",
            self.name,
            ", ".join(f"{m.name} ({m.type}, {m.mode})" for m in self._members) or "no interceptors",
        )

    async def _drop(self) -> None:
        peer, channel, http = self._peer, self._channel, self._http
        self._peer = self._channel = self._http = None
        self._members = []
        if peer is not None:
            try:
                await peer.aclose()
            except Exception:
                log.debug("closing interceptor server %s", self.name, exc_info=True)
        elif channel is not None:
            try:
                await channel.aclose()
            except Exception:
                log.debug("closing interceptor server %s", self.name, exc_info=True)
        if http is not None:
            try:
                await http.aclose()
            except Exception:
                log.debug("closing interceptor server %s", self.name, exc_info=True)

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()

    def __repr__(self) -> str:
        return f"<ServerLink {self.name}>"


def links(specs: Sequence[InterceptorServerConfig]) -> list[ServerLink]:
    """A link per configured server (nothing is started until a call needs it)."""
    return [ServerLink(s) for s in specs]


async def aclose(chain: RemoteChain) -> None:
    """Stop the servers' children and close connections (webhooks' HTTP clients too)."""
    for server in chain.servers:
        close = getattr(server, "aclose", None)
        if close is not None:
            await close()


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    return str(text)[:200]
