"""Small ASGI helpers shared by the HTTP listeners: headers, bodies, answers, guards.

Every error a listener answers goes through :func:`send_error`, which writes a
JSON-RPC-shaped body with the status the error class carries (jsonrpc.py), so no
response ever contains a traceback.

The guards implement the MCP transport's security rules (reference/mcp-wire.md §5,
§9 "Origin, bind and auth"; test-battery BAD-02, BAD-14, BAD-17): a present but
invalid ``Origin`` is refused with 403 (``null`` and duplicates included); when
bound to loopback the ``Host`` header must name a loopback host (DNS rebinding),
on by default; a body over the limit is refused with 413 before it is read whole.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol
from urllib.parse import urlsplit

import orjson

from hopline.bound import binds_loopback
from hopline.jsonrpc import Forbidden, HoplineError, Id, PayloadTooLarge, ProtocolError, error_response

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

FASTPATH = "hopline.fastpath"  # the scope extension hopline's front door advertises (see FastPath)
DEFAULT_MAX_BODY = 4 * 1024 * 1024
HOSTS_KEPT = 64  # Host header values whose verdict a SecurityPolicy keeps
SINGLETON_HEADERS = (
    b"origin",
    b"host",
    b"mcp-session-id",
    b"mcp-protocol-version",
    b"mcp-method",
    b"mcp-name",
    b"content-length",
    b"authorization",
)


class Headers(dict):
    """Request headers: lower-cased names (bytes) to their latin-1 text, decoded once;
    duplicated singleton headers are an error, other repeats are joined with ", ".

    A dict (``get`` and ``in`` are dict's own: no Python call per look-up; a listener
    reads eight or nine headers per request, bench/profile_call.py). Never falsy, even
    without headers, as when it was a plain object."""

    __slots__ = ()

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        for k, v in raw:
            if k in self:
                if k in (b"origin", b"host"):
                    raise Forbidden(f"duplicated {k.decode()} header")
                if k in SINGLETON_HEADERS or k.startswith(b"mcp-param-"):  # a mirror header: one value
                    raise ProtocolError(f"duplicated {k.decode()} header")
                self[k] = self[k] + ", " + v.decode("latin-1")
            else:
                self[k] = v.decode("latin-1")

    def __bool__(self) -> bool:
        return True


class FastPath(Protocol):
    """The side door into the HTTP server, declared: what hopline's front door
    (``front_door.OneWrite``) offers one request in ``scope["extensions"]["hopline.fastpath"]``
    (ASGI's place for server extensions), and what the helpers below use when it is there.
    A server without it (plain uvicorn, an in-process ASGI client) gets the plain ASGI events;
    both write the same bytes (tests/transports/test_front_door_parity.py).

    ``loop``: the loop the request runs in. ``body()``: the whole request body if it has all
    arrived (None: use ``receive()``). ``whole(...)``: write a whole response at once (False,
    nothing done: use ``send()``). ``watch(callback)``: have ``callback`` called once when the
    client goes away; returns the way to stop watching."""

    loop: Any

    def body(self) -> bytes | None: ...

    def whole(self, status: int, content_type: bytes | None, headers: dict[str, str] | None, body: bytes) -> bool: ...

    def watch(self, callback: Callable[[], object]) -> Callable[[], None]: ...


def fastpath(scope: Scope) -> FastPath | None:
    """The request's :class:`FastPath` if its server offers one (hopline's front door), else None.
    (Subscripts, not get(): two calls per request fewer where the front door offers it.)"""
    try:
        return scope["extensions"][FASTPATH]
    except (KeyError, TypeError):  # no extensions (or None), or not this one
        return None


@dataclass
class SecurityPolicy:
    """Origin and Host rules for one listener."""

    bound_host: str = "127.0.0.1"
    allowed_origins: frozenset[str] = frozenset()
    allowed_hosts: frozenset[str] = frozenset()
    check_host: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    # Host values judged already (a client sends the same one on every request), at most
    # HOSTS_KEPT of them: ~10 Python calls per request fewer (bench/profile_call.py).
    _hosts: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.check_host:
            self.loopback  # resolved now, when the listener is made, not in its first request

    @functools.cached_property
    def loopback(self) -> bool:
        """Does the listener bind loopback addresses only (by the addresses, not the spelling:
        ``LOCALHOST`` or ``2130706433`` is 127.0.0.1 too)? Resolved once."""
        return binds_loopback(self.bound_host)

    def check(self, headers: Headers) -> None:
        origin = headers.get(b"origin")
        if origin is not None and not self._origin_ok(origin):
            raise Forbidden(f"Invalid Origin header: {origin[:100]!r}")
        if self.check_host:
            host = headers.get(b"host")
            if host is not None:
                ok = self._hosts.get(host)
                if ok is None:
                    ok = not self.loopback or self._host_ok(host)
                    if len(self._hosts) < HOSTS_KEPT:
                        self._hosts[host] = ok
                if not ok:
                    raise Forbidden(f"Invalid Host header: {host[:100]!r}")

    def _origin_ok(self, origin: str) -> bool:
        if origin in self.allowed_origins or "*" in self.allowed_origins:
            return True
        scheme, sep, hostport = origin.partition("://")
        if not sep or scheme not in ("http", "https") or "/" in hostport:
            return False
        host = split_host(hostport)
        return host is not None and (host in LOOPBACK_NAMES or self._allowed(host, hostport.lower()))

    def _host_ok(self, hostport: str) -> bool:
        host = split_host(hostport.strip())
        return host is not None and (host in LOOPBACK_NAMES or self._allowed(host, hostport.strip().lower()))

    def _allowed(self, host: str, hostport: str) -> bool:
        """An allowed entry is a host (any port) or a ``host:port`` (that port only)."""
        allowed = self.allowed_hosts
        return host in allowed or hostport in allowed or f"[{host}]" in allowed


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def public_url(url: str) -> str:
    """``url`` as it may appear in a log line or an error: ``scheme://host[:port]/path``, without
    userinfo, query or fragment (each may hold a secret, such as ``?token=…``)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<invalid URL>"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else "<invalid URL>"


