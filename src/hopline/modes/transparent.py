"""Transparent mode (draft §5.4): an HTTP intermediary that the client does not know
about, as a composition. Interception is the surrounding network's job (see
``config/transparent.py``): a request reaches hopline addressed to its original
destination.

Level 1 (transport-aware, bodies streamed unread):
  Layer 1  ``transports/transparent.py``: :class:`TransparentProxy`, the byte-for-byte
           HTTP forwarder, with hopline's own declaration and ``/healthz``
  Layer 5  ``layers/policy/transparent.py``: the header policy (CEL over ``http``),
           handed to the proxy as ``compose.transparent.Rules``

Level 2 (protocol-aware, every layer): the same front, and behind it
:class:`~hopline.transports.transparent.Endpoints`, a Reverse-mode ``Gateway`` per
destination and MCP endpoint path, each with its session table and Streamable HTTP
listener, the client's own credential passed through and the caller told apart by it
(``compose/transparent.py``).
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from typing import Any, Callable

from hopline.composition import Composition, layer

log = logging.getLogger("hopline.transparent")

# Level 1; level 2 runs a Reverse-mode stack per destination behind the same front.
COMPOSITION = Composition(
    mode="transparent",
    section="§5.4",
    handshake="level 1: single-handshake passthrough (MUST NOT dual-handshake)",
    layers=(layer(1, "transports.transparent"),),
    optional=(layer(5, "layers.policy.transparent", "compose.transparent"),),
)


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(config: Any, *, declaration: Callable[[], Any], endpoints: dict[str, str]) -> int:
    """``hopline serve`` for ``mode: transparent``; ``declaration()``: the conformance
    declaration it serves, whose ``endpoints`` this fills in once listening."""
    from hopline import runtime
    from hopline.compose import transparent as compose
    from hopline.transports.transparent import DECLARATION_PATH, TransparentProxy

    t = config.transparent

    if t.tls == "passthrough":
        return _run(runtime, compose.passthrough(config, runtime))
    minter = None
    if t.tls == "terminate":
        from hopline.transports.transparent_tls import CAError

        try:
            minter = compose.minter(t)
        except CAError as exc:
            print(f"hopline serve: transparent.{'ca' if t.ca else 'certificate'}: {exc}", file=sys.stderr)
            return 1
    compose.warn_plaintext(config, _loopback)

    async def main() -> int:
        aware = None
        if t.level == 2:
            from hopline.compose.listen import session_table
            from hopline.modes import reverse

            aware = compose.endpoints(config, reverse.build, session_table)  # a Reverse-mode gateway per destination
        app = TransparentProxy(
            compose.settings(t),
            compose.Rules(t),
            declaration=declaration,
            aware=aware,
            wait=config.listen.request_timeout,
        )
        listen = config.listen
        scheme = "https" if minter is not None else "http"

        def ready(host: str, port: int) -> None:
            endpoints.update(declaration=f"{scheme}://{host}:{port}{DECLARATION_PATH}")
            runtime.announce(
                (
                    f"hopline serve: transparent intermediary (level {t.level}) for {len(t.destinations)} "
                    f"destinations at {scheme}://{host}:{port} (Streamable HTTP)"
                )
            )

        from hopline.transports.door_limits import DoorLimits

        limits = DoorLimits(**listen.limits.model_dump())
        protocol = None
        if t.destination == "socket" or minter is not None:  # the original destination (SO_ORIGINAL_DST), the SNI
            from hopline.transports.interception import intercepting

            protocol = intercepting

        async def shutdown() -> None:
            await app.aclose()
            if minter is not None:
                minter.close()

        await runtime.serve_http(
            app,
            host=listen.host,
            port=listen.port,
            on_ready=ready,
            on_shutdown=shutdown,
            limits=limits,
            protocol=protocol,
            ssl=minter.server_context() if minter is not None else None,
        )
        return 0

    return _run(runtime, main())


def _run(runtime: Any, main: Any) -> int:
    try:
        return runtime.run(main)
    except runtime.BindError as exc:  # in use, or not an address of this machine: one line, exit 1
        print(f"hopline serve: {exc}", file=sys.stderr)
        return 1
