"""Forward and Reverse modes (draft §5.2, §5.3): many backends behind one endpoint.

The :class:`Gateway` is what a listener talks to (it implements ``Backends``):
each handshake-era client session becomes a :class:`GatewaySession` over backend
sessions shared per client-capability set (``share: shared``, the default for stdio
backends; ``gateway_shared.py``) or its own (``share: isolated``, draft §10), and each
2026-07-28 request a short-lived one over the shared backend sessions. The session answers the handshake itself (dual handshake,
§7.1), composes lists from every backend (fan-out, §6.3) under the gateway's
namespace (§8), and routes every invoke to exactly one backend.

Layers composed here: L1 listeners/upstreams, L2 discovery (``BackendSession``),
L3 routing (``layers/routing``), L6 session (``ClientEnd``, ``RpcPeer``), L7
capability (``layers/capability``). Resilience and Policy are not part of the
pipeline yet; ``hopline declare`` says so.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from hopline.binding import Era
from hopline.config.schema import GatewayConfig
from hopline.config.watch import diff_backends
from hopline.jsonrpc import Message, UnavailableError
from hopline.layers.discovery.backend import BackendInfo, BackendSession
from hopline.compose.resilience import build as build_resilience
from hopline.layers.routing.cursors import CursorCodec
from hopline.layers.routing.namespace import Namespace
from hopline.layers.routing.tasks import TaskIds
from hopline.layers.routing.uris import SingleBackend, UriMapper
from hopline.layers.session.client_end import ClientEnd
from hopline.context import ANONYMOUS, Principal
from hopline.layers.policy.propagation import Propagator
from hopline.layers.session.held import HeldCalls
from hopline.modes.gateway_listen import BackendListens
from hopline.modes.gateway_pipeline import build_pipeline, release
from hopline.modes.gateway_session import CHANGE_SIGNALS, GatewaySession
from hopline.modes.gateway_shared import Sharing
from hopline.compose.connectors import RemoteBackends, StdioBackends
from hopline.transports.targets import RemoteTarget, StdioTarget
from hopline.compose.observability import build as build_observability

log = logging.getLogger("hopline.gateway")
MAX_PER_CALLER = 1024  # per-caller connectors kept (token exchange, passthrough); the oldest is closed


class Gateway:
    def __init__(self, config: GatewayConfig, *, propagation: Any = None) -> None:
        """``propagation``: credentials toward the backends, if not the configuration's
        (``auth.backends``); transparent mode passes the client's own on."""
        self.cursors = CursorCodec()
        self.connectors: dict[str, StdioBackends | RemoteBackends] = {}
        # base key (backend id, or (backend id, principal key)), or (backend id, principal key | None, capability set)
        self.shared: dict[Any, BackendSession] = {}
        self.sharing = Sharing(self)  # what makes a shared session look like a client's own (gateway_shared.py)
        self._shared_lock: dict[str, asyncio.Lock] = {}
        self._failed: dict[str, tuple[float, BaseException, float]] = {}  # backend → (retry at, error, failed at)
        self.sessions: set[GatewaySession] = set()
        self.catalogs: dict[tuple, Any] = {}  # (list method, backend versions) → Catalog, shared by all sessions
        self.listeners: set[Any] = set()  # open subscriptions/listen streams of 2026-07-28 clients
        self.held = HeldCalls()  # backend calls held open across 2026-07-28 clients' MRTR retries
        self.backend_listens = BackendListens(self)  # 2026-07-28 backends' listen streams, resource subscriptions
        self.visible_cache: dict[tuple, Any] = {}  # (list key, gate version, principal) → filtered list
        self.gate_version = 0  # bumped whenever a gate (breaker) withdraws or restores a backend
        # Credentials toward HTTP backends (draft §9.1). Changing `auth` needs a restart.
        self.propagation = propagation if propagation is not None else Propagator.from_config(config)
        self._per_caller: dict[tuple[str, Any], tuple[RemoteBackends, Any]] = {}  # (backend, principal key) → connector, its auth
        # Built once: breaker state and metrics outlive hot reloads (their settings need a restart).
        self.resilience = build_resilience(config)
        self.observability = build_observability(config, gates=self.resilience.gates)
        self.observability.track_sessions(lambda: len(self.sessions))
        self.observability.readiness(lambda: all(self.pipeline.available(b) for b in self.connectors))
        self._supervisor: asyncio.Task | None = None
        self._health: asyncio.Task | None = None
        self._configure(config)
        for backend_id in config.backends:
            self._add_connector(backend_id)

    def _configure(self, config: GatewayConfig) -> None:
        self.config = config
        self.reverse = config.mode in ("reverse", "sidecar")  # one backend, its names, URIs and identity unchanged
        self.sidecar = config.mode == "sidecar"  # ... and every message to it mediated, unknown methods too
        self.namespace = Namespace(config.routing.delimiter, max_length=config.routing.max_name_length)
        self.uris: UriMapper | SingleBackend = UriMapper(config.routing.uri_scheme)
        self.tasks: TaskIds | SingleBackend = TaskIds()
        if self.reverse:  # the single backend's URIs and task ids, unchanged (§5.3)
            self.uris = self.tasks = SingleBackend(next(b for b, spec in config.backends.items() if spec.enabled))
        self.catalogs.clear()
        self.visible_cache.clear()
        old, self.pipeline = getattr(self, "pipeline", None), build_pipeline(config, resilience=self.resilience, observability=self.observability)
        if old is not None and (old.calls or old.tools.modes or old.endpoints):
            self._release = asyncio.ensure_future(release(old))
        for gate in self.pipeline.gates:
            gate.bind(self._gate_changed)

    def _gate_changed(self, backend_id: str) -> None:
        """A gate withdrew or restored a backend: every client's surface changed (§11.1)."""
        self.gate_version += 1
        self.visible_cache.clear()
        log.info("backend %s %s", backend_id, "restored" if self.pipeline.available(backend_id) else "withdrawn")
        for session in list(self.sessions):
            session.surface_changed()
        self.announce(CHANGE_SIGNALS)

    def _add_connector(self, backend_id: str) -> None:
        spec = self.config.backends[backend_id]
        if not spec.enabled:
            return
        if spec.command is not None:
            target: StdioTarget | RemoteTarget = StdioTarget([spec.command, *spec.args], spec.env or None, spec.cwd, spec.inherit_env)
            # Every child of this backend from one capped pool (DESIGN §7). A request at the cap
            # waits up to half the startup timeout for a slot (the rest is the child's own start).
            cap, prewarm, idle = spec.pool_bounds()
            routing = self.config.routing
            self.connectors[backend_id] = StdioBackends(  # type: ignore[arg-type]
                target, name=backend_id, max_children=cap, prewarm=prewarm, idle_timeout=idle, wait=routing.startup_timeout / 2, relay=False, retry_after=routing.retry_after,
            )
        elif spec.openapi is not None:  # Conversion mode (§5.7): the API's operations as an in-process MCP server
            from hopline.conversion.server import OpenApiBackends

            self.connectors[backend_id] = OpenApiBackends(backend_id, spec, base_dir=self.config.base_dir, timeout=self.timeout_for(backend_id) or 30.0)  # type: ignore[assignment]
        else:
            # A backend that forgets our session (restart, idle expiry: HTTP 404) is
            # re-initialized transparently and the request retried once (test-battery F1).
            self.connectors[backend_id] = RemoteBackends(self._target(backend_id), reinitialize_on_404=True)
        self._shared_lock[backend_id] = asyncio.Lock()

    def _target(self, backend_id: str, principal: Principal | None = None) -> RemoteTarget:
        spec = self.config.backends[backend_id]
        return RemoteTarget(spec.url or "", spec.transport, dict(spec.headers), auth=self.propagation.auth_for(backend_id, principal), name=backend_id)

    def connector_for(self, backend_id: str, principal: Principal) -> StdioBackends | RemoteBackends:
        """The backend's connector for this caller: the shared one, or, where credentials
        depend on the caller (token exchange, passthrough), one per principal, so no
        caller's credential ever carries another caller's request."""
        if not self.propagation.per_principal(backend_id):
            return self.connectors[backend_id]
        key = (backend_id, principal.key)
        found = self._per_caller.get(key)
        if found is None:
            target = self._target(backend_id, principal)
            found = (RemoteBackends(target, reinitialize_on_404=True), target.auth)
            self._per_caller[key] = found
            while len(self._per_caller) > MAX_PER_CALLER:
                oldest = next(iter(self._per_caller))
                old, _auth = self._per_caller.pop(oldest)
                asyncio.ensure_future(old.aclose())
        elif principal.token and getattr(found[1], "principal", None) is not None and found[1].principal.token != principal.token:
            found[1].principal = principal  # the same caller with a newer token
        return found[0]

    def _share_key(self, backend_id: str, principal: Principal) -> Any:
        return (backend_id, principal.key) if self.propagation.per_principal(backend_id) else backend_id

    async def _remove_connector(self, backend_id: str) -> None:
        connector = self.connectors.pop(backend_id, None)
        shared = [self.shared.pop(k) for k in list(self.shared) if k == backend_id or (isinstance(k, tuple) and k[0] == backend_id)]
        per_caller = [self._per_caller.pop(k)[0] for k in list(self._per_caller) if k[0] == backend_id]
        self._failed.pop(backend_id, None)
        self.backend_listens.detach(backend_id)
        await asyncio.gather(*(s.aclose() for s in shared), *(c.aclose() for c in per_caller), return_exceptions=True)
        if connector is not None:
            await connector.aclose()

    async def reload(self, new: GatewayConfig) -> None:
        """Apply a changed configuration file (hot reload, DESIGN §3.8): backends that
        were removed or changed are closed, added or changed ones connected, and every
        client is sent the CHANGE-SIGNAL. Listener settings need a restart."""
        diff = diff_backends(self.config, new)
        if new.listen != self.config.listen:
            log.warning("reload: listen settings changed; they take effect after a restart")
        if new.resilience != self.config.resilience or new.observability != self.config.observability:
            log.warning("reload: resilience/observability settings changed; they take effect after a restart")
        gone = diff.removed + diff.changed
        # What callers see changes with the tool modes and the policy, not only with the backends.
        surface = new.tools != self.config.tools or new.policy != self.config.policy or new.routing != self.config.routing
        for backend_id in gone:
            await self._remove_connector(backend_id)
        self._configure(new)
        for backend_id in diff.added + diff.changed:
            self._add_connector(backend_id)
        log.info("reload: added %s, removed %s, changed %s", diff.added or "-", diff.removed or "-", diff.changed or "-")
        for session in list(self.sessions):
            await session.reloaded(gone, [b for b in diff.added + diff.changed if b in self.connectors])
        if diff or surface:  # (sessions of the handshake era were told by `reloaded`)
            self.announce(CHANGE_SIGNALS)

    # -- the Backends protocol (what listeners call) ---------------------------------------
    def start(self) -> None:
        """Start the background work the gateway owns (breaker trials). Idempotent."""
        if self._supervisor is None:
            self._supervisor = asyncio.create_task(self.resilience.run(self.probe), name="breaker-trials")
        if self._health is None and self.config.routing.health_interval > 0:
            self._health = asyncio.create_task(self._health_loop(), name="health-probes")

    async def _health_loop(self) -> None:
        """Discovery health probes (draft §6.2): every ``health_interval`` each open shared
        backend session gets a ``ping`` (handshake era) or a ``server/discover`` (2026-07-28,
        which also polls its capabilities). A failure counts against the backend's breaker;
        changed capabilities re-compose the surface with a CHANGE-SIGNAL. Probes never start
        a backend; sessions that are not open are the reconnect loop's business."""
        while True:
            await asyncio.sleep(self.config.routing.health_interval)
            for key, session in list(self.shared.items()):
                if session.is_closed():
                    continue
                try:
                    await self.health_probe(session)
                except Exception as exc:
                    log.warning("backend %s: health probe failed: %s", session.id, _describe(exc))
                    self.resilience.observe(session.id, exc)

    async def health_probe(self, session: BackendSession) -> None:
        timeout = min(self.timeout_for(session.id) or 10.0, 10.0)
        if session.info.era is Era.HANDSHAKE:
            answer = await session.call("ping", {}, timeout=timeout)
            if "error" in answer.body:
                raise UnavailableError(f"backend {session.id} answered ping with an error", backend=session.id, reason="health")
            return
        answer = await session.call("server/discover", {}, timeout=timeout)
        value = answer.body.get("result")
        if not isinstance(value, dict):
            raise UnavailableError(f"backend {session.id} answered server/discover with an error", backend=session.id, reason="health")
        caps = value.get("capabilities")
        if isinstance(caps, dict) and caps != session.info.capabilities:
            log.info("backend %s: capabilities changed", session.id)
            session.info.capabilities = caps
            session.invalidate()
            self.catalogs.clear()
            self.visible_cache.clear()
            for client in list(self.sessions):
                client.surface_changed()
            self.announce(CHANGE_SIGNALS)

    async def probe(self, backend_id: str) -> Message:
        """A breaker's HALF-OPEN trial: one ``ping`` through a live session of that
        backend (any client's), else through the shared one (started if need be)."""
        for session in list(self.sessions):
            found = (session.backends or {}).get(backend_id)
            if isinstance(found, BackendSession) and not found.is_closed():
                return await found.call("ping", {})
        return await (await self.shared_session(backend_id)).call("ping", {})

    async def open_session(self, era: Era, *, endpoint: str | None = None) -> ClientEnd:
        self.start()
        session = GatewaySession(self, stateful=True, endpoint=endpoint)
        self.sessions.add(session)
        return session.end

    async def open_exchange(self, era: Era, *, endpoint: str | None = None) -> ClientEnd:
        self.start()
        return GatewaySession(self, stateful=False, endpoint=endpoint).end

    def endpoint(self, path: str) -> Endpoint:
        """What a listener at another MCP endpoint (``tools.endpoints``) opens sessions on."""
        return Endpoint(self, path)

    async def aclose(self) -> None:
        for task in (self._supervisor, self._health):
            if task is not None:
                task.cancel()
        for session in list(self.sessions):
            await session.end.aclose()
        await release(self.pipeline, grace=0)  # runs still in flight are stopped
        await self.backend_listens.aclose()
        await self.sharing.aclose()
        shared, self.shared = list(self.shared.values()), {}
        await asyncio.gather(*(s.aclose() for s in shared), return_exceptions=True)
        per_caller, self._per_caller = [c for c, _auth in self._per_caller.values()], {}
        await asyncio.gather(*(c.aclose() for c in per_caller), return_exceptions=True)
        await self.propagation.aclose()
        await asyncio.gather(*(c.aclose() for c in self.connectors.values()), return_exceptions=True)
        await asyncio.to_thread(self.observability.close)  # flushes batched spans

    # -- backend sessions ---------------------------------------------------------------------
    def timeout_for(self, backend_id: str) -> float | None:
        return self.config.backends[backend_id].timeout or self.config.listen.request_timeout

    async def connect(
        self, backend_id: str, *, era: Era, client_capabilities: dict[str, Any], on_request: Any, on_notification: Any, principal: Principal = ANONYMOUS, chain: list[Any] | None = None
    ) -> BackendSession:
        """A new backend session, in ``era`` if the backend speaks it (else the other). Its
        handshake carries the hop sequence (``chain``, the one the client's request came
        with, plus this hop), so an intermediary that leads back here refuses it at once."""
        channel = await self.connector_for(backend_id, principal).open_session(era)
        return await BackendSession.open(
            backend_id, channel, client_capabilities=client_capabilities, on_request=on_request, on_notification=on_notification, timeout=self.timeout_for(backend_id), prefer=era,
            meta=self.hop_meta(chain or []),
        )

    def hop_meta(self, chain: list[Any]) -> dict[str, Any]:
        """``_meta`` for the gateway's own requests to a backend (handshakes, list fetches):
        the hop sequence ``chain`` with this hop appended; empty without hop metadata."""
        hops = self.observability.hops
        return {} if hops is None else {hops.key: [*chain, hops.entry()]}

    def arrived(self, meta: dict[str, Any]) -> list[Any]:
        """The hop sequence a client's request came with, after the loop and depth checks
        (raises :class:`~hopline.observability.hops.LoopDetected` / ``TooManyHops``)."""
        hops = self.observability.hops
        return [] if hops is None or hops.key not in meta else hops.incoming(meta)

    async def shared_session(
        self, backend_id: str, principal: Principal = ANONYMOUS, chain: list[Any] | None = None, capabilities: dict[str, Any] | None = None,
        prefer: Era = Era.MODERN,
    ) -> BackendSession:
        """The session callers share: per backend (or per (backend, caller) where the
        credentials depend on the caller), and for a handshake-era backend per client
        capability set (``capabilities``, bounded); started under the backend's lock, so
        concurrent callers (and a crashed one's replacement) start one. See gateway_shared.py."""
        return await self.sharing.session(backend_id, principal, chain, capabilities, prefer)

    def shares(self, backend_id: str) -> bool:
        """Whether client sessions share this backend's sessions (``share``/``stateless``)."""
        return self.config.backends[backend_id].shares()

    def _shared_changed(self, backend: BackendSession, method: str) -> None:
        for session in self.sharing.users(backend):  # the clients on it (a capability set's session is its own child)
            session.backend_changed(backend.id, method)
        self.announce((method,))

    def announce(self, methods: tuple[str, ...]) -> None:
        """Send CHANGE-SIGNALs to every open 2026-07-28 listen stream that asked for them."""
        for listener in list(self.listeners):
            listener.changed(methods)

    async def sessions_for(self, ids: list[str], owner: GatewaySession) -> dict[str, BackendSession | BaseException]:
        """Connect to every backend concurrently; one that fails or is slow does not block the rest."""
        startup = self.config.routing.startup_timeout
        caps = owner.client_capabilities
        if not owner.stateful:  # the common case for 2026-07-28 requests: every shared session is up
            ready = [self.sharing.lookup(b, owner.principal, caps, Era.MODERN) for b in ids]
            if all(s is not None for s in ready):
                return dict(zip(ids, ready))  # type: ignore[arg-type]

        async def one(backend_id: str) -> BackendSession:
            if not owner.stateful or self.shares(backend_id):
                return await self.shared_session(backend_id, owner.principal, owner.arrival, caps, self.sharing.prefer(backend_id, owner.stateful))
            return await owner.open_backend(backend_id)

        results = await asyncio.gather(*(asyncio.wait_for(one(b), startup) for b in ids), return_exceptions=True)
        out: dict[str, BackendSession | BaseException] = {}
        for backend_id, result in zip(ids, results):
            if isinstance(result, BaseException):
                log.warning("backend %s unavailable: %s", backend_id, _describe(result))
            out[backend_id] = result
        return out

    def infos(self, sessions: dict[str, BackendSession | BaseException]) -> dict[str, BackendInfo]:
        return {b: s.info for b, s in sessions.items() if isinstance(s, BackendSession)}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "did not start in time"
    return getattr(exc, "reason", None) or getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"


class Endpoint:
    """The gateway behind one more MCP endpoint: the same backends, policy and state;
    sessions opened here show tools by that endpoint's :class:`ToolPlan`."""

    def __init__(self, gateway: Gateway, path: str) -> None:
        self.gateway, self.path = gateway, path

    async def open_session(self, era: Era) -> ClientEnd:
        return await self.gateway.open_session(era, endpoint=self.path)

    async def open_exchange(self, era: Era) -> ClientEnd:
        return await self.gateway.open_exchange(era, endpoint=self.path)
