"""Transparent mode at awareness level 2 (draft §5.4): protocol-aware, every layer.

Each original destination (and MCP endpoint path on it) gets a Reverse-mode gateway of
its own, built from this file's ``policy``, ``resilience``, ``observability``, ``tools``
and ``routing`` sections, whose one backend is the destination's real address. The
connection is dual-handshaken: the client's session is with hopline, which presents the
destination's own identity, capabilities and unprefixed names (Reverse mode), and keeps
one backend session per client; every message then runs the whole pipeline (policy
that filters lists and guards invokes, breakers and timeouts, hop metadata and trace
context, tool modes). That is the disposition for every connection at level 2, and the
declaration says so.

Credentials: hopline authenticates nobody and never starts an authentication flow. The
client's own ``Authorization`` header goes to the destination unchanged (passthrough);
callers are told apart by a digest of it (an unverified identity: policy rules see no
``jwt`` claims), so no caller's session or credential ever carries another's requests.
A destination that refuses the credential (HTTP 401) is answered as unavailable: its
OAuth discovery cannot happen through a level 2 connection, so a destination whose
clients must first discover its authorization server belongs at level 1.

Only the configured MCP endpoint paths (``transparent.paths``, default ``/mcp``) are
served, each by its gateway; requests under ``/.well-known/`` (RFC 9728 metadata, a
member's declaration…) are streamed through unread, as at level 1; any other path is
refused, so no request reaches a destination around the pipeline.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

import httpx

from hopline.binding import Era
from hopline.compose.listen import session_table
from hopline.config.schema import GatewayConfig
from hopline.context import ANONYMOUS, Principal
from hopline.transports import http_util as hu
from hopline.transports.streamable_http_server import (
    ListenerOptions,
    StreamableHttpListener,
)

log = logging.getLogger("hopline.transparent")

UNVERIFIED = "transparent:unverified"


class _ClientHeader(httpx.Auth):
    """The client's own ``Authorization`` value on every request to the destination."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal  # replaced when the same caller comes back with a newer header

    def auth_flow(self, request: httpx.Request) -> Any:
        if self.principal.token:
            request.headers["authorization"] = self.principal.token
        yield request


class ClientCredentials:
    """Token propagation for a transparent intermediary: passthrough of whatever the
    client sent (nothing, if it sent nothing), per caller."""

    def per_principal(self, backend_id: str) -> bool:
        return True

    def auth_for(self, backend_id: str, principal: Principal | None = None) -> httpx.Auth | None:
        return _ClientHeader(principal) if principal is not None and principal.token else None

    def pattern(self) -> str:
        return "passthrough"

    async def aclose(self) -> None:
        return None


def caller(headers: hu.Headers) -> Principal:
    """An unverified identity: the digest of the client's Authorization header, or anonymous."""
    value = headers.get(b"authorization")
    if not value:
        return ANONYMOUS
    digest = hashlib.sha256(value.encode("latin-1")).hexdigest()[:24]
    return Principal(f"credential:{digest}", issuer=UNVERIFIED, token=value)


def backend_id(destination: str) -> str:
    """A backend id for a destination (``tools.internal:8080`` → ``tools-internal-8080``)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", destination).strip("-")[:48] or "destination"


class Endpoint:
    """One (destination, path): its gateway and the Streamable HTTP listener in front of it."""

    def __init__(self, config: GatewayConfig, destination: str, url: str, options: ListenerOptions) -> None:
        from hopline.compose.gateway import Gateway

        data = config.model_dump(mode="python", include={"name", "routing", "policy", "resilience", "observability", "tools"}, exclude_unset=True)
        bid = backend_id(destination)
        data.update(mode="reverse", reload_interval=0, backends={bid: {"url": url, "transport": "streamable-http"}})
        self.gateway = Gateway(GatewayConfig.model_validate(data), propagation=ClientCredentials())
        hops = self.gateway.observability.hops
        if hops is not None:
            hops.mode = "transparent"  # what this hop is, whatever composition it runs
        listen = config.listen
        self.sessions = session_table(listen)
        self.listener = StreamableHttpListener(self, self.sessions, options)

    async def open_session(self, era: Era) -> Any:
        return await self.gateway.open_session(era)

    async def open_exchange(self, era: Era) -> Any:
        return await self.gateway.open_exchange(era)

    async def aclose(self) -> None:
        await self.sessions.close_all()
        await self.gateway.aclose()


class ProtocolAware:
    """The level 2 part of the transparent app: a gateway per (destination, path)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        t = config.transparent
        assert t is not None
        self.options = ListenerOptions(max_body=t.max_body, request_timeout=config.listen.request_timeout)
        self.security = hu.SecurityPolicy(check_host=False)  # the Host names the destination, by design
        self.paths = frozenset(t.paths)
        self.endpoints: dict[tuple[str, str], Endpoint] = {}

    async def serve(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send, destination: str, target: str) -> None:
        headers = await hu.guard(scope, send, self.security)
        if headers is None:
            return
        path = scope["path"].rstrip("/") or "/"
        if path not in self.paths:  # only MCP endpoints, each with its pipeline: no way around the policy
            await hu.send_json(send, 404, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not an MCP endpoint of this destination"}}')
            return
        key = (destination, path)
        endpoint = self.endpoints.get(key)
        if endpoint is None:  # at most destinations x paths, all configured
            endpoint = self.endpoints[key] = Endpoint(self.config, destination, target + path, self.options)
            log.info("level 2: serving %s%s through a gateway of its own", destination, path)
        await endpoint.listener(scope, receive, send, headers, caller(headers))

    async def aclose(self) -> None:
        for endpoint in list(self.endpoints.values()):
            await endpoint.aclose()
        self.endpoints.clear()
