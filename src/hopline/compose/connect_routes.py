"""The consent pages of the per-user upstream accounts (hopline/connect/app.py) on the gateway's HTTP listener.

:func:`mounted` puts them in front of the ASGI root: ``/connect/*`` goes to them after the same Origin/Host
guard as every other path; everything else goes on to the root unchanged. Nothing is mounted without a
``mode: user_oauth`` backend.
"""

from __future__ import annotations

from typing import Any

from hopline.jsonrpc import HoplineError
from hopline.transports import http_util as hu


def mounted(app: Any, propagation: Any, auth: Any) -> Any:
    """``app`` with the consent pages in front (``app`` itself if no backend uses ``user_oauth``)."""
    connections = propagation.connections() if hasattr(propagation, "connections") else None
    if connections is None:
        return app
    from hopline.connect.app import ConnectApp

    async def authenticate(raw: list[tuple[bytes, bytes]]) -> Any:
        return await auth.check(hu.Headers(raw), b"")

    pages = ConnectApp(connections, authenticate=authenticate if auth is not None else None)
    security = app.security

    async def root(scope: hu.Scope, receive: hu.Receive, send: hu.Send) -> None:
        if scope["type"] == "http" and pages.handles(scope["path"]):
            try:
                security.check(hu.Headers(scope["headers"]))
            except HoplineError as exc:
                await hu.send_error(send, exc)
                return
            await pages(scope, receive, send)
            return
        await app(scope, receive, send)

    return root
