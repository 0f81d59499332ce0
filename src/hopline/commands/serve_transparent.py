"""The process of ``hopline serve`` with ``mode: transparent`` (draft §5.4; the composition is
modes/transparent.py): the front (:class:`~hopline.transports.transparent.TransparentProxy`,
or the TLS passthrough), at level 2 a Reverse-mode gateway per destination behind it.
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from typing import Any, Callable

log = logging.getLogger("hopline.transparent")


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
