"""The admin listener's ASGI app: ``GET /metrics`` (Prometheus), ``/healthz``, ``/readyz``,
and, where the gateway hands in its views (compose/status.py), ``/status`` (JSON),
``/config`` (JSON, secrets redacted) and the admin page at ``/`` (admin_page.py).

``/healthz`` (liveness) answers 200 while the process serves; ``/readyz`` (readiness)
answers 503 ``not ready`` while ``ready()`` says so (the gateway's one rule, compose/status.py
and README "Readiness": its first start of the backends under way, or a ``required``
backend down or withdrawn), so a supervisor can act without restarting a gateway that is
itself fine (FAULT-13).

Served on its own port (``observability.metrics.port`` or ``hopline serve
--admin-port``), never on the client-facing listener, so a client cannot reach it
and a scraper needs no MCP session. Read-only; no secret is ever in a metric.
``/status/surface`` (``GET`` with a query string, or ``POST`` with a JSON object of the
same fields) previews the tool surface of an identity (compose/surface.py); its input is
bounded (:data:`MAX_QUERY` bytes of query, :data:`MAX_INPUT` of body: 413) and bad input
gets a 4xx JSON ``{"error": {"status", "message"}}``.
When bound to a loopback address it answers only requests whose ``Host`` is a
loopback name (DNS-rebinding protection, as for the MCP listener, BAD-17). A present
``Origin`` must be a loopback origin, as on the MCP listener (403 otherwise, ``null``
and duplicates included): a web page elsewhere cannot read the metrics through a
visitor's browser. Scrapers send no ``Origin``. The listener has no authentication of
its own: it is bound to loopback by default (``observability.metrics.host``), and
binding it elsewhere shows ``/status``, ``/config`` (redacted) and the page to whoever
reaches that address. JSON and the page are sent ``no-store``, ``nosniff``, framing
refused; the page under a Content-Security-Policy that allows only its own inline
style and its one nonce'd script, which may fetch only this origin.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl

import orjson

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from hopline.bound import binds_loopback, loopback_name

log = logging.getLogger("hopline.admin")
MAX_INPUT = 16_384  # bytes of a /status/surface body
MAX_QUERY = 6_144  # bytes of its query string (the listener refuses targets over 8 KiB itself: 414)
SURFACE = "/status/surface"


class RequestError(Exception):
    """Bad input to a JSON view: answered ``status`` with ``{"error": {"status", "message"}}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class AdminApp:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        path: str = "/metrics",
        bound_host: str = "127.0.0.1",
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.registry = registry
        self.path = path
        self.check_host = binds_loopback(bound_host)  # by the address bound, not its spelling (bound.py)
        self.ready = ready  # the gateway sets it: its readiness rule (compose/status.py)
        self.status: Callable[[], dict[str, Any]] | None = None  # the gateway's views (compose/status.py), if handed in
        self.config: Callable[[], dict[str, Any]] | None = None
        self.surface: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None  # compose/surface.py

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        if self.check_host and not loopback_name(_host(scope)):
            return await _answer(send, 403, b"forbidden host\n")
        if not _origin_ok(scope):
            return await _answer(send, 403, b"forbidden origin\n")
        if scope["path"] == SURFACE and self.surface is not None:
            return await self._surface(scope, receive, send)
        if scope["method"] != "GET":
            return await _answer(send, 405, b"method not allowed\n", extra=[(b"allow", b"GET")])
        if scope["path"] == self.path:
            return await _answer(send, 200, generate_latest(self.registry), CONTENT_TYPE_LATEST.encode())
        if scope["path"] == "/healthz":
            return await _answer(send, 200, b"ok\n")
        if scope["path"] == "/readyz":
            ok = self.ready() if self.ready is not None else True
            return await _answer(send, 200 if ok else 503, b"ready\n" if ok else b"not ready\n")
        if self.status is not None and scope["path"] in ("/", "/status", "/config"):
            return await self._view(scope["path"], send)
        if self.status is not None and scope["path"] == "/favicon.ico":  # what a browser asks for beside every view
            return await _answer(send, 200, ICON, b"image/svg+xml", extra=SAFE)
        await _answer(send, 404, b"not found\n")

    async def _view(self, path: str, send: Send) -> None:
        assert self.status is not None
        try:
            if path == "/config":
                data: Any = self.config() if self.config is not None else {}
            else:
                data = self.status()
                if path == "/":
                    from hopline.observability.admin_page import render

                    nonce = secrets.token_urlsafe(16)
                    surface = await self.surface({}) if self.surface is not None else None
                    config = self.config() if self.config is not None else None
                    page = render(data, config, nonce=nonce, surface=surface).encode()
                    csp = (
                        f"default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; "
                        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
                    )
                    return await _answer(
                        send,
                        200,
                        page,
                        b"text/html; charset=utf-8",
                        extra=[*SAFE, (b"content-security-policy", csp.encode())],
                    )
        except Exception:
            log.exception("admin view %s failed", path)
            return await _answer(send, 500, b"internal error\n")
        body = orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str)
        await _answer(send, 200, body, b"application/json", extra=SAFE)

    async def _surface(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.surface is not None
        try:
            if scope["method"] == "GET":
                query = scope.get("query_string") or b""
                if len(query) > MAX_QUERY:
                    raise RequestError(413, f"the query string is longer than {MAX_QUERY} bytes; POST a JSON body")
                pairs = parse_qsl(query.decode("utf-8", "replace"), keep_blank_values=True)
                params: Any = {}
                for key, value in pairs:
                    if key in params:
                        raise RequestError(400, f"{key[:32]!r} given twice")
                    params[key] = value
            elif scope["method"] == "POST":
                ctype = dict(scope.get("headers") or ()).get(b"content-type", b"").split(b";")[0].strip().lower()
                if ctype != b"application/json":
                    raise RequestError(415, "send the request as application/json")
                body = await _body(receive, MAX_INPUT)
                try:
                    params = orjson.loads(body)
                except orjson.JSONDecodeError as exc:
                    raise RequestError(400, f"malformed JSON: {str(exc)[:120]}") from None
            else:
                await _json(send, 405, _error(405, "GET or POST"), extra=[(b"allow", b"GET, POST")])
                return
            data = await self.surface(params)
        except RequestError as exc:
            return await _json(send, exc.status, _error(exc.status, exc.message))
        except Exception:
            log.exception("admin view %s failed", SURFACE)
            return await _json(send, 500, _error(500, "internal error"))
        await _json(send, 200, data)


async def _body(receive: Receive, limit: int) -> bytes:
    """The request body, refused past ``limit`` bytes (a declared length is checked first)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestError(400, "the client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"the body is longer than {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"status": status, "message": message}}


async def _json(send: Send, status: int, data: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str)
    await _answer(send, status, body, b"application/json", extra=[*SAFE, *(extra or [])])


ICON = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="6" fill="#1b6ef3"/></svg>'
SAFE = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


def _origin_ok(scope: Scope) -> bool:
    """No ``Origin``, or exactly one whose host is a loopback name (the MCP listener's rule, \
http_util.SecurityPolicy)."""
    origins = [value for name, value in scope.get("headers") or () if name == b"origin"]
    if not origins:
        return True
    if len(origins) > 1:
        return False
    scheme, sep, hostport = origins[0].decode("latin-1").partition("://")
    if not sep or scheme not in ("http", "https") or "/" in hostport:
        return False
    return loopback_name(hostport[: hostport.find("]") + 1] if hostport.startswith("[") else hostport.partition(":")[0])


def _host(scope: Scope) -> str:
    for name, value in scope.get("headers") or ():
        if name == b"host":
            host = value.decode("latin-1").lower()
            if host.startswith("["):
                return host[: host.find("]") + 1]
            return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return ""


async def _answer(
    send: Send,
    status: int,
    body: bytes,
    ctype: bytes = b"text/plain; charset=utf-8",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
