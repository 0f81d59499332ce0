"""Transparent mode (draft §5.4): an HTTP intermediary that the client does not know
about. This module is awareness level 1, which never reads a message body, and the
front of level 2 (``transparent_l2.py``), which hands MCP requests to a gateway per
destination.

Interception is the surrounding network's job (see ``config/transparent.py``): a request
reaches hopline addressed to its original destination, named by ``Host`` or by a header
the interception layer sets. hopline looks that destination up in its allow-list,
applies the header-based policy (CEL over ``http``; what a rule may trust is in
``layers/policy/transparent.py``), and streams the request to the real
address and the answer back, byte for byte: bodies are never parsed or re-serialised,
SSE streams and their ``Last-Event-ID`` resumption, ``Mcp-Session-Id``, ``DELETE`` and
the client's own ``Authorization`` (token propagation: passthrough) all pass unchanged.
So the client's initialisation reaches the backend unchanged too: a level 1
intermediary never dual-handshakes. hopline never starts an authentication flow with
the client: it answers only 400 (a repeated routing header, inconsistent 2026-07-28
mirror headers), 421 (a destination it does not serve), 403 (refused by policy), 413 (body too large) and 502/504 (destination unreachable), each with a
JSON-RPC error body whose ``id`` is null, since the request's id is in a body it did not
read. Hop-by-hop headers are not forwarded; nothing else is added or removed. The one
exception to "never reads a body": with ``unknown_method: read_body``, a request whose
method no trustworthy header gives has its (bounded) body's envelope read for the rules,
and is then forwarded byte for byte.

Requests that name no configured destination and ask for ``/.well-known/agent-tool-proxy``
or ``/healthz`` are hopline's own: its declaration (awareness level, TLS disposition,
how the destination must reach it) and its health.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Callable
from typing import Any

import httpx
import orjson

from hopline import runtime
from hopline.binding import MODERN_VERSIONS
from hopline.layers.policy.transparent import HEADER_ERROR, HeaderPolicy, body_method, claimed_method, read_headers, rules_view
from hopline.transports import http_util as hu
from hopline.transports.h1client import LeanClient

log = logging.getLogger("hopline.transparent")

DECLARATION_PATH = "/.well-known/agent-tool-proxy"
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade"})
REFUSED = -32600  # the request as sent cannot be served here; retrying it unchanged fails again
UNREACHABLE = -31001  # hopline's "backend unavailable"


def _error(code: int, message: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


class TransparentProxy:
    """The ASGI app: one instance serves every destination."""

    def __init__(self, config: Any, *, declaration: Callable[[], dict[str, Any]], client: Any = None, aware: Any = None, wait: float = 300.0) -> None:
        self.config = config  # a TransparentConfig
        self.aware = aware  # level 2: the protocol-aware part (transparent_l2.ProtocolAware); None at level 1
        self.policy = HeaderPolicy(config.rules)
        # headers refused when repeated: the routing ones, the ones a rule reads, the one naming the destination (None: any)
        self.strict = self.policy.reads.refused_when_repeated([config.header] if config.destination == "header" else [])
        self.declaration = declaration
        # hopline's own keep-alive HTTP/1.1 client (as on the gateway's hot path): no redirects, no
        # environment proxies; a body may idle for long (SSE), the answer's head may take ``wait``.
        self.timeout = httpx.Timeout(config.connect_timeout, read=None)
        self.wait = wait
        self.client = client or LeanClient(timeout=self.timeout)

    async def aclose(self) -> None:
        if self.aware is not None:
            await self.aware.aclose()
        await self.client.aclose()

    async def __call__(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send) -> None:
        if scope["type"] != "http":
            return
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        c = self.config
        first, repeated = read_headers(raw, self.strict)
        if repeated is not None:  # judged on one copy, forwarded with two: refused before anything else
            await hu.send_json(send, 400, _error(HEADER_ERROR, f"the {repeated.title()} header is repeated; send it once"))
            return
        named = first.get("host") if c.destination == "host" else first.get(c.header)
        target = c.destinations.get(named.strip().lower()) if named else None
        if target is None:
            await self._own(scope, send, named)
            return
        destination = named.strip().lower()  # type: ignore[union-attr]
        method, problem = claimed_method(scope["method"], first)
        if problem is not None:
            await hu.send_json(send, 400, _error(HEADER_ERROR, problem))
            return
        length = first.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > c.max_body):
            await hu.send_json(send, 413, _error(REFUSED, f"request body larger than {c.max_body} bytes"))
            return
        body: bytes | None = None
        if self.policy.programs:  # the rules' view of the request, only when there are rules
            if method is None and self.policy.reads.method:
                if c.unknown_method == "read_body":
                    body = await _read_body(receive, min(c.max_method_body, c.max_body))
                    if body is _GONE:
                        return  # the client left before its request was whole
                    method = body_method(body) if body is not None else None
                    why = "its body is not one JSON-RPC object with one method" if body is not None else "its body is larger than transparent.max_method_body"
                else:
                    method = "" if c.unknown_method == "allow" else None
                    why = "its body is unread and it does not claim MCP-Protocol-Version 2026-07-28"
                if method is None:
                    log.info("refused %s %s for %s: method unknown (unknown_method: %s)", scope["method"], scope["path"], destination, c.unknown_method)
                    message = f"refused by the intermediary's policy: the request's method is not known ({why}; transparent.unknown_method)"
                    await hu.send_json(send, 403, _error(REFUSED, message))
                    return
            http = {
                "method": scope["method"],
                "path": scope["path"],
                "destination": destination,
                "source": (scope.get("client") or ("", 0))[0],
                "headers": rules_view(first, first.get("mcp-protocol-version") in MODERN_VERSIONS),
                "mcp_method": method or "",
            }
            if not self.policy.allows(http):
                log.info("refused %s %s for %s from %s (policy)", scope["method"], scope["path"], destination, http["source"])
                await hu.send_json(send, 403, _error(REFUSED, "refused by the intermediary's policy"))
                return
        if self.aware is not None and not scope["path"].startswith("/.well-known/"):
            await self.aware.serve(scope, receive if body is None else _replay(body, receive), send, destination, target)
            return
        await self._forward(scope, receive, send, target, raw, body)

    async def _own(self, scope: hu.Scope, send: hu.Send, named: str | None) -> None:
        """A request this intermediary serves itself, or refuses: it names no destination it forwards to."""
        if scope["method"] == "GET" and scope["path"] == DECLARATION_PATH:
            await hu.send_json(send, 200, orjson.dumps(self.declaration(), option=orjson.OPT_INDENT_2))
        elif scope["method"] == "GET" and scope["path"] == "/healthz":
            await hu.send_json(send, 200, b'{"status":"ok"}')
        else:
            what = "names no destination" if not named else "is for a destination this intermediary does not forward to"
            await hu.send_json(send, 421, _error(REFUSED, f"misdirected request: it {what}"))

    async def _forward(
        self, scope: hu.Scope, receive: hu.Receive, send: hu.Send, target: str, raw: list[tuple[bytes, bytes]], body: bytes | None = None
    ) -> None:
        c = self.config
        drop = HOP_BY_HOP | {b"host", b"content-length"} | ({c.header.encode()} if c.destination == "header" else frozenset())
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw if k.lower() not in drop]
        host = next((v.decode("latin-1") for k, v in raw if k.lower() == b"host"), None)  # kept as the client sent it
        if body is None:  # not yet read for the rules
            body = await _read_body(receive, c.max_body)
        if body is None:
            await hu.send_json(send, 413, _error(REFUSED, f"request body larger than {c.max_body} bytes"))
            return
        if body is _GONE:
            return  # the client left before its request was whole
        query = scope.get("query_string") or b""
        path = scope.get("raw_path") or scope["path"].encode()
        url = target + path.decode("latin-1") + (("?" + query.decode("latin-1")) if query else "")
        method = scope["method"]
        streaming = self.client.stream(method, url, content=body if body or method not in ("GET", "HEAD", "DELETE") else None, headers=headers, host=host, timeout=self.timeout)
        try:
            async with asyncio.timeout(self.wait):  # the answer's head; its body (an SSE stream) may take as long as it takes
                response = await streaming.__aenter__()
        except (httpx.TimeoutException, TimeoutError) as exc:
            await hu.send_json(send, 504, _error(UNREACHABLE, f"destination unreachable ({type(exc).__name__})"))
            return
        except httpx.HTTPError as exc:  # the URL may hold a secret: the error's type only
            await hu.send_json(send, 502, _error(UNREACHABLE, f"destination unreachable ({type(exc).__name__})"))
            return
        try:
            out = [(k, v) for k, v in response.raw_headers if k.lower() not in HOP_BY_HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            await _stream(response, receive, send)
        finally:
            await streaming.__aexit__(None, None, None)


_GONE = b"\0gone"  # a sentinel no body equals by identity


async def _read_body(receive: hu.Receive, limit: int) -> bytes | None:
    """The whole request body (bounded, never parsed); None if over ``limit``, ``_GONE`` if the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            return _GONE
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not event.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive: hu.Receive) -> hu.Receive:
    """``receive`` for a request whose body was read already (for its method): the body once, then the client's events."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return again


async def _stream(response: Any, receive: hu.Receive, send: hu.Send) -> None:
    """The answer's bytes as they come (an SSE stream may last long), until it ends or the client leaves."""

    async def pump() -> None:
        try:
            async for chunk in response.aiter_bytes():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError as exc:  # the destination broke off mid-answer: end ours the same way
            log.info("destination broke off its answer: %s", type(exc).__name__)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    tasks = [asyncio.ensure_future(pump()), asyncio.ensure_future(gone())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(config: Any) -> int:
    """``hopline serve`` for ``mode: transparent``."""
    from hopline.declaration import declare, for_config

    t = config.transparent
    deployment = for_config(config)

    async def main() -> int:
        aware = None
        if t.level == 2:
            from hopline.modes.transparent_l2 import ProtocolAware

            aware = ProtocolAware(config)
        app = TransparentProxy(t, declaration=lambda: declare(deployment), aware=aware, wait=config.listen.request_timeout)
        listen = config.listen
        if t.tls == "plaintext" and not _loopback(listen.host):
            log.warning("transparent mode on plaintext HTTP at %s: traffic and credentials cross the network unencrypted (fine in development only)", listen.host)

        def ready(host: str, port: int) -> None:
            deployment.endpoints.update(declaration=f"http://{host}:{port}{DECLARATION_PATH}")
            runtime.announce(f"hopline serve: transparent intermediary (level {t.level}) for {len(t.destinations)} destinations at http://{host}:{port} (Streamable HTTP)")

        from hopline.transports.door_limits import DoorLimits

        limits = DoorLimits(**listen.limits.model_dump())
        await runtime.serve_http(app, host=listen.host, port=listen.port, on_ready=ready, on_shutdown=app.aclose, limits=limits)
        return 0

    return runtime.run(main())
