"""Transparent mode's HTTP intermediary (draft §5.4), Layer 1: a proxy the client does
not know about, which streams each request to its original destination and the answer
back, byte for byte.

A request reaches hopline addressed to its original destination, named by ``Host``, by
a header the interception layer sets, or by the socket itself (``destination: socket``:
the address the client dialled before an iptables REDIRECT, ``transports/interception.py``;
its ``Host``, and its SNI where hopline terminated TLS, must then name that address:
:class:`Names`, else 421) (:class:`ProxySettings`); the proxy looks it up in
the allow-list, asks the header rules it was handed (:class:`HeaderRules`, Layer 5 at
awareness level 1: ``compose/transparent.py`` supplies them) and streams: bodies are
never parsed or re-serialised, SSE streams and their ``Last-Event-ID`` resumption,
``Mcp-Session-Id``, ``DELETE`` and the client's own ``Authorization`` all pass
unchanged, so the client's initialisation reaches the backend unchanged too (level 1
never dual-handshakes). It never starts an authentication flow with the client: it
answers only 400 (a repeated routing header, inconsistent 2026-07-28 mirror headers),
421 (a destination it does not serve), 403 (refused by the rules), 413 (body too large)
and 502/504 (destination unreachable), each with a JSON-RPC error body whose ``id`` is
null, since the request's id is in a body it did not read. Hop-by-hop headers are not
forwarded; nothing else is added or removed. The one exception to "never reads a body":
with ``unknown_method: read_body``, a request whose method no trustworthy header gives
has its (bounded) body's envelope read for the rules, and is then forwarded byte for byte.

Requests that name no configured destination and ask for ``/.well-known/agent-tool-proxy``
or ``/healthz`` are hopline's own: its declaration and its health.

At level 2 the proxy hands each admitted request (but those under ``/.well-known/``,
streamed unread) to :class:`Endpoints`: the MCP endpoint paths of each destination (and
its legacy HTTP+SSE pair), each served by an endpoint of its own (a listener in front of
a gateway, built by the composition); any other path is refused, so no request reaches a
destination around the pipeline. A destination's 401 challenge, met by the gateway's own
request, answers the client's request unchanged (:class:`Challenges`). Connections to the
destinations in ``single_handshake`` are carried at level 1 instead; each connection's
disposition is tracked (:class:`Dispositions`, draft §7.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import orjson

from hopline.context import Principal
from hopline.transports import http_util as hu
from hopline.transports.h1client import LeanClient
from hopline.transports.interception import ORIGINAL_DESTINATION, SNI

log = logging.getLogger("hopline.transparent")

DECLARATION_PATH = "/.well-known/agent-tool-proxy"
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
REFUSED = -32600  # the request as sent cannot be served here; retrying it unchanged fails again
UNREACHABLE = -31001  # hopline's "backend unavailable"


@dataclass(frozen=True)
class ProxySettings:
    """What the proxy is handed of the ``transparent`` section."""

    destinations: dict[str, str]  # original destination (lower-case host[:port]) -> real base URL
    destination: str  # where the destination is named: "host", "header" or "socket" (SO_ORIGINAL_DST)
    header: str  # with destination "header": that header's (lower-case) name
    unknown_method: str  # "refuse", "read_body" or "allow"
    max_body: int
    max_method_body: int
    connect_timeout: float
    check_host: bool = True  # with "socket": the Host must name the original destination
    terminates: bool = False  # hopline terminates the clients' TLS: the Host must name what their SNI did
    single_handshake: frozenset[str] = frozenset()  # level 2: destinations carried at level 1 (draft §7.1)


class HeaderRules(Protocol):
    """Layer 5 at awareness level 1, as the proxy asks it: what a rule may trust of a
    request whose body is unread, and whether the rules allow it."""

    error: int  # the JSON-RPC code of a 400 about the headers
    judges: bool  # any rule at all: without, no view is built and no body read for them
    reads_method: bool  # a rule reads the request's JSON-RPC method

    def read(self, raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None]:
        """Lower-case name -> value, and a header repeated where one copy must be judged (or None)."""

    def claimed(self, method: str, headers: dict[str, str]) -> tuple[str | None, str | None]:
        """(the JSON-RPC method the headers may be trusted for, None: unknown; a problem with them, or None)."""

    def body_method(self, body: bytes) -> str | None:
        """The method of a body read for it, or None when the body does not give one."""

    def allows(self, http: dict[str, Any]) -> bool:
        """Whether the rules allow the request (``http["headers"]`` as read)."""


def _error(code: int, message: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


class TransparentProxy:
    """The ASGI app: one instance serves every destination."""

    def __init__(
        self,
        settings: ProxySettings,
        rules: HeaderRules,
        *,
        declaration: Callable[[], dict[str, Any]],
        client: Any = None,
        aware: Endpoints | None = None,
        wait: float = 300.0,
    ) -> None:
        self.settings = settings
        self.aware = aware  # level 2: the protocol-aware part; None at level 1
        self.rules = rules
        self.declaration = declaration
        # hopline's own keep-alive HTTP/1.1 client (as on the gateway's hot path): no redirects, no
        # environment proxies; a body may idle for long (SSE), the answer's head may take ``wait``.
        self.timeout = httpx.Timeout(settings.connect_timeout, read=None)
        self.wait = wait
        self.client = client or LeanClient(timeout=self.timeout)
        self.names = Names()
        self.dispositions = Dispositions()

    async def aclose(self) -> None:
        if self.aware is not None:
            await self.aware.aclose()
        await self.client.aclose()

    async def __call__(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send) -> None:
        if scope["type"] != "http":
            return
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        c = self.settings
        first, repeated = self.rules.read(raw)
        if repeated is not None:  # judged on one copy, forwarded with two: refused before anything else
            await hu.send_json(
                send, 400, _error(self.rules.error, f"the {repeated.title()} header is repeated; send it once")
            )
            return
        if c.destination == "socket":  # the address the client dialled, as the kernel kept it
            named = (scope.get("extensions") or {}).get(ORIGINAL_DESTINATION)
        else:
            named = first.get("host") if c.destination == "host" else first.get(c.header)
        target = c.destinations.get(named.strip().lower()) if named else None
        if target is None:
            await self._own(scope, send, named)
            return
        destination = named.strip().lower()  # type: ignore[union-attr]
        if c.destination == "socket" or c.terminates:
            problem = await self._misdirected(scope, first.get("host"), destination)
            if problem is not None:
                log.info("refused %s %s for %s: %s", scope["method"], scope["path"], destination, problem)
                await hu.send_json(send, 421, _error(REFUSED, f"misdirected request: {problem}"))
                return
        method, problem = self.rules.claimed(scope["method"], first)
        if problem is not None:
            await hu.send_json(send, 400, _error(self.rules.error, problem))
            return
        length = first.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > c.max_body):
            await hu.send_json(send, 413, _error(REFUSED, f"request body larger than {c.max_body} bytes"))
            return
        body: bytes | None = None
        if self.rules.judges:  # the rules' view of the request, only when there are rules
            if method is None and self.rules.reads_method:
                if c.unknown_method == "read_body":
                    body = await _read_body(receive, min(c.max_method_body, c.max_body))
                    if body is _GONE:
                        return  # the client left before its request was whole
                    method = self.rules.body_method(body) if body is not None else None
                    why = (
                        "its body is not one JSON-RPC object with one method"
                        if body is not None
                        else "its body is larger than transparent.max_method_body"
                    )
                else:
                    method = "" if c.unknown_method == "allow" else None
                    why = "its body is unread and it does not claim MCP-Protocol-Version 2026-07-28"
                if method is None:
                    log.info(
                        "refused %s %s for %s: method unknown (unknown_method: %s)",
                        scope["method"],
                        scope["path"],
                        destination,
                        c.unknown_method,
                    )
                    message = (
                        "refused by the intermediary's policy: the request's method is not known "
                        f"({why}; transparent.unknown_method)"
                    )
                    await hu.send_json(send, 403, _error(REFUSED, message))
                    return
            http = {
                "method": scope["method"],
                "path": scope["path"],
                "destination": destination,
                "source": (scope.get("client") or ("", 0))[0],
                "sni": (scope.get("extensions") or {}).get(SNI) or "",
                "headers": first,
                "mcp_method": method or "",
            }
            if not self.rules.allows(http):
                log.info(
                    "refused %s %s for %s from %s (policy)", scope["method"], scope["path"], destination, http["source"]
                )
                await hu.send_json(send, 403, _error(REFUSED, "refused by the intermediary's policy"))
                return
        if self.aware is not None and not scope["path"].startswith("/.well-known/"):
            if destination not in c.single_handshake:
                self.dispositions.note(scope, destination, DUAL)
                await self.aware.serve(
                    scope, receive if body is None else _replay(body, receive), send, destination, target
                )
                return
            self.dispositions.note(scope, destination, SINGLE)
        await self._forward(scope, receive, send, target, raw, body)

    async def _misdirected(self, scope: hu.Scope, host: str | None, destination: str) -> str | None:
        """Why the request's Host or SNI disagree with its original destination, or None."""
        c = self.settings
        sni = (scope.get("extensions") or {}).get(SNI)
        checks = c.destination == "socket" and c.check_host
        port = destination.rpartition(":")[2]
        if checks and sni is not None and not await self.names.agree(f"{sni}:{port}", destination):
            return f"its TLS server name ({sni}) does not name the address the connection was made to ({destination})"
        if sni is not None and host is not None and split_host(host.strip().lower(), 443)[0] != sni:
            return f"its Host ({host}) and its TLS server name ({sni}) differ"
        if (
            checks
            and host is not None
            and not await self.names.agree(host, destination, scope.get("scheme") == "https")
        ):
            return f"its Host ({host}) does not name the address the connection was made to ({destination})"
        return None

    async def _own(self, scope: hu.Scope, send: hu.Send, named: str | None) -> None:
        """A request this intermediary serves itself, or refuses: it names no destination it forwards to."""
        if self.settings.destination == "socket" and named is not None:  # intercepted, for an unlisted address
            log.info("refused %s %s: %s is not an allowed destination", scope["method"], scope["path"], named)
            message = f"misdirected request: the connection was made to {named}, not an allowed destination"
            await hu.send_json(send, 421, _error(REFUSED, message))
        elif scope["method"] == "GET" and scope["path"] == DECLARATION_PATH:
            doc = self.declaration()
            if self.aware is not None and isinstance(doc.get("transparent"), dict):  # §7.1: tracked per connection
                doc["transparent"] = {**doc["transparent"], "connections": self.dispositions.counts()}
            await hu.send_json(send, 200, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        elif scope["method"] == "GET" and scope["path"] == "/healthz":
            await hu.send_json(send, 200, b'{"status":"ok"}')
        else:
            what = "names no destination" if not named else "is for a destination this intermediary does not forward to"
            await hu.send_json(send, 421, _error(REFUSED, f"misdirected request: it {what}"))

    async def _forward(
        self,
        scope: hu.Scope,
        receive: hu.Receive,
        send: hu.Send,
        target: str,
        raw: list[tuple[bytes, bytes]],
        body: bytes | None = None,
    ) -> None:
        c = self.settings
        drop = (
            HOP_BY_HOP
            | {b"host", b"content-length"}
            | ({c.header.encode()} if c.destination == "header" else frozenset())
        )
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
        streaming = self.client.stream(
            method,
            url,
            content=body if body or method not in ("GET", "HEAD", "DELETE") else None,
            headers=headers,
            host=host,
            timeout=self.timeout,
        )
        try:
            async with asyncio.timeout(
                self.wait
            ):  # the answer's head; its body (an SSE stream) may take as long as it takes
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


DUAL = "dual-handshake"
SINGLE = "single-handshake passthrough"


class Dispositions:
    """Level 2's handshake disposition per connection (draft §7.1): a client connection
    (its address and port, and its destination) is dual-handshaken through the
    destination's gateway, or carried at level 1 (``single_handshake``), for as long as it
    lasts; what each is, and how many of each there were."""

    MAX = 65536

    def __init__(self) -> None:
        self.connections: dict[tuple[Any, str], str] = {}
        self.seen = {DUAL: 0, SINGLE: 0}

    def note(self, scope: hu.Scope, destination: str, disposition: str) -> None:
        key = (scope.get("client"), destination)
        if key in self.connections:
            return
        if len(self.connections) >= self.MAX:
            self.connections.pop(next(iter(self.connections)))
        self.connections[key] = disposition
        self.seen[disposition] += 1
        log.debug("connection %s to %s: %s", key[0], destination, disposition)

    def of(self, client: Any, destination: str) -> str | None:
        return self.connections.get((client, destination))

    def counts(self) -> dict[str, int]:
        return dict(self.seen)


class Names:
    """Whether a ``Host`` (or SNI) names an original destination ``ip:port``: the same IP
    literal, or a name that resolves to it (looked up once a minute at most), and the same
    port (80, or 443 over TLS, when it gives none)."""

    TTL = 60.0
    MAX = 4096

    def __init__(self) -> None:
        self.resolved: dict[str, tuple[float, frozenset[str]]] = {}
        self.literal: dict[tuple[str, str, bool], bool] = {}  # answers that need no name resolved (most requests)

    async def agree(self, host: str, destination: str, tls: bool = False) -> bool:
        known = self.literal.get((host, destination, tls))
        if known is not None:
            return known
        name, port = split_host(host.strip().lower(), 443 if tls else 80)
        ip, _, dport = destination.rpartition(":")
        if port is None or str(port) != dport or name is None:
            return self._literal(host, destination, tls, False)
        ip = ip.strip("[]")
        try:
            return self._literal(host, destination, tls, ipaddress.ip_address(name).compressed == ip)
        except ValueError:
            pass
        return ip in await self.addresses(name)

    def _literal(self, host: str, destination: str, tls: bool, answer: bool) -> bool:
        if len(self.literal) >= self.MAX:
            self.literal.clear()
        self.literal[(host, destination, tls)] = answer
        return answer

    async def addresses(self, name: str) -> frozenset[str]:
        loop = asyncio.get_running_loop()
        now = loop.time()
        cached = self.resolved.get(name)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            infos = await loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
            found = frozenset(ipaddress.ip_address(str(info[4][0]).split("%")[0]).compressed for info in infos)
        except (OSError, ValueError):
            found = frozenset()
        if len(self.resolved) >= self.MAX:
            self.resolved.clear()
        self.resolved[name] = (now + self.TTL, found)
        return found


def split_host(host: str, default: int) -> tuple[str | None, int | None]:
    """``(name, port)`` of a Host value (``name``, ``name:port``, ``[ip6]:port``); None parts when malformed."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None, None
        name, rest = host[1:end], host[end + 1 :]
        if rest and not rest.startswith(":"):
            return None, None
        port = rest[1:]
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    elif ":" in host:
        return None, None
    else:
        name, port = host, ""
    if not port:
        return name or None, default
    return (name or None), (int(port) if port.isdigit() and 0 < int(port) < 65536 else None)


class Challenges:
    """A destination's authentication challenges (its HTTP 401s), per caller, as hopline's
    own requests to it met them: at level 2 the client's request during which one came is
    answered with it, unchanged (status, ``WWW-Authenticate``, body), so the client runs
    its OAuth discovery against the destination (RFC 9728) as it would without hopline,
    which never starts an authentication flow itself."""

    MAX = 4096

    def __init__(self) -> None:
        self.latest: dict[Any, tuple[int, list[tuple[bytes, bytes]], bytes]] = {}
        self.seq = 0
        self.relayed = 0

    def record(self, caller: Any, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.seq += 1
        if len(self.latest) >= self.MAX:
            self.latest.clear()
        kept = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and k.lower() != b"content-length"]
        self.latest[caller] = (self.seq, kept, body)

    def relaying(self, send: hu.Send, caller: Any) -> hu.Send:
        """``send`` for one request of ``caller``: its answer replaced by a challenge that came
        while it was served (unless the answer had begun before)."""
        mark = self.seq
        replaced = False

        async def relay(message: dict[str, Any]) -> None:
            nonlocal replaced
            if replaced:
                return  # the listener's own answer, swallowed
            if message["type"] == "http.response.start":
                got = self.latest.get(caller)
                if got is not None and got[0] > mark:
                    replaced = True
                    self.relayed += 1
                    await send({"type": "http.response.start", "status": 401, "headers": got[1]})
                    await send({"type": "http.response.body", "body": got[2], "more_body": False})
                    return
            await send(message)

        return relay


class Endpoint(Protocol):
    """One (destination, path) at level 2: the listener that serves it, and what it holds."""

    listener: Callable[[hu.Scope, hu.Receive, hu.Send, hu.Headers, Principal], Awaitable[None]]
    sse: Any  # a legacy HTTP+SSE endpoint's listener (stream, post), or None
    challenges: Challenges | None  # the destination's 401s, relayed to the client

    async def aclose(self) -> None: ...


class Endpoints:
    """The level 2 part of the transparent app: an endpoint per (destination, path), made
    (by ``make(destination, url, sse)``) when first asked for; each request carries the
    identity ``caller`` gives its headers. With ``sse_path``, a legacy HTTP+SSE client's
    stream (``GET sse_path``) and its messages (``POST /messages``) are served by an
    endpoint whose backend is the destination's own SSE endpoint."""

    MESSAGES = "/messages"

    def __init__(
        self,
        paths: Iterable[str],
        make: Callable[[str, str, bool], Endpoint],
        caller: Callable[[hu.Headers], Principal],
        sse_path: str | None = None,
    ) -> None:
        self.security = hu.SecurityPolicy(check_host=False)  # the Host names the destination, by design
        self.paths = frozenset(paths)
        self.sse_path = sse_path
        self.make = make
        self.caller = caller
        self.endpoints: dict[tuple[str, str], Endpoint] = {}

    async def serve(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send, destination: str, target: str) -> None:
        headers = await hu.guard(scope, send, self.security)
        if headers is None:
            return
        path = scope["path"].rstrip("/") or "/"
        sse = self.sse_path is not None and path in (self.sse_path, self.MESSAGES)
        if path not in self.paths and not sse:  # only MCP endpoints, each with its pipeline: no way around the policy
            await hu.send_json(
                send,
                404,
                b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,'
                b'"message":"not an MCP endpoint of this destination"}}',
            )
            return
        key = (destination, self.sse_path if sse else path)
        endpoint = self.endpoints.get(key)
        if endpoint is None:  # at most destinations x paths, all configured
            endpoint = self.endpoints[key] = self.make(destination, target + key[1], sse)
            log.info("level 2: serving %s%s through a gateway of its own", destination, key[1])
        principal = self.caller(headers)
        if endpoint.challenges is not None:
            send = endpoint.challenges.relaying(send, principal.key)
            # The answer must pass through ``send`` (a challenge may replace it): no side door past it.
            extensions = {k: v for k, v in (scope.get("extensions") or {}).items() if k != hu.FASTPATH}
            scope = {**scope, "extensions": extensions}
        if not sse:
            await endpoint.listener(scope, receive, send, headers, principal)
        elif path == self.MESSAGES:
            await endpoint.sse.post(scope, receive, send, headers, principal)
        else:
            await endpoint.sse.stream(scope, receive, send, headers, principal)

    async def aclose(self) -> None:
        for endpoint in list(self.endpoints.values()):
            await endpoint.aclose()
        self.endpoints.clear()


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
    """``receive`` for a request whose body was read already (for its method): the body once, \
then the client's events."""
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
