"""The process of ``hopline serve`` (:mod:`.serve`) in the gateway modes: a Gateway behind
the HTTP listeners, or behind our stdio.

With ``auth`` configured, the HTTP front authenticates every MCP request
(layers/policy/auth.py) before a listener sees it. The stdio client is the local user:
no authentication, and its messages carry the ``LOCAL`` principal.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from hopline import runtime
from hopline.binding import LATEST_MODERN, Era
from hopline.compose.listen import session_table
from hopline.compose.preflight import preflight
from hopline.compose.startup import report
from hopline.config.errors import ConfigError
from hopline.config.schema import GatewayConfig
from hopline.declaration import declare, for_config
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import Channel
from hopline.compose.gateway import Gateway
from hopline.modes import build
from hopline.transports.pump import serve_own_stdio
from hopline.transports import http_util as hu
from hopline.transports.app import DECLARATION_PATH, HoplineApp
from hopline.transports.door_limits import DoorLimits
from hopline.transports.sse_server import SseListener
from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener

log = logging.getLogger("hopline.serve")


async def _watch(path: str | None, gateway: Gateway) -> None:
    """Hot reload: apply every valid change of the configuration file."""
    if path is None or not gateway.config.reload_interval:
        return
    from hopline.config.watch import ConfigWatcher

    watcher = ConfigWatcher(path, interval=gateway.config.reload_interval)
    watcher.load()
    async for new in watcher.changes():
        try:
            await gateway.reload(new)
        except Exception:
            log.exception("reload failed; keeping what is running")


def _serve_admin(gateway: Gateway, stop: asyncio.Event) -> asyncio.Task | None:
    "The admin listener (/metrics, /healthz, /readyz, /status, /config, the page at /) on its own port, if configured."
    obs = gateway.observability
    if obs.admin_app is None or obs.admin_port is None:
        return None
    path = gateway.config.observability.metrics.path

    def ready(host: str, port: int) -> None:
        runtime.announce(f"hopline serve: admin endpoint at http://{host}:{port}{path} (Prometheus)")

    limits = DoorLimits(**gateway.config.listen.limits.model_dump())  # the same front-door bounds as the MCP listener
    return asyncio.create_task(
        runtime.serve_admin(
            obs.admin_app, host=obs.admin_host, port=obs.admin_port, on_ready=ready, stop=stop, limits=limits
        )
    )


def _check_admin(config: GatewayConfig) -> None:
    """The admin port can be listened on (else :class:`runtime.BindError`)."""
    metrics = config.observability.metrics
    if metrics.port is not None:
        runtime.check_bind(metrics.host, metrics.port, "--admin-port")


def _signin_origin(auth: Any) -> frozenset[str]:
    signin = getattr(auth, "signin", None)
    return frozenset() if signin is None else frozenset({signin.issuer})


def serve_http(config: GatewayConfig, path: str | None = None, *, report_backends: bool = False) -> int:
    try:
        auth = preflight(config, path or "<config>")
    except ConfigError as exc:
        runtime.announce(f"hopline serve: {exc}")
        return 1

    async def main() -> int:
        gateway = _started(config, "tcp")
        if gateway is None:
            return 1
        await gateway.prime()
        admin_stop = asyncio.Event()
        admin = _serve_admin(gateway, admin_stop)
        tasks = runtime.TaskOwner("serve")  # the process's own long-lived tasks, cancelled and awaited at shutdown
        tasks.spawn(_watch(path, gateway), "config-watch")
        listen = config.listen
        sessions = session_table(listen, config.state)
        sse_sessions = sessions.sibling()  # siblings share the admission slots and counters
        gateway.observability.track_listener(sessions.admission.counts)
        # More endpoints (tools.endpoints): the same gateway, sessions of their own (an id is one endpoint's).
        tables = {p: sessions.sibling(p) for p in config.tools.endpoints}
        options = ListenerOptions(
            max_body=listen.max_body, request_timeout=listen.request_timeout, discover_versions=(LATEST_MODERN,)
        )
        deployment = for_config(config)
        gateway.observability.declared(lambda: declare(deployment))  # the admin page's declaration
        watch = gateway.composition.factory(2)
        if watch is not None:  # Layer 2 keeps watching (Federation: the members' declarations, kept current in ours)
            deployment.members = {}
            tasks.spawn(watch(config, deployment.members), "discovery-watch")
        app = HoplineApp(
            StreamableHttpListener(gateway, sessions, options),
            endpoints={p: StreamableHttpListener(gateway.endpoint(p), table, options) for p, table in tables.items()},
            sse=SseListener(gateway, sse_sessions, max_body=listen.max_body),
            security=hu.SecurityPolicy(
                bound_host=listen.host,
                # a browser posts hopline's consent form from the sign-in issuer's own origin (auth.signin)
                allowed_origins=frozenset(listen.allowed_origins) | _signin_origin(auth),
                allowed_hosts=frozenset(h.lower() for h in listen.allowed_hosts),
                check_host=listen.check_host,
            ),
            declaration=lambda: declare(deployment),
            mcp_path=listen.path,
            auth=auth,
        )
        from hopline.compose.connect_routes import mounted  # issue 32: /connect/* (per-user upstream accounts)

        app = mounted(app, gateway.propagation, auth)

        def ready(host: str, port: int) -> None:
            base = f"http://{host}:{port}"
            deployment.endpoints.update(mcp=base + listen.path, sse=base + "/sse", declaration=base + DECLARATION_PATH)
            deployment.endpoints.update({f"mcp {p}": base + p for p in tables})
            n = len(gateway.registry.connectors)
            runtime.announce(
                f"hopline serve: {config.mode} gateway for {n} backend{'' if n == 1 else 's'} at "
                f"{base}{listen.path} (Streamable HTTP) and {base}/sse (legacy SSE)"
            )
            for p, endpoint in config.tools.endpoints.items():
                runtime.announce(f"hopline serve: tool mode {endpoint.mode} at {base}{p} (Streamable HTTP)")
            if report_backends:  # each backend's state, once known
                tasks.spawn(report(gateway, _say), "backend-states")

        async def shutdown() -> None:
            await tasks.aclose()
            admin_stop.set()
            if admin is not None:
                await admin
            await sessions.close_all()
            await sse_sessions.close_all()
            for table in tables.values():
                await table.close_all()
            await gateway.aclose()
            if auth is not None:
                await auth.aclose()

        limits = DoorLimits(**listen.limits.model_dump())
        await runtime.serve_http(
            app, host=listen.host, port=listen.port, on_ready=ready, on_shutdown=shutdown, limits=limits
        )
        return 0

    if not hu.SecurityPolicy(bound_host=config.listen.host).loopback and auth is None:
        runtime.announce(
            f"hopline serve: warning: listening on {config.listen.host} without `auth`: anyone who can "
            "reach this port can use every backend"
        )
    try:
        _check_admin(config)
        return runtime.run(main())
    except runtime.BindError as exc:
        runtime.announce(f"hopline serve: {exc}")
        return 1


def serve_stdio(config: GatewayConfig, path: str | None = None, *, report_backends: bool = False) -> int:
    try:
        auth = preflight(config, path or "<config>")  # the stdio client is not authenticated: keys are only checked
    except ConfigError as exc:
        runtime.announce(f"hopline serve: {exc}")
        return 1
    if auth is not None:
        runtime.run(auth.aclose())
    try:
        _check_admin(config)
    except runtime.BindError as exc:
        runtime.announce(f"hopline serve: {exc}")
        return 1

    async def main() -> int:
        gateway = _started(config, "pipe")
        if gateway is None:
            return 1
        await gateway.prime()
        gateway.observability.declared(lambda: declare(for_config(gateway.config)))  # the admin page's declaration
        admin_stop = asyncio.Event()
        admin = _serve_admin(gateway, admin_stop)
        tasks = runtime.TaskOwner("serve")
        if report_backends:
            tasks.spawn(report(gateway, _say), "backend-states")
        try:
            end = await gateway.open_session(Era.HANDSHAKE)
            reason = await serve_own_stdio(_Local(end), drain=config.listen.request_timeout)
            log.info("gateway session ended: %s", reason)
        finally:
            await tasks.aclose()
            admin_stop.set()
            if admin is not None:
                await admin
            await gateway.aclose()
        return 0

    return runtime.run(main())


def _started(config: GatewayConfig, transport: str) -> Gateway | None:
    """The gateway, started (inside the event loop); None, said why, if the configuration builds none.
    ``transport``: the clients' ``network.transport`` (``tcp`` over HTTP, ``pipe`` over stdio)."""
    try:
        gateway = build(config)
    except (ConfigError, ValueError) as exc:
        runtime.announce(f"hopline serve: {exc}")
        return None
    gateway.observability.listening(transport)
    gateway.start()
    return gateway


def _say(line: str) -> None:
    runtime.announce(f"hopline serve: {line}")


class _Local:
    """The gateway end of the stdio client, marking each of its messages as ``LOCAL``'s."""

    def __init__(self, end: Channel) -> None:
        from hopline.layers.policy.auth import LOCAL

        self.end, self.principal = end, LOCAL

    async def send(self, message: Message) -> None:
        message.principal = self.principal
        await self.end.send(message)

    async def receive(self) -> Message:
        return await self.end.receive()

    async def aclose(self) -> None:
        await self.end.aclose()

    def is_closed(self) -> bool:
        return self.end.is_closed()