def split_host(hostport: str) -> str | None:
    """The lower-cased host of ``host[:port]`` / ``[v6][:port]``, or None if malformed."""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            return None
        host, rest = hostport[1:end], hostport[end + 1 :]
    else:
        host, sep, port = hostport.partition(":")
        rest = sep + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    return host.lower() if host else None


async def read_body(receive: Receive, headers: Headers, limit: int, fast: FastPath | None = None) -> bytes:
    """The whole request body, refusing (413) anything over ``limit`` bytes early; through
    ``fast`` (the server's :class:`FastPath`) when given and the body has all arrived."""
    declared = headers.get(b"content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ProtocolError("invalid Content-Length")
        if int(declared) > limit:
            raise PayloadTooLarge(f"request body of {declared} bytes exceeds the {limit}-byte limit")
    # hopline's front door hands over a body that has all arrived without a receive() (front_door.OneWrite.body).
    if fast is not None:
        body = fast.body()
        if body is not None:
            if len(body) > limit:
                raise PayloadTooLarge(f"request body exceeds the {limit}-byte limit")
            return body
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            raise ConnectionResetError("client disconnected")
        body = event.get("body", b"")
        if body:
            size += len(body)
            if size > limit:
                raise PayloadTooLarge(f"request body exceeds the {limit}-byte limit")
            chunks.append(body)
        if not event.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def header_list(extra: dict[str, str] | None = None, content_type: bytes | None = None) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    if content_type is not None:
        out.append((b"content-type", content_type))
    if extra:
        out.extend((k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items())
    return out


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes | None,
    headers: dict[str, str] | None = None,
    fast: FastPath | None = None,
) -> None:
    # hopline's front door writes a whole response at once (front_door.OneWrite.whole), through
    # ``fast`` (the request's FastPath) when the caller has it; otherwise the two ASGI events.
    if fast is not None and fast.whole(status, content_type, headers, body):
        return
    hs = header_list(headers, content_type)
    hs.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": hs})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, body: bytes, headers: dict[str, str] | None = None, fast: FastPath | None = None
) -> None:
    await send_bytes(send, status, body, b"application/json", headers, fast)


async def send_error(
    send: Send,
    error: HoplineError,
    msg_id: Id | None = None,
    headers: dict[str, str] | None = None,
    status: int | None = None,
    fast: FastPath | None = None,
) -> None:
    """The error as a JSON-RPC error body, with its status and any headers it carries (``Retry-After``)."""
    body = error_response(msg_id if msg_id is not None else error.request_id, error).encode()
    own = getattr(error, "http_headers", None)
    await send_json(send, status or error.http_status, body, {**own, **(headers or {})} if own else headers, fast)


async def send_empty(
    send: Send, status: int, headers: dict[str, str] | None = None, fast: FastPath | None = None
) -> None:
    await send_bytes(send, status, b"", None, headers, fast)


async def start_sse(send: Send, headers: dict[str, str] | None = None) -> None:
    hs = header_list(headers, b"text/event-stream")
    hs.append((b"cache-control", b"no-cache, no-transform"))
    hs.append((b"x-accel-buffering", b"no"))
    await send({"type": "http.response.start", "status": 200, "headers": hs})


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def on_disconnect(fast: FastPath | None, callback: Callable[[], object]) -> Callable[[], None] | None:
    """Have ``callback`` called once when the client goes away, with no task, where the
    server can say so: hopline's front door (``fast``, the request's FastPath:
    ``front_door.OneWrite.watch``). Returns the way to stop watching, or None where the
    server cannot (then run :func:`wait_disconnect` in a task)."""
    return None if fast is None else fast.watch(callback)


async def wait_disconnect(receive: Receive) -> None:
    """Return once the client has gone (any unread request body is discarded)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def guard(scope: Scope, send: Send, security: SecurityPolicy) -> Headers | None:
    """The request's headers if they pass the listener's guards; otherwise answers and returns None."""
    try:
        headers = Headers(scope["headers"])
        security.check(headers)
    except HoplineError as exc:
        await send_error(send, exc)
        return None
    return headers
