"""A gateway session's backend sessions: opened per client (or shared), watched,
reconnected with backoff when they fail or go away, and replaced on hot reload.
Every change to what the session can reach clears its catalogues and, for a
stateful client, sends the CHANGE-SIGNAL (draft §6.7)."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any

from hopline.binding import Era
from hopline.jsonrpc import UnavailableError, notification
from hopline.layers.discovery.backend import BackendSession

if TYPE_CHECKING:
    from hopline.layers.pipeline import Principal
    from hopline.layers.session.client_end import ClientEnd
    from hopline.modes.gateway import Gateway

log = logging.getLogger("hopline.gateway")

CHANGE_SIGNALS = ("notifications/prompts/list_changed", "notifications/resources/list_changed", "notifications/tools/list_changed")


class BackendLinks:
    """Mixin of :class:`~hopline.modes.gateway_session.GatewaySession`: its backends."""

    gateway: Gateway
    stateful: bool
    end: ClientEnd
    client_capabilities: dict[str, Any]
    backends: dict[str, BackendSession | BaseException] | None
    _owned: list[BackendSession]
    _catalogs: dict[str, Any]
    _connecting: asyncio.Future | None
    _reconnecting: dict[str, asyncio.Task]
    principal: Principal
    subscriptions: dict[str, set[str]]

    if TYPE_CHECKING:  # provided by the other parts of GatewaySession
        def _server_request_from(self, backend_id: str) -> Any: ...  # noqa: E704 (GatewaySession)

        def _backend_notification(self, backend_id: str) -> Any: ...  # noqa: E704 (GatewaySession)

        def backend_changed(self, backend_id: str, method: str) -> None: ...  # noqa: E704 (GatewaySession)

    # -- backends ---------------------------------------------------------------------
    async def open_backend(self, backend_id: str) -> BackendSession:
        session = await self.gateway.connect(
            backend_id, era=Era.HANDSHAKE, client_capabilities=self.client_capabilities, on_request=self._server_request_from(backend_id), on_notification=self._backend_notification(backend_id),
            principal=self.principal, chain=self.arrival,
        )
        session.on_changed = lambda s, method: self.backend_changed(s.id, method)
        session.on_closed = self._backend_lost
        self._owned.append(session)
        return session

    async def live_backends(self) -> dict[str, BackendSession | BaseException]:
        if self.backends is None:
            if self._connecting is None:
                self._connecting = asyncio.ensure_future(self.gateway.sessions_for(list(self.gateway.connectors), self))
            self.backends = await asyncio.shield(self._connecting)
            if self.stateful:
                for backend_id, found in self.backends.items():
                    if not isinstance(found, BackendSession):
                        self._schedule_reconnect(backend_id)
        return self.backends

    def _schedule_reconnect(self, backend_id: str) -> None:
        """Keep trying a backend that failed or went away; when it answers, its
        capabilities reappear and the client gets the CHANGE-SIGNAL (draft §6.7)."""
        if backend_id in self._reconnecting or self.end.is_closed():
            return
        task = asyncio.create_task(self._reconnect(backend_id), name=f"reconnect-{backend_id}")
        self._reconnecting[backend_id] = task
        task.add_done_callback(lambda _t, b=backend_id: self._reconnecting.pop(b, None))

    async def _reconnect(self, backend_id: str) -> None:
        delay = self.gateway.config.routing.retry_after
        while not self.end.is_closed() and backend_id in self.gateway.connectors:
            await asyncio.sleep(random.uniform(delay / 2, delay))  # jittered: sessions do not reconnect in lockstep
            try:
                (found,) = (await self.gateway.sessions_for([backend_id], self)).values()
            except Exception as exc:  # never let a reconnect loop die silently
                found = exc
            if isinstance(found, BackendSession):
                if self.backends is not None:
                    self.backends[backend_id] = found
                log.info("backend %s is back", backend_id)
                await self._resubscribe(found)
                self.surface_changed()
                return
            delay = min(delay * 2, 60.0)

    async def _resubscribe(self, session: BackendSession) -> None:
        """A new backend session knows none of this client's resource subscriptions: renew them."""
        for uri in sorted(self.subscriptions.get(session.id, ())):
            try:
                await session.call("resources/subscribe", {"uri": uri})
            except Exception as exc:
                log.warning("backend %s: could not renew the subscription to %s: %s", session.id, uri, exc)

    def _backend_lost(self, backend: BackendSession) -> None:
        if self.backends is not None and self.backends.get(backend.id) is backend:
            self.backends[backend.id] = UnavailableError(f"backend {backend.id} went away", backend=backend.id)
            self.surface_changed()
            self._schedule_reconnect(backend.id)

    async def reloaded(self, gone: list[str], added: list[str]) -> None:
        """The configuration changed under this session: drop what went, connect what came."""
        if self.backends is None:
            return  # not connected yet: the next request sees the new configuration
        for backend_id in gone:
            found = self.backends.pop(backend_id, None)
            task = self._reconnecting.pop(backend_id, None)
            if task is not None:
                task.cancel()
            if isinstance(found, BackendSession) and found in self._owned:
                self._owned.remove(found)
                await found.aclose()
        if added:
            self.backends.update(await self.gateway.sessions_for(added, self))
            for backend_id in added:
                if not isinstance(self.backends.get(backend_id), BackendSession):
                    self._schedule_reconnect(backend_id)
        self.surface_changed()

    def surface_changed(self) -> None:
        self._catalogs.clear()
        if self.stateful:
            for signal in CHANGE_SIGNALS:
                self.end.notify(notification(signal))

    async def backend(self, backend_id: str) -> BackendSession:
        found = (await self.live_backends()).get(backend_id)
        if not isinstance(found, BackendSession) or found.is_closed():
            raise UnavailableError(f"backend {backend_id} is unavailable", backend=backend_id, reason="backend_unavailable")
        return found
