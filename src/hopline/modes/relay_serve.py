"""Wiring for ``hopline relay``: build listeners and backends, run, close everything."""

from __future__ import annotations

import argparse
import logging

from hopline import runtime
from hopline.declaration import Deployment, declare
from hopline.compose.connectors import RemoteBackends, StdioBackends
from hopline.modes.relay_cli import describe
from hopline.transports import http_util as hu
from hopline.transports.app import DECLARATION_PATH, HoplineApp
from hopline.transports.admission import StreamLimits
from hopline.transports.http_session import SessionTable
from hopline.transports.sse_server import SseListener
from hopline.transports.pump import serve_own_stdio
from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener
from hopline.transports.targets import RemoteTarget, StdioTarget

log = logging.getLogger("hopline.relay")


def _deployment(spec: StdioTarget | RemoteTarget, endpoints: dict[str, str]) -> Deployment:
    injected = isinstance(spec, RemoteTarget) and bool(spec.headers)
    return Deployment(modes=["relay"], token_propagation="credential-injection" if injected else "none", endpoints=endpoints)


def serve_http(spec: StdioTarget | RemoteTarget, args: argparse.Namespace) -> int:
    async def main() -> int:
        if isinstance(spec, StdioTarget):
            if args.max_children < 1 or args.prewarm < 0 or args.child_idle_timeout < 0 or args.child_reclaim_after < 0:
                log.error("--max-children must be at least 1, --prewarm, --child-idle-timeout and --child-reclaim-after at least 0")
                return 2
            backends: StdioBackends | RemoteBackends = StdioBackends(
                spec, shared=args.shared, max_children=args.max_children, prewarm=args.prewarm, idle_timeout=args.child_idle_timeout or None, reclaim_after=args.child_reclaim_after,
            )
        else:
            backends = RemoteBackends(spec, shared=args.shared)
        sessions = SessionTable(
            max_sessions=args.max_sessions, idle_ttl=args.session_ttl, max_pending=args.max_pending_sessions, handshake_timeout=args.handshake_timeout,
            stream_limits=StreamLimits(args.stream_buffer_messages, args.stream_buffer_bytes),
        )  # fmt: skip
        options = ListenerOptions(max_body=args.max_body, request_timeout=args.request_timeout, stateless=args.stateless_http)
        endpoints: dict[str, str] = {}
        security = hu.SecurityPolicy(
            bound_host=args.host,
            allowed_origins=frozenset(args.allow_origin),
            allowed_hosts=frozenset(h.lower() for h in args.allow_host),
            check_host=not args.no_host_check,
        )
        app = HoplineApp(
            StreamableHttpListener(backends, sessions, options),
            sse=SseListener(backends, sessions.sibling(), max_body=args.max_body),
            security=security,
            declaration=lambda: declare(_deployment(spec, endpoints)),
            mcp_path=args.mcp_path,
        )

        def ready(host: str, port: int) -> None:
            base = f"http://{host}:{port}"
            endpoints.update(mcp=base + args.mcp_path, sse=base + "/sse", declaration=base + DECLARATION_PATH)
            runtime.announce(f"hopline relay: serving {describe(spec)} at {base}{args.mcp_path} (Streamable HTTP) and {base}/sse (legacy SSE)")

        async def shutdown() -> None:
            await sessions.close_all()
            await app.sse.sessions.close_all() if app.sse else None
            await backends.aclose()

        await runtime.serve_http(app, host=args.host, port=args.port, on_ready=ready, on_shutdown=shutdown, limits=args.limits)
        return 0

    return runtime.run(main())


def serve_stdio(spec: RemoteTarget, args: argparse.Namespace) -> int:
    """One stdio client (a desktop app launched us) ⇄ a remote server."""

    async def main() -> int:
        from hopline.binding import Era
        from hopline.layers.transport.channel import ChannelClosed

        backends = RemoteBackends(spec)
        try:
            try:
                backend = await backends.open_session(Era.HANDSHAKE)  # the era is decided per message
            except ChannelClosed as exc:
                log.error("cannot reach %s: %s", hu.public_url(spec.url), exc.reason)
                return 1
            reason = await serve_own_stdio(backend, drain=args.request_timeout)
            log.info("relay ended: %s", reason)
        finally:
            await backends.aclose()
        return 0

    return runtime.run(main())
