"""The ASGI root: guards every request, then routes by path.

Paths: the MCP endpoint (``/mcp`` by default, Streamable HTTP, both eras), the
legacy HTTP+SSE pair (``/sse`` + ``/messages``), the conformance declaration at
``/.well-known/agent-tool-proxy`` (draft §4.2), and ``/healthz``.

Duplicated singleton headers are refused with 400 and a bad Origin/Host with 403
before anything else runs; an unknown path is a plain 404.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import orjson

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
    ) -> None:
        self.mcp = mcp
        self.sse = sse
        self.security = security
        self.declaration = declaration
        self.mcp_path = mcp_path.rstrip("/") or "/"
        self.sse_path = sse_path
        self.messages_path = sse.messages_path if sse else None

    async def __call__(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send) -> None:
        if scope["type"] != "http":
            return
        headers = await hu.guard(scope, send, self.security)
        if headers is None:
            return
        path = scope["path"]
        if path == self.mcp_path or path == self.mcp_path + "/":
            await self.mcp(scope, receive, send, headers)
        elif self.sse is not None and path == self.sse_path:
            await self.sse.stream(scope, receive, send, headers)
        elif self.sse is not None and path == self.messages_path:
            await self.sse.post(scope, receive, send, headers)
        elif path == DECLARATION_PATH and scope["method"] == "GET":
            await hu.send_json(send, 200, orjson.dumps(self.declaration(), option=orjson.OPT_INDENT_2))
        elif path == "/healthz":
            await hu.send_json(send, 200, b'{"status":"ok"}')
        else:
            await hu.send_bytes(send, 404, b"Not Found", b"text/plain")
