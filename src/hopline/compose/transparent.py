"""Transparent mode from configuration: what each level's parts are handed.

Level 1: :func:`settings` (the proxy's share of the ``transparent`` section) and
:class:`Rules` (the header policy, ``layers/policy/transparent.py``, as the proxy asks it:
:class:`~hopline.transports.transparent.HeaderRules`).

TLS (draft §5.4.4): :func:`minter` (``tls: terminate``: the certificates presented),
:func:`addresses` (what a client without SNI gets a certificate for,
with ``tls: terminate``), :func:`passthrough` (``tls: passthrough``: the TCP listener that
forwards each allowed connection's encrypted stream unread), :func:`warn_plaintext` (the
draft's warning for plaintext outside development).

Level 2 (draft §5.4, protocol-aware, every layer): :func:`endpoints`. Each original
destination (and MCP endpoint path on it) gets a Reverse-mode gateway of its own, built
from the file's ``policy``, ``resilience``, ``observability``, ``tools`` and ``routing``
sections, whose one backend is the destination's real address. The connection is
dual-handshaken: the client's session is with hopline, which presents the destination's
own identity, capabilities and unprefixed names (Reverse mode), and keeps one backend
session per client; every message then runs the whole pipeline (policy that filters
lists and guards invokes, breakers and timeouts, hop metadata and trace context, tool
modes). That is the disposition for every connection at level 2 but those to the
destinations in ``single_handshake``, carried at level 1 (draft §7.1: per connection,
tracked, and declared).

Credentials: hopline authenticates nobody and never starts an authentication flow. The
client's own ``Authorization`` header goes to the destination unchanged (passthrough);
callers are told apart by a digest of it (an unverified identity: policy rules see no
``jwt`` claims), so no caller's session or credential ever carries another's requests.
A destination that refuses the credential (HTTP 401) has its challenge relayed: the
client's request during which hopline's own request met it is answered with the
destination's 401 unchanged (``WWW-Authenticate``, body), and ``/.well-known/`` (its RFC
9728 metadata) is streamed unread, so the client runs OAuth against the destination as
without hopline, and comes back with its token (a new caller, a new backend session).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import re
from collections.abc import Callable
from typing import Any

import httpx

from hopline.binding import MODERN_VERSIONS, Era
from hopline.config.schema import GatewayConfig, ListenConfig
from hopline.config.transparent import TransparentConfig
from hopline.context import ANONYMOUS, Principal
from hopline.layers.policy.transparent import (
    HEADER_ERROR,
    HeaderPolicy,
    body_method,
    claimed_method,
    read_headers,
    rules_view,
)
from hopline.transports import http_util as hu
from hopline.transports.sse_server import SseListener
from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener
from hopline.transports.transparent import Challenges, Endpoints, ProxySettings

UNVERIFIED = "transparent:unverified"
log = logging.getLogger("hopline.transparent")


def settings(t: TransparentConfig) -> ProxySettings:
    return ProxySettings(
        destinations=t.destinations,
        destination=t.destination,
        header=t.header,
        unknown_method=t.unknown_method,
        max_body=t.max_body,
        max_method_body=t.max_method_body,
        connect_timeout=t.connect_timeout,
        check_host=t.check_host,
        terminates=t.tls == "terminate",
        single_handshake=frozenset(t.single_handshake),
    )


class Rules:
    """The header policy (``transparent.rules``) as the level 1 proxy asks it."""

    error = HEADER_ERROR

    def __init__(self, t: TransparentConfig) -> None:
        self.policy = HeaderPolicy(t.rules)
        self.judges = bool(self.policy.programs)
        self.reads_method = self.policy.reads.method
        # headers refused when repeated: the routing ones, the ones a rule reads, the one naming the
        # destination (None: any)
        self.strict = self.policy.reads.refused_when_repeated([t.header] if t.destination == "header" else [])

    def read(self, raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None]:
        return read_headers(raw, self.strict)

    def claimed(self, method: str, headers: dict[str, str]) -> tuple[str | None, str | None]:
        return claimed_method(method, headers)

    def body_method(self, body: bytes) -> str | None:
        return body_method(body)

    def allows(self, http: dict[str, Any]) -> bool:
        headers = http["headers"]  # shown to the rules without the mirror headers when nobody validates them
        return self.policy.allows(
            {**http, "headers": rules_view(headers, headers.get("mcp-protocol-version") in MODERN_VERSIONS)}
        )


class _ClientHeader(httpx.Auth):
    """The client's own ``Authorization`` value on every request to the destination; a 401
    it meets is recorded in ``challenges`` (relayed to the client, never answered)."""

    requires_response_body = True  # a 401's body is relayed with it

    def __init__(self, principal: Principal, challenges: Challenges | None = None) -> None:
        self.principal = principal  # replaced when the same caller comes back with a newer header
        self.challenges = challenges

    def auth_flow(self, request: httpx.Request) -> Any:
        if self.principal.token:
            request.headers["authorization"] = self.principal.token
        response = yield request
        if response.status_code == 401 and self.challenges is not None:
            self.challenges.record(self.principal.key, list(response.headers.raw), response.content)


class ClientCredentials:
    """Token propagation for a transparent intermediary: passthrough of whatever the
    client sent (nothing, if it sent nothing), per caller; the destination's challenges
    are collected for the client (``challenges``)."""

    def __init__(self) -> None:
        self.challenges = Challenges()

    def per_principal(self, backend_id: str) -> bool:
        return True

    def auth_for(self, backend_id: str, principal: Principal | None = None) -> httpx.Auth | None:
        return _ClientHeader(principal or ANONYMOUS, self.challenges)

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


def endpoint_config(config: GatewayConfig, destination: str, url: str, sse: bool = False) -> GatewayConfig:
    """A Reverse-mode gateway's configuration for one (destination, path): its one backend is
    ``url`` (a legacy SSE endpoint with ``sse``)."""
    data = config.model_dump(
        mode="python", include={"name", "routing", "policy", "resilience", "observability", "tools"}, exclude_unset=True
    )
    data.update(
        mode="reverse",
        reload_interval=0,
        backends={backend_id(destination): {"url": url, "transport": "sse" if sse else "streamable-http"}},
    )
    return GatewayConfig.model_validate(data)


class Endpoint:
    """One (destination, path): its gateway and the Streamable HTTP listener in front of it."""

    def __init__(
        self, gateway: Any, sessions: Any, options: ListenerOptions, challenges: Any = None, sse: bool = False
    ) -> None:
        self.gateway = gateway
        self.challenges = challenges
        hops = self.gateway.observability.hops
        if hops is not None:
            hops.mode = "transparent"  # what this hop is, whatever composition it runs
        self.sessions = sessions
        self.listener = StreamableHttpListener(self, self.sessions, options)
        self.sse = SseListener(self, self.sessions, max_body=options.max_body) if sse else None

    async def open_session(self, era: Era) -> Any:
        return await self.gateway.open_session(era)

    async def open_exchange(self, era: Era) -> Any:
        return await self.gateway.open_exchange(era)

    async def aclose(self) -> None:
        await self.sessions.close_all()
        await self.gateway.aclose()


def endpoints(
    config: GatewayConfig, gateway: Callable[..., Any], session_table: Callable[[ListenConfig], Any]
) -> Endpoints:
    """Level 2: a ``gateway(config, propagation=...)`` per (destination, path), each with a
    ``session_table(listen)``."""
    t = config.transparent
    assert t is not None
    options = ListenerOptions(max_body=t.max_body, request_timeout=config.listen.request_timeout)

    def make(destination: str, url: str, sse: bool) -> Endpoint:
        credentials = ClientCredentials()
        return Endpoint(
            gateway(endpoint_config(config, destination, url, sse), propagation=credentials),
            session_table(config.listen),
            options,
            credentials.challenges,
            sse,
        )

    return Endpoints(t.paths, make, caller, t.sse_path)


def minter(t: TransparentConfig) -> Any:
    """``tls: terminate``: the certificate minter from the operator CA, or the configured
    certificate (CAError if it is not usable)."""
    from hopline.transports.transparent_tls import Certificate, Minter

    if t.certificate is not None:
        return Certificate(t.certificate.cert, t.certificate.key)
    assert t.ca is not None
    return Minter(t.ca.cert, t.ca.key, addresses=addresses(t.destinations))


def addresses(destinations: dict[str, str]) -> list[str]:
    """The IP addresses among the destinations' names (what a client without SNI gets a certificate for)."""
    out = []
    for name in destinations:
        host = name.rpartition(":")[0] if name.count(":") == 1 or name.startswith("[") else name
        try:
            out.append(ipaddress.ip_address(host.strip("[]")).compressed)
        except ValueError:
            continue
    return out


