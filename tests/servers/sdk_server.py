"""A backend built on the official MCP SDK (mcp 2.3.0), for interop and fault tests.

Usage::

    python sdk_server.py stdio
    python sdk_server.py http --port P [--stateless] [--json] [--tls-cert PEM --tls-key PEM --allow-host H:P]

``http`` serves Streamable HTTP at ``http://127.0.0.1:P/mcp`` with uvicorn.
``--stateless`` sets ``stateless_http=True`` (no ``Mcp-Session-Id`` on the
legacy path; the 2026-07-28 path is always stateless); ``--json`` sets
``json_response=True`` (JSON instead of SSE where the SDK allows it). On both
transports the SDK serves both eras: stdio locks the era on the first request,
HTTP routes on the ``MCP-Protocol-Version`` header.

Tools: ``echo(text)``, ``add(a, b)`` (structured result ``{"result": a+b}``),
``slow(ms)`` (sleeps), ``progress(steps)`` (``ctx.report_progress`` per step),
``sample(prompt)``, ``elicit(message)``, ``roots()``, ``whoami()``, and the
legacy-only ``sample_direct(prompt)`` / ``elicit_direct(message)``.
Resource ``test://info``; prompt ``review(code)``.

How the client-side features travel, checked with the SDK client
(``Client(target, mode=...)`` with sampling/elicitation/roots callbacks; the
stdio cases and default-HTTP cases are asserted by tests/test_demo_server.py):

- ``sample`` / ``elicit`` / ``roots``, legacy era: real server→client requests
  (``sampling/createMessage``, ``elicitation/create``, ``roots/list``) sent
  mid-call. They work on stdio and on HTTP with stateful SSE (the default). With
  ``--stateless`` or ``--json`` they FAIL with JSON-RPC -32600 "no back-channel
  for server-initiated requests".
- ``sample`` / ``elicit`` / ``roots``, 2026-07-28 era (``mode="2026-07-28"`` or
  ``"auto"``): the call first returns an ``InputRequiredResult`` (MRTR:
  ``resultType: "input_required"``, ``inputRequests`` keyed by resolver, e.g.
  ``"__main__:_ask_llm"``, plus an opaque ``requestState``); the SDK client runs
  its callback and retries on its own. Works on stdio and every HTTP flavour.
- ``sample_direct`` / ``elicit_direct``: in the legacy era, as the first item
  (same transports); in the 2026-07-28 era they FAIL everywhere with JSON-RPC -32600 "no
  back-channel" (a modern request has no channel for server→client requests).
- ``progress``: ``notifications/progress`` in both eras on stdio and SSE; with
  ``--json`` none are delivered (a plain JSON response), the call still succeeds.

``sample``, ``elicit`` and ``roots`` use the SDK's ``Resolve(...)`` resolvers
(``Sample``, ``Elicit``, ``ListRoots``), which pick the transport by the
negotiated version. The ``Context`` API offers ``elicit`` and
``report_progress`` but no sampling helper: sampling goes through ``Sample`` or
``ctx.session.create_message`` (what ``sample_direct`` uses). A client that did
not declare the capability gets -32021 from a resolver, in both eras.
"""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Annotated, Any

import anyio
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

# Sampling and roots are deprecated in 2026-07-28 (SEP-2577) but still work; keep stderr quiet.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

mcp = MCPServer("sdk-test-server", version="1.0.0", instructions="An official-SDK backend for hopline's tests.")


class Answer(BaseModel):
    answer: str


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@mcp.tool()
async def slow(ms: int) -> str:
    """Sleep for `ms` milliseconds, then answer."""
    await anyio.sleep(ms / 1000)
    return f"slept {ms} ms"


