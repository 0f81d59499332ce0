"""The ASGI root: guards every request, then routes by path.

Paths: the MCP endpoint (``/mcp`` by default, Streamable HTTP, both eras), more
MCP endpoints if configured (``tools.endpoints``: the same gateway with other tool
modes, each with sessions of its own), the legacy HTTP+SSE pair (``/sse`` + ``/messages``), the conformance \
declaration at
``/.well-known/agent-tool-proxy`` (draft §4.2), and ``/healthz``.

Duplicated singleton headers are refused with 400 and a bad Origin/Host with 403
before anything else runs; an unknown path is a plain 404.

With an authenticator (``auth`` configured), every request to an MCP path (``/mcp``,
``/sse``, ``/messages``, any method) is authenticated first and refused with its 401,
403 or 431 before a listener sees it; the listener gets the caller's principal, puts it
on each message and binds sessions to it. The RFC 9728 protected resource metadata is
served, unauthenticated, at ``/.well-known/oauth-protected-resource`` and its
path-suffixed forms (mcp-wire §7). With ``auth.signin``, hopline's own authorization server answers its
paths (``/.well-known/oauth-authorization-server``, ``/oauth/*``; hopline/signin/app.py), unauthenticated.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import orjson

from hopline.context import Authenticator, Principal
from hopline.jsonrpc import HoplineError
from hopline.transports import http_util as hu
from hopline.transports.sse_server import SseListener
from hopline.transports.streamable_http_server import StreamableHttpListener

log = logging.getLogger("hopline.http")

DECLARATION_PATH = "/.well-known/agent-tool-proxy"


class HoplineApp:
    def __init__(
        self,
        mcp: StreamableHttpListener,
        *,
        security: hu.SecurityPolicy,
        declaration: Callable[[], dict[str, Any]],
        sse: SseListener | None = None,
        mcp_path: str = "/mcp",
        sse_path: str = "/sse",
        auth: Authenticator | None = None,
        endpoints: dict[str, StreamableHttpListener] | None = None,
    ) -> None:
        self.mcp = mcp
        self.sse = sse
        self.security = security
        self.declaration = declaration
        self.mcp_path = mcp_path.rstrip("/") or "/"
        self.endpoints = {path.rstrip("/"): listener for path, listener in (endpoints or {}).items()}
        self.sse_path = sse_path
        self.messages_path = sse.messages_path if sse else None
        self.auth = auth
        self.metadata_paths = auth.metadata_paths(self.mcp_path, sse_path, *self.endpoints) if auth else frozenset()
        self.signin = getattr(auth, "signin", None)  # hopline's own authorization server (auth.signin), if any

    async def __call__(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send) -> None:
        if scope["type"] != "http":
            return
        # >> inlined copy of http_util.guard (one coroutine fewer per request); test_inlined_equivalence.py
        try:
            headers = hu.Headers(scope["headers"])
            self.security.check(headers)
        except HoplineError as exc:
            await hu.send_error(send, exc)
            return
        # << end of the copy of http_util.guard
        path = scope["path"]
        if path == self.mcp_path or path == self.mcp_path + "/":
            if self.auth is None:  # nobody to authenticate: the listener at once (one coroutine fewer per request)
                await self.mcp(scope, receive, send, headers, None)
            else:
                await self._guarded(self.mcp, scope, receive, send, headers)
        elif self.endpoints and (path.rstrip("/") or "/") in self.endpoints:
            await self._guarded(self.endpoints[path.rstrip("/")], scope, receive, send, headers)
        elif self.sse is not None and path == self.sse_path:
            await self._guarded(self.sse.stream, scope, receive, send, headers)
        elif self.sse is not None and path == self.messages_path:
            await self._guarded(self.sse.post, scope, receive, send, headers)
        elif path in self.metadata_paths and scope["method"] == "GET" and self.auth is not None:
            await hu.send_json(send, 200, orjson.dumps(self.auth.metadata()), {"cache-control": "max-age=3600"})
        elif self.signin is not None and path in self.signin.paths:
            await self.signin(scope, receive, send, headers)
        elif path == DECLARATION_PATH and scope["method"] == "GET":
            await hu.send_json(send, 200, orjson.dumps(self.declaration(), option=orjson.OPT_INDENT_2))
        elif path == "/healthz":
            await hu.send_json(send, 200, b'{"status":"ok"}')
        else:
            await hu.send_bytes(send, 404, b"Not Found", b"text/plain")

    async def _guarded(
        self,
        handler: Callable[..., Awaitable[None]],
        scope: hu.Scope,
        receive: hu.Receive,
        send: hu.Send,
        headers: hu.Headers,
    ) -> None:
        """Run an MCP endpoint's handler for an authenticated caller (None: no auth configured)."""
        principal: Principal | None = None
        if self.auth is not None:
            decision = await self.auth.check(headers, scope.get("query_string", b""))
            if not isinstance(decision, Principal):
                log.info("refused %s %s: %d %s", scope["method"], scope["path"], decision.status, decision.description)
                await hu.send_json(send, decision.status, decision.body(), decision.headers(self.auth.metadata_url))
                return
            principal = decision
        await handler(scope, receive, send, headers, principal)
