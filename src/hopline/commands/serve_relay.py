"""The process of ``hopline relay`` (draft §5.1, the composition is modes/relay.py): the
backends and listeners built once, served until a signal or the end of input, then all closed.

- :func:`serve_http`: a listener in front of one backend (``hopline relay --port P --
  CMD`` or ``… URL``); each handshake-era client session gets its own backend session,
  stateless exchanges share one connection per era (``--shared``: sessions too).
- :func:`serve_stdio`: our stdio in front of a remote server (``hopline relay --stdio
  URL``), the two channels joined by :func:`~hopline.transports.pump.pump`.

The command line is commands/relay.py.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, Callable

from hopline.transports.targets import RemoteTarget, StdioTarget

log = logging.getLogger("hopline.relay")


def serve_http(
    spec: StdioTarget | RemoteTarget,
    args: argparse.Namespace,
    *,
    shown: str,
    declaration: Callable[[dict[str, str]], Any],
) -> int:
    """The HTTP listeners in front of ``spec``; ``shown``: the target as the startup line
    names it; ``declaration(endpoints)``: the conformance declaration it serves."""
    from hopline import runtime
    from hopline.compose.connectors import RemoteBackends, StdioBackends
    from hopline.compose.listen import replicas
    from hopline.transports import http_util as hu
    from hopline.transports.admission import StreamLimits
    from hopline.transports.app import DECLARATION_PATH, HoplineApp
    from hopline.transports.session_table import SessionTable
    from hopline.transports.sse_server import SseListener
    from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener

    async def main() -> int:
        if isinstance(spec, StdioTarget):
            backends: StdioBackends | RemoteBackends = StdioBackends(
                spec,
                shared=args.shared,
                max_children=args.max_children,
                prewarm=args.prewarm,
                idle_timeout=args.child_idle_timeout or None,
                reclaim_after=args.child_reclaim_after,
            )
        else:
            backends = RemoteBackends(spec, shared=args.shared)
        sessions = SessionTable(
            max_sessions=args.max_sessions,
            idle_ttl=args.session_ttl,
            max_pending=args.max_pending_sessions,
            handshake_timeout=args.handshake_timeout,
            stream_limits=StreamLimits(args.stream_buffer_messages, args.stream_buffer_bytes),
            **replicas(getattr(args, "state", None)),
        )
        options = ListenerOptions(
            max_body=args.max_body, request_timeout=args.request_timeout, stateless=args.stateless_http
        )
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
            declaration=lambda: declaration(endpoints),
            mcp_path=args.mcp_path,
        )

        def ready(host: str, port: int) -> None:
            base = f"http://{host}:{port}"
            endpoints.update(mcp=base + args.mcp_path, sse=base + "/sse", declaration=base + DECLARATION_PATH)
            runtime.announce(
                f"hopline relay: serving {shown} at {base}{args.mcp_path} (Streamable HTTP) and {base}/sse (legacy SSE)"
            )

        async def shutdown() -> None:
            await sessions.close_all()
            await app.sse.sessions.close_all() if app.sse else None
            await backends.aclose()

        await runtime.serve_http(
            app, host=args.host, port=args.port, on_ready=ready, on_shutdown=shutdown, limits=args.limits
        )
        return 0

    return runtime.run(main())


def serve_stdio(spec: RemoteTarget, args: argparse.Namespace) -> int:
    """One stdio client (a desktop app launched us) ⇄ a remote server."""
    from hopline import runtime
    from hopline.binding import Era
    from hopline.compose.connectors import RemoteBackends
    from hopline.layers.transport.channel import ChannelClosed
    from hopline.transports import http_util as hu
    from hopline.transports.pump import serve_own_stdio

    async def main() -> int:
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