@mcp.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report progress `steps` times."""
    for done in range(1, steps + 1):
        await anyio.sleep(0.01)
        await ctx.report_progress(done, steps, f"step {done}/{steps}")
    return f"done after {steps} steps"


def _ask_llm(prompt: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=prompt))], max_tokens=64)


def _ask_user(message: str) -> Elicit[Answer]:
    return Elicit(message, Answer)


def _ask_roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
async def sample(prompt: str, reply: Annotated[CreateMessageResult, Resolve(_ask_llm)]) -> str:
    """Ask the client's LLM (sampling/createMessage) and return its text."""
    content = reply.content
    return f"{reply.model}: {content.text if isinstance(content, TextContent) else content}"


@mcp.tool()
async def elicit(message: str, outcome: Annotated[ElicitationResult[Answer], Resolve(_ask_user)]) -> str:
    """Ask the user (elicitation/create, form mode) for {"answer": str}."""
    if isinstance(outcome, AcceptedElicitation):
        return f"accepted: {outcome.data.answer}"
    return outcome.action


@mcp.tool()
async def roots(listing: Annotated[ListRootsResult, Resolve(_ask_roots)]) -> str:
    """List the client's roots (roots/list) as a JSON array of URIs."""
    return json.dumps([str(root.uri) for root in listing.roots])


@mcp.tool()
async def sample_direct(prompt: str, ctx: Context) -> str:
    """Sampling through ctx.session.create_message: handshake era only."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    reply = await ctx.session.create_message([message], max_tokens=64, related_request_id=ctx.request_id)
    content = reply.content
    return f"{reply.model}: {content.text if isinstance(content, TextContent) else content}"


@mcp.tool()
async def elicit_direct(message: str, ctx: Context) -> str:
    """Elicitation through ctx.elicit: handshake era only."""
    outcome = await ctx.elicit(message, Answer)
    return f"accepted: {outcome.data.answer}" if isinstance(outcome, AcceptedElicitation) else outcome.action


@mcp.tool()
async def progress_elicit(steps: int, ctx: Context) -> str:
    """Report progress `steps` times, ask the user (elicitation/create, handshake era), then
    report `steps` more: a long-running call that needs input halfway."""
    for done in range(1, steps + 1):
        await ctx.report_progress(done, 2 * steps, f"before {done}")
    outcome = await ctx.elicit("go on?", Answer)
    for done in range(steps + 1, 2 * steps + 1):
        await ctx.report_progress(done, 2 * steps, f"after {done}")
    return f"accepted: {outcome.data.answer}" if isinstance(outcome, AcceptedElicitation) else outcome.action


@mcp.tool()
async def whoami(ctx: Context) -> dict[str, Any]:
    """The protocol version and client identity this request arrived with."""
    params = ctx.session.client_params
    caps = ctx.client_capabilities
    return {
        "protocolVersion": ctx.protocol_version,
        "clientInfo": params.client_info.model_dump(mode="json", exclude_none=True) if params else None,
        "clientCapabilities": caps.model_dump(mode="json", by_alias=True, exclude_none=True) if caps else None,
    }


@mcp.tool()
async def meta(ctx: Context) -> str:
    """The raw params._meta this request arrived with, as JSON text (for pass-through tests)."""
    params = ctx.request_context.params or {}
    return json.dumps(params.get("_meta") or {})


@mcp.tool()
async def log(message: str, ctx: Context) -> str:
    """Send ``message`` as a notifications/message at level info, then answer."""
    await ctx.info(message)
    return "logged"


@mcp.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announce that resource ``uri`` changed (to subscriptions/listen streams)."""
    await ctx.notify_resource_updated(uri)
    return "touched"


