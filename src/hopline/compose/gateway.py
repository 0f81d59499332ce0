"""The composition root of the gateway modes (Forward, Reverse, Sidecar, Federation):
a :class:`Gateway` reads a :class:`GatewayConfig` and builds the layers once, handing
each its own settings:

- L1: one connector per backend (a stdio command's child pool, a remote server, an
  OpenAPI conversion), and per-caller ones where credentials depend on the caller;
- L2: the :class:`~hopline.layers.discovery.registry.Registry` of those connectors, with
  health probes;
- L3: the :class:`~hopline.layers.routing.tables.Routes` (namespace, URI and task ids);
- L4, L5, L7: the call :class:`~hopline.pipeline.Pipeline` (``compose/pipeline.py``);
- L6: the client sessions (:class:`~hopline.layers.session.gateway_session.GatewaySession`,
  one per handshake-era client session, a short-lived one per 2026-07-28 request), the
  shared backend sessions (:class:`~hopline.layers.session.sharing.Sharing`), the
  gateway's own listen streams and held calls.

The gateway is what a listener talks to (it implements ``Backends``) and is the
sessions' :class:`~hopline.layers.session.hub.Hub`. Which mode it is, is its
:class:`~hopline.composition.Composition`'s business (``hopline/modes/*.py``): the factory of
Layer 3 it calls (namespaced, or one backend whose names pass unchanged), what a method it
does not mediate gets (refused, or passed on: Sidecar), which optional layers it admits
(4, 5) and the session store of Layer 6. A hot reload re-composes what changed.

Building a gateway starts nothing: every long-lived task it has (breaker trials, health
probes, the replica link's start, a replaced pipeline's release) belongs to its
:class:`~hopline.compose.gateway_runtime.GatewayRuntime`, one ``asyncio.TaskGroup`` that
:meth:`Gateway.start` starts and :meth:`Gateway.aclose` cancels and awaits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from hopline.binding import Era
from hopline.compose.observability import build as build_observability
from hopline.compose.gateway_runtime import GatewayRuntime
from hopline.compose.pipeline import build_pipeline, prime, release
from hopline.compose.resilience import bounded
from hopline.compose.status import config_view, readiness, status
from hopline.compose.surface import Surfaces
from hopline.composition import Composition
from hopline.config.schema import GatewayConfig
from hopline.config.watch import diff_backends
from hopline.context import Principal, principal_of
from hopline.jsonrpc import Message
from hopline.layers.capability.lists import Catalogue
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.discovery.registry import Registry
from hopline.layers.policy.propagation import Propagator
from hopline.layers.routing.cursors import CursorCodec
from hopline.layers.session.backend_listens import BackendListens
from hopline.layers.session.task_push import TaskPush
from hopline.layers.session.client_end import ClientEnd
from hopline.layers.session.gateway_session import GatewaySession
from hopline.layers.session.links import CHANGE_SIGNALS
from hopline.layers.session.held import HeldCalls
from hopline.layers.session.sharing import describe
from hopline.layers.session.task_store import MemoryTaskStore, RedisTaskStore, TaskStore
from hopline.compose.connectors import RemoteBackends, StdioBackends
from hopline.transports.replica_link import ReplicaLink
from hopline.transports.targets import RemoteTarget, StdioTarget

log = logging.getLogger("hopline.gateway")


class Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        composition: Composition,
        *,
        propagation: Any = None,
        tasks: TaskStore | None = None,
    ) -> None:
        """``composition``: the mode, whose layer factories build it (``hopline.modes``).
        ``propagation``: credentials toward the backends, if not the configuration's
        (``auth.backends``); transparent mode passes the client's own on. ``tasks``: the
        task store (who owns which task), if not this process's own (a shared one: Redis)."""
        if composition.factory(3) is None or composition.factory(6) is None:
            raise ValueError(f"mode {composition.mode} builds no gateway (no routing or session factory)")
        self.composition = composition
        _admitted(composition, config)
        # One key for the gateway's life (cursors outlive a reload); replicas derive theirs from
        # the session key, so a cursor one of them issued pages on any other.
        self.cursors = CursorCodec(config.state.cursor_secret() if config.state is not None else None)
        self.sharing = composition.factory(6)(self)  # type: ignore[misc]
        self.sessions: set[GatewaySession] = set()
        self.listeners: set[Any] = set()
        self.replicas: ReplicaLink | None = None
        state = config.state
        if state is not None and state.redis_url is not None:  # the replicas hand each other held calls
            self.replicas = ReplicaLink.from_url(
                state.redis_url, secret=state.keys()[0], prefix=state.prefix, timeout=state.timeout
            )
            self.replicas.handler = self._handed
        self.held = HeldCalls(replica=self.replicas.replica if self.replicas is not None else None)
        bounds = config.tasks  # the store's bounds need a restart
        if tasks is None and config.state is not None and config.state.redis_url is not None:  # replicas
            tasks = RedisTaskStore.from_url(
                config.state.redis_url,
                keys=config.state.keys(),
                prefix=config.state.prefix,
                timeout=config.state.timeout,
                max_per_owner=bounds.max_per_caller,
            )
        own = MemoryTaskStore(max_tasks=bounds.max_tasks, max_per_owner=bounds.max_per_caller)
        self.tasks = tasks if tasks is not None else own
        self.backend_listens = BackendListens(self)
        self.task_push = TaskPush()
        # Credentials toward HTTP backends (draft §9.1). Changing `auth` needs a restart.
        self.propagation = propagation if propagation is not None else Propagator.from_config(config)
        # Built once: breaker state and metrics outlive hot reloads (their settings need a restart).
        self.resilience = (composition.factory(4) or bounded)(config)
        self.observability = build_observability(config, gates=self.resilience.gates)
        self.observability.track_sessions(lambda: len(self.sessions))
        self.observability.readiness(lambda: readiness(self)[0])  # the one rule: compose/status.py
        # The composed lists and their views (reads registry, routes, settings, pipeline as configured now).
        self.catalogue = Catalogue(
            self,
            check=self.resilience.fan_out.check,
            observe=self.resilience.observe,
            record=self.observability.list_fetch,
        )
        self._timeouts: dict[str, float | None] = {}
        self.registry = Registry(
            timeouts=self._timeouts,
            credentials=self.propagation,
            per_caller=self._per_caller,
            hops=self.observability.hops,
        )
        self.reload_status: dict[str, Any] = {"count": 0}  # the last hot reload, as /status shows it
        # Each backend's first start as serve reports it (compose/startup.py): None while under way,
        # then "up", "isolated", "per caller" or the error; empty where nothing starts eagerly (--lazy).
        self.first_starts: dict[str, Any] = {}
        self.observability.views(
            lambda: status(self, declaration=self.observability.declaration),
            lambda: config_view(self),
            Surfaces(self),  # /status/surface: tools/list as a chosen identity would get it
        )
        self.runtime = GatewayRuntime(self)  # its long-lived tasks, in one TaskGroup (started by `start`)
        self._configure(config)
        for backend_id in config.backends:
            self._add_connector(backend_id)

    def _configure(self, config: GatewayConfig) -> None:
        self.config = self.settings = config
        routing = self.composition.factory(3)
        self.routes = routing(config, self.cursors, pass_on=self.composition.unknown == "pass on")  # type: ignore[misc]
        self._timeouts.clear()
        self._timeouts.update({b: spec.timeout or config.listen.request_timeout for b, spec in config.backends.items()})
        self.catalogue.clear()
        old, self.pipeline = (
            getattr(self, "pipeline", None),
            build_pipeline(
                config,
                resilience=self.resilience,
                observability=self.observability,
                policy=self.composition.factory(5),
            ),
        )
        if old is not None and (old.calls or old.surface or old.tools.modes or old.endpoints):
            self.runtime.release(old)
        for gate in self.pipeline.gates:
            gate.bind(self._gate_changed)

    def _gate_changed(self, backend_id: str) -> None:
        """A gate withdrew or restored a backend: every client's surface changed (§11.1)."""
        self.catalogue.gate_changed()
        log.info("backend %s %s", backend_id, "restored" if self.pipeline.available(backend_id) else "withdrawn")
        self._surface_changed()

    def _surface_changed(self) -> None:
        for session in list(self.sessions):
            session.surface_changed()
        self.announce(CHANGE_SIGNALS)

    # -- Layer 1: a connector per backend --------------------------------------------------
    def _add_connector(self, backend_id: str) -> None:
        spec = self.config.backends[backend_id]
        if not spec.enabled:
            return
        routing = self.config.routing
        if spec.command is not None:
            target = StdioTarget([spec.command, *spec.args], spec.env or None, spec.cwd, spec.inherit_env)
            if spec.sandbox is not None and spec.sandbox.confines():
                from hopline.compose.sandboxing import hidden_files, profile_for

                target.sandbox, target.hidden = (
                    profile_for(spec.sandbox, self.config.base_dir),
                    tuple(hidden_files(self.config)),
                )
            # Every child of this backend from one capped pool (DESIGN §7). A request at the cap
            # waits up to half the startup timeout for a slot (the rest is the child's own start).
            cap, prewarm, idle = spec.pool_bounds()
            connector: Any = StdioBackends(
                target,
                name=backend_id,
                max_children=cap,
                prewarm=prewarm,
                idle_timeout=idle,
                wait=routing.startup_timeout / 2,
                relay=False,
                retry_after=routing.retry_after,
            )
        elif spec.openapi is not None:  # Conversion mode (§5.7): the API's operations as an in-process MCP server
            from hopline.conversion.server import OpenApiBackends

            connector = OpenApiBackends(
                backend_id, spec, base_dir=self.config.base_dir, timeout=self.registry.timeout_for(backend_id) or 30.0
            )
        else:
            # A backend that forgets our session (restart, idle expiry: HTTP 404) is
            # re-initialized transparently and the request retried once (test-battery F1).
            connector = RemoteBackends(self._target(backend_id), reinitialize_on_404=True)
        self.registry.add(backend_id, connector)

    def _target(self, backend_id: str, principal: Principal | None = None) -> RemoteTarget:
        spec = self.config.backends[backend_id]
        return RemoteTarget(
            spec.url or "",
            spec.transport,
            dict(spec.headers),
            auth=self.propagation.auth_for(backend_id, principal),
            name=backend_id,
        )

    def _per_caller(self, backend_id: str, principal: Principal) -> tuple[Any, Any]:
        target = self._target(backend_id, principal)
        return RemoteBackends(target, reinitialize_on_404=True), target.auth

    async def _remove_connector(self, backend_id: str) -> None:
        await self.sharing.remove(backend_id)
        self.backend_listens.detach(backend_id)
        await self.registry.remove(backend_id)

    async def reload(self, new: GatewayConfig) -> None:
        """Apply a changed configuration file (hot reload, DESIGN §3.8): backends that
        were removed or changed are closed, added or changed ones connected, and every
        client is sent the CHANGE-SIGNAL. Listener settings need a restart."""
        count = self.reload_status["count"] + 1
        try:
            diff = await self._reload(new)
        except Exception as exc:
            self.reload_status = {"count": count, "at": time.time(), "ok": False, "error": type(exc).__name__}
            raise
        self.reload_status = {
            "count": count,
            "at": time.time(),
            "ok": True,
            "added": diff.added,
            "removed": diff.removed,
            "changed": diff.changed,
        }

    async def _reload(self, new: GatewayConfig) -> Any:
        _admitted(self.composition, new)
        diff = diff_backends(self.config, new)
        if new.listen != self.config.listen:
            log.warning("reload: listen settings changed; they take effect after a restart")
        if new.resilience != self.config.resilience or new.observability != self.config.observability:
            log.warning("reload: resilience/observability settings changed; they take effect after a restart")
        gone = diff.removed + diff.changed
        # What callers see changes with the tool modes and the policy, not only with the backends.
        surface = (
            new.tools != self.config.tools or new.policy != self.config.policy or new.routing != self.config.routing
        )
        for backend_id in gone:
            await self._remove_connector(backend_id)
        self._configure(new)
        await prime(self.pipeline)
        for backend_id in diff.added + diff.changed:
            self._add_connector(backend_id)
        log.info(
            "reload: added %s, removed %s, changed %s", diff.added or "-", diff.removed or "-", diff.changed or "-"
        )
        for session in list(self.sessions):
            await session.reloaded(gone, [b for b in diff.added + diff.changed if b in self.registry.connectors])
        if diff or surface:  # (sessions of the handshake era were told by `reloaded`)
            self.announce(CHANGE_SIGNALS)
        return diff

    async def prime(self) -> None:
        """Before the first client: what the layers read from shared state (pins)."""
        await prime(self.pipeline)

    # -- the Backends protocol (what listeners call) ---------------------------------------
    def start(self) -> None:
        """Start the background work the gateway owns (its runtime's: compose/gateway_runtime.py)."""
        self.runtime.start()

    async def health_probe(self, session: BackendSession) -> None:
        try:
            changed = await self.registry.health_probe(session)
        except Exception as exc:
            log.warning("backend %s: health probe failed: %s", session.id, describe(exc, session.id))
            self.resilience.observe(session.id, exc)
            return
        if changed:
            self.catalogue.clear()
            self._surface_changed()

    async def probe(self, backend_id: str) -> Message:
        """A breaker's HALF-OPEN trial: one ``ping`` through a live session of that
        backend (any client's), else through the shared one (started if need be)."""
        for session in list(self.sessions):
            found = (session.backends or {}).get(backend_id)
            if isinstance(found, BackendSession) and not found.is_closed():
                return await found.call("ping", {})
        return await (await self.sharing.session(backend_id)).call("ping", {})

    async def open_session(self, era: Era, *, endpoint: str | None = None) -> ClientEnd:
        self.start()
        session = GatewaySession(self, stateful=True, endpoint=endpoint)
        self.sessions.add(session)
        session.end.rename = session.named  # a replicas' listener names it as every replica knows it
        return session.end

    async def open_exchange(self, era: Era, *, endpoint: str | None = None) -> ClientEnd:
        self.start()
        return GatewaySession(self, stateful=False, endpoint=endpoint).end

    async def _handed(self, body: dict[str, Any], who: dict[str, Any], timeout: float) -> dict[str, Any]:
        """A request another replica handed us (a retry of a call held here, a task of a
        stdio backend of ours), answered as the caller it names would be answered here."""
        self.start()
        session = GatewaySession(self, stateful=False)
        session.acting_for = who.get("session") if isinstance(who.get("session"), str) else None
        end = session.end
        try:
            message = Message(body)
            message.principal = principal_of(who)
            await end.send(message)
            async with asyncio.timeout(timeout):
                while True:
                    answer = await end.receive()
                    if "method" not in answer.body and answer.body.get("id") == body.get("id"):
                        return answer.body
        finally:
            await end.aclose()

    def endpoint(self, path: str) -> Endpoint:
        """What a listener at another MCP endpoint (``tools.endpoints``) opens sessions on."""
        return Endpoint(self, path)

    async def aclose(self) -> None:
        await self.runtime.aclose()  # its tasks, cancelled and awaited
        for session in list(self.sessions):
            await session.end.aclose()
        await release(self.pipeline, grace=0)  # runs still in flight are stopped
        await self.backend_listens.aclose()
        await self.task_push.aclose()
        await self.sharing.aclose()
        await self.propagation.aclose()
        await self.registry.aclose()
        if isinstance(self.tasks, RedisTaskStore):
            await self.tasks.aclose()
        if self.replicas is not None:
            await self.replicas.aclose()
        await asyncio.to_thread(self.observability.close)  # flushes batched spans

    # -- the Hub (what sessions call) ---------------------------------------------------------
    def shared_changed(self, backend: BackendSession, method: str) -> None:
        for session in self.sharing.users(backend):  # the clients on it (a capability set's session is its own child)
            session.backend_changed(backend.id, method)
        self.announce((method,))

    def announce(self, methods: tuple[str, ...]) -> None:
        """Send CHANGE-SIGNALs to every open 2026-07-28 listen stream that asked for them."""
        for listener in list(self.listeners):
            listener.changed(methods)


def _admitted(composition: Composition, config: GatewayConfig) -> None:
    """Refuse a configuration that asks for a layer the mode does not admit (ValueError)."""
    reason = composition.refused(config)
    if reason is not None:
        raise ValueError(reason)


class Endpoint:
    """The gateway behind one more MCP endpoint: the same backends, policy and state;
    sessions opened here show tools by that endpoint's :class:`ToolPlan`."""

    def __init__(self, gateway: Gateway, path: str) -> None:
        self.gateway, self.path = gateway, path

    async def open_session(self, era: Era) -> ClientEnd:
        return await self.gateway.open_session(era, endpoint=self.path)

    async def open_exchange(self, era: Era) -> ClientEnd:
        return await self.gateway.open_exchange(era, endpoint=self.path)
