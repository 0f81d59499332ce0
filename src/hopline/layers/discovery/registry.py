"""Layer 2, discovery: the backends a gateway knows, how to reach each, and their health.

The :class:`Registry` holds one connector per enabled backend (``Backends``: a stdio
command's child pool, a remote server, an OpenAPI conversion), built by the composition
root and handed in, and, where credentials depend on the caller (token exchange,
passthrough), one connector per (backend, principal), bounded, made by the ``per_caller``
factory it is given. It opens backend sessions (:meth:`connect`): in the era asked for
if the backend speaks it, with the hop sequence in the handshake's ``_meta`` so an
intermediary that leads back here refuses it at once. And it probes the health of open
sessions (draft §6.2): ``ping`` in the handshake era, ``server/discover`` in 2026-07-28,
which also polls capabilities; what changed is reported to ``on_capabilities``.

Nothing here reads configuration: the timeouts, the hop layer and the credential
propagator are handed in.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping, Protocol

from hopline.binding import Era
from hopline.context import ANONYMOUS, Principal
from hopline.jsonrpc import UnavailableError
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.transport.channel import Backends

log = logging.getLogger("hopline.gateway")
MAX_PER_CALLER = 1024  # per-caller connectors kept (token exchange, passthrough); the oldest is closed


class Credentials(Protocol):
    """Which backends' credentials depend on the caller (layers/policy/propagation.py)."""

    def per_principal(self, backend_id: str) -> bool: ...


class Hops(Protocol):
    key: str

    def entry(self) -> Any: ...

    def incoming(self, meta: dict[str, Any]) -> list[Any]: ...


class Registry:
    def __init__(
        self,
        *,
        timeouts: Mapping[str, float | None],
        credentials: Credentials,
        per_caller: Callable[[str, Principal], tuple[Backends, Any]],
        hops: Hops | None = None,
    ) -> None:
        """``timeouts``: each backend's request timeout (seconds, ``None``: none).
        ``per_caller(backend, principal)``: a new connector for that caller, and the
        ``httpx.Auth`` it sends (kept, so a newer token of the same caller replaces the old)."""
        self.connectors: dict[str, Backends] = {}
        self.timeouts = timeouts
        self.credentials = credentials
        self.hops = hops
        self._make_per_caller = per_caller
        self._per_caller: dict[
            tuple[str, Any], tuple[Backends, Any]
        ] = {}  # (backend, principal key) → connector, its auth
        # Backends a client's handshake gave up waiting for, not up since: the next handshake
        # does not wait for them at all (layers/session/links.py). One entry per configured backend at most.
        self.slow: set[str] = set()

    def add(self, backend_id: str, connector: Backends) -> None:
        self.connectors[backend_id] = connector

    async def remove(self, backend_id: str) -> None:
        """Close a backend's connector and every per-caller one of it."""
        connector = self.connectors.pop(backend_id, None)
        self.slow.discard(backend_id)
        per_caller = [self._per_caller.pop(k)[0] for k in list(self._per_caller) if k[0] == backend_id]
        await asyncio.gather(*(c.aclose() for c in per_caller), return_exceptions=True)
        if connector is not None:
            await connector.aclose()

    async def aclose(self) -> None:
        per_caller, self._per_caller = [c for c, _auth in self._per_caller.values()], {}
        await asyncio.gather(*(c.aclose() for c in per_caller), return_exceptions=True)
        await asyncio.gather(*(c.aclose() for c in self.connectors.values()), return_exceptions=True)

    def timeout_for(self, backend_id: str) -> float | None:
        return self.timeouts.get(backend_id)

    def share_key(self, backend_id: str, principal: Principal) -> Any:
        """What callers of a backend may share: the backend, or (backend, caller) where the credentials differ."""
        return (backend_id, principal.key) if self.credentials.per_principal(backend_id) else backend_id

    def connector_for(self, backend_id: str, principal: Principal) -> Backends:
        """The backend's connector for this caller: the shared one, or, where credentials
        depend on the caller, one per principal, so no caller's credential ever carries
        another caller's request."""
        if not self.credentials.per_principal(backend_id):
            return self.connectors[backend_id]
        key = (backend_id, principal.key)
        found = self._per_caller.get(key)
        if found is None:
            found = self._make_per_caller(backend_id, principal)
            self._per_caller[key] = found
            while len(self._per_caller) > MAX_PER_CALLER:
                oldest = next(iter(self._per_caller))
                old, _auth = self._per_caller.pop(oldest)
                asyncio.ensure_future(old.aclose())
        elif (
            principal.token
            and getattr(found[1], "principal", None) is not None
            and found[1].principal.token != principal.token
        ):
            found[1].principal = principal  # the same caller with a newer token
        return found[0]

    async def connect(
        self,
        backend_id: str,
        *,
        era: Era,
        client_capabilities: dict[str, Any],
        on_request: Any,
        on_notification: Any,
        principal: Principal = ANONYMOUS,
        chain: list[Any] | None = None,
    ) -> BackendSession:
        """A new backend session, in ``era`` if the backend speaks it (else the other). Its
        handshake carries the hop sequence (``chain``, the one the client's request came
        with, plus this hop), so an intermediary that leads back here refuses it at once."""
        channel = await self.connector_for(backend_id, principal).open_session(era)
        return await BackendSession.open(
            backend_id,
            channel,
            client_capabilities=client_capabilities,
            on_request=on_request,
            on_notification=on_notification,
            timeout=self.timeout_for(backend_id),
            prefer=era,
            meta=self.hop_meta(chain or []),
        )

    def said(self, backend_id: str) -> str | None:
        """What the backend's child last said outside the protocol (a stdio backend's stdout
        junk and stderr tail, quoted and redacted), for a line about its failed start."""
        said = getattr(self.connectors.get(backend_id), "said", None)
        return said() if callable(said) else None

    def hop_meta(self, chain: list[Any]) -> dict[str, Any]:
        """``_meta`` for the gateway's own requests to a backend (handshakes, list fetches):
        the hop sequence ``chain`` with this hop appended; empty without hop metadata."""
        hops = self.hops
        return {} if hops is None else {hops.key: [*chain, hops.entry()]}

    def arrived(self, meta: dict[str, Any]) -> list[Any]:
        """The hop sequence a client's request came with, after the loop and depth checks
        (raises :class:`~hopline.observability.hops.LoopDetected` / ``TooManyHops``)."""
        hops = self.hops
        return [] if hops is None or hops.key not in meta else hops.incoming(meta)

    async def health_probe(self, session: BackendSession) -> bool:
        """One probe; raises if the backend failed it. True if its capabilities changed
        (the new ones are on ``session.info``, its cached lists invalidated)."""
        timeout = min(self.timeout_for(session.id) or 10.0, 10.0)
        if session.info.era is Era.HANDSHAKE:
            answer = await session.call("ping", {}, timeout=timeout)
            if "error" in answer.body:
                raise UnavailableError(
                    f"backend {session.id} answered ping with an error", backend=session.id, reason="health"
                )
            return False
        answer = await session.call("server/discover", {}, timeout=timeout)
        value = answer.body.get("result")
        if not isinstance(value, dict):
            raise UnavailableError(
                f"backend {session.id} answered server/discover with an error", backend=session.id, reason="health"
            )
        caps = value.get("capabilities")
        if isinstance(caps, dict) and caps != session.info.capabilities:
            log.info("backend %s: capabilities changed", session.id)
            session.info.capabilities = caps
            session.invalidate()
            return True
        return False