@mcp.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` (it echoes its text) and announce the tools list changed."""

    def grown(text: str) -> str:
        return text

    mcp.add_tool(grown, name=name, description="a tool added at run time")
    await ctx.notify_tools_changed()
    return "grown"


@mcp.resource("test://info", mime_type="text/plain")
def info() -> str:
    """A fixed text resource."""
    return "sdk-test-server info"


@mcp.prompt()
def review(code: str) -> str:
    """Ask for a code review."""
    return f"Please review this code:\n\n{code}"


def _handshake_only(app):
    """An ASGI wrapper answering 2026-07-28 requests as a server that predates that era
    (HTTP 400, a JSON-RPC error naming the versions it supports)."""
    import json as _json

    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            version = dict(scope["headers"]).get(b"mcp-protocol-version", b"")
            if version.startswith(b"2026"):
                body = _json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "Unsupported protocol version", "data": {"supported": ["2025-11-25"]}}}).encode()
                await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return wrapped


def _with_sse(streamable, sse):
    """/sse and /messages/ to the SDK's legacy SSE app, the rest (and the lifespan) to Streamable HTTP."""

    async def both(scope, receive, send):
        if scope["type"] == "http" and (scope["path"] == "/sse" or scope["path"].startswith("/messages")):
            return await sse(scope, receive, send)
        return await streamable(scope, receive, send)

    return both


def _protected(app, token: str, port: int):
    """An OAuth-protected resource (MCP authorization, RFC 9728): /mcp needs the bearer token;
    its metadata is at /.well-known/oauth-protected-resource/mcp."""
    import json as _json

    metadata = _json.dumps({"resource": f"http://127.0.0.1:{port}/mcp", "authorization_servers": ["https://as.test"], "scopes_supported": ["tools"]}).encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            if scope["path"] == "/.well-known/oauth-protected-resource/mcp":
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": metadata})
                return
            if dict(scope["headers"]).get(b"authorization") != f"Bearer {token}".encode():
                challenge = f'Bearer resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp", scope="tools", error="invalid_token"'
                body = b'{"error":"invalid_token","error_description":"a bearer token from https://as.test is required"}'
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json"), (b"www-authenticate", challenge.encode()), (b"x-destination", b"its own")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="official-SDK MCP backend for hopline tests")
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio", help="serve on stdin/stdout")
    http = sub.add_parser("http", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    http.add_argument("--port", type=int, required=True, help="0: a free port, announced on stderr once it listens")
    http.add_argument("--stateless", action="store_true", help="stateless_http=True (no legacy sessions)")
    http.add_argument("--json", action="store_true", help="json_response=True (JSON instead of SSE)")
    http.add_argument("--handshake-only", action="store_true", help="refuse the 2026-07-28 era (as servers before it do): 400 for its requests")
    http.add_argument("--require-token", help="an OAuth-protected resource: 401 with WWW-Authenticate (RFC 9728 resource_metadata) unless `Authorization: Bearer TOKEN`")
    http.add_argument("--sse", action="store_true", help="also serve legacy HTTP+SSE (2024-11-05) at /sse and /messages/")
    http.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    http.add_argument("--tls-key", help="... and this key (PEM)")
    http.add_argument("--allow-host", action="append", default=[], help="a Host value the SDK's DNS-rebinding protection accepts, besides 127.0.0.1 and localhost")
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        mcp.run("stdio")
        return 0
    security = None
    if args.allow_host:
        from mcp.server.transport_security import TransportSecuritySettings

        allowed = ["127.0.0.1:*", "localhost:*", "[::1]:*", *args.allow_host]
        security = TransportSecuritySettings(allowed_hosts=allowed, allowed_origins=[f"http://{h}" for h in allowed] + [f"https://{h}" for h in allowed])
    app = mcp.streamable_http_app(stateless_http=args.stateless, json_response=args.json, transport_security=security)
    if args.handshake_only:
        app = _handshake_only(app)
    if args.sse:
        app = _with_sse(app, mcp.sse_app(transport_security=security))
    from serving import bind, port_of, serve

    sock = bind(args.port)
    port = port_of(sock)
    if args.require_token:
        app = _protected(app, args.require_token, port)
    scheme = "https" if args.tls_cert else "http"
    serve(app, sock, f"sdk_server: {scheme}://127.0.0.1:{port}/mcp", ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
