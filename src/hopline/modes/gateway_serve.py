"""Wiring for ``hopline serve``: a Gateway behind the HTTP listeners, or behind our stdio."""

from __future__ import annotations

import asyncio
import logging

from hopline import runtime
from hopline.binding import Era
from hopline.config.schema import GatewayConfig
from hopline.declaration import declare, for_config
from hopline.modes.gateway import Gateway
from hopline.modes.relay import serve_own_stdio
from hopline.transports import http_util as hu
from hopline.transports.app import DECLARATION_PATH, HoplineApp
from hopline.transports.http_session import SessionTable
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


def serve_http(config: GatewayConfig, path: str | None = None) -> int:
    async def main() -> int:
        gateway = Gateway(config)
        watch = asyncio.create_task(_watch(path, gateway))
        listen = config.listen
        sessions = SessionTable(max_sessions=listen.max_sessions, idle_ttl=listen.session_ttl)
        sse_sessions = SessionTable(max_sessions=listen.max_sessions, idle_ttl=listen.session_ttl)
        deployment = for_config(config)
        app = HoplineApp(
            StreamableHttpListener(gateway, sessions, ListenerOptions(max_body=listen.max_body, request_timeout=listen.request_timeout)),
            sse=SseListener(gateway, sse_sessions, max_body=listen.max_body),
            security=hu.SecurityPolicy(
                bound_host=listen.host,
                allowed_origins=frozenset(listen.allowed_origins),
                allowed_hosts=frozenset(h.lower() for h in listen.allowed_hosts),
                check_host=listen.check_host,
            ),
            declaration=lambda: declare(deployment),
            mcp_path=listen.path,
        )

        def ready(host: str, port: int) -> None:
            base = f"http://{host}:{port}"
            deployment.endpoints.update(mcp=base + listen.path, sse=base + "/sse", declaration=base + DECLARATION_PATH)
            runtime.announce(f"hopline serve: {config.mode} gateway for {len(gateway.connectors)} backends at {base}{listen.path} (Streamable HTTP) and {base}/sse (legacy SSE)")

        async def shutdown() -> None:
            watch.cancel()
            await sessions.close_all()
            await sse_sessions.close_all()
            await gateway.aclose()

        await runtime.serve_http(app, host=listen.host, port=listen.port, on_ready=ready, on_shutdown=shutdown)
        return 0

    return runtime.run(main())


def serve_stdio(config: GatewayConfig) -> int:
    async def main() -> int:
        gateway = Gateway(config)
        try:
            end = await gateway.open_session(Era.HANDSHAKE)
            reason = await serve_own_stdio(end, drain=config.listen.request_timeout)
            log.info("gateway session ended: %s", reason)
        finally:
            await gateway.aclose()
        return 0

    return runtime.run(main())