def warn_plaintext(config: Any, loopback: Callable[[str], bool]) -> None:
    """The draft's warning (§5.4.4) for plaintext outside development: hopline's listener, or a
    destination, off this machine."""
    t = config.transparent
    if t.tls != "plaintext":
        return
    listen = config.listen
    remote = [url for url in t.destinations.values() if url.startswith("http://") and not loopback(_host(url))]
    if not loopback(listen.host) or remote:
        where = listen.host if not loopback(listen.host) else "destinations off this machine"
        log.warning(
            "transparent mode on plaintext HTTP (%s): traffic and credentials cross the network unencrypted "
            "(fine in development only; tls: terminate or passthrough otherwise)",
            where,
        )


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or ""


async def passthrough(config: Any, runtime: Any) -> int:
    """``tls: passthrough``: a TCP listener that splices each allowed connection's encrypted bytes, unread."""
    from hopline.transports.transparent import Names
    from hopline.transports.transparent_tls import Passthrough

    t = config.transparent
    listen = config.listen
    names = Names()

    async def agree(sni: str, destination: str) -> bool:
        return await names.agree(f"{sni}:{destination.rpartition(':')[2]}", destination)

    handler = Passthrough(
        t.destinations,
        agree if t.check_host else None,
        connect_timeout=t.connect_timeout,
        hello_timeout=listen.limits.header_timeout,
        max_connections=listen.limits.max_connections,
        allows=HeaderPolicy(t.rules).allows if t.rules else None,  # over connection metadata only (config checks)
    )

    def ready(host: str, port: int) -> None:
        runtime.announce(
            f"hopline serve: transparent intermediary (level 1, TLS passthrough) for {len(t.destinations)} "
            f"destinations at tcp://{host}:{port} (TLS passthrough)"
        )

    await runtime.serve_tcp(handler, host=listen.host, port=listen.port, on_ready=ready, on_shutdown=handler.aclose)
    return 0
