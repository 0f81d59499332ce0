"""Where a Conversion backend may connect, and to which origin its credentials may go.

An ``openapi`` backend makes hopline fetch a URL (the spec) and then call the URLs that
document names (``servers[].url``) with the operator's ``headers``. Neither may lead
hopline somewhere the operator did not mean:

- **No link-local or cloud-metadata address** (:data:`FORBIDDEN`: 169.254.0.0/16,
  fe80::/10, 100.100.100.200, fd00:ec2::254, also inside IPv4-mapped, NAT64 and 6to4
  IPv6 addresses), for the spec fetch and the API calls, unless the backend lists the
  network in ``allow_addresses``. Loopback and private ranges are allowed: operators'
  own APIs live there. A name is resolved before connecting and *every* address it
  resolves to is checked; the connection then goes to a checked address (never
  resolved again), so a name that rebinds between check and connect gains nothing.
  :func:`check_url` says so at start-up; the guarded clients enforce it per connection.
- **Credentials stay on the configured origin** (:func:`check_credentials`): without an
  explicit ``base_url``, the spec's server must be on the spec URL's origin for the
  backend's ``headers`` to be sent there.
- **Redirects**: the spec fetch follows at most :data:`MAX_REDIRECTS` same-origin ones
  (:func:`fetch_spec`); API calls follow none. Environment proxies and ``.netrc`` are
  not used (``trust_env=False``): the address check needs the connection to be hopline's.

httpx has no public hook for name resolution, so the guarded clients put a checking
network backend under httpx's own connection pool (:func:`_guarded`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from hopline.conversion.errors import SpecError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
FORBIDDEN: tuple[Network, ...] = tuple(
    ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10", "100.100.100.200/32", "fd00:ec2::254/128")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
MAX_REDIRECTS = 3
_DEFAULT_PORT = {"http": 80, "https": 443}


def networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """``allow_addresses`` as networks; a SpecError at that key for an entry that is not one."""
    out = []
    for entry in entries:
        try:
            out.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise SpecError(f"{entry!r} is not an IP address or network (CIDR)", key="allow_addresses") from None
    return tuple(out)


def _views(address: Address) -> Iterator[Address]:
    yield address
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            yield embedded


def refused(address: str, allowed: tuple[Network, ...], forbidden: tuple[Network, ...] = FORBIDDEN) -> bool:
    """Whether hopline must not connect to ``address`` (an IP literal, maybe with an IPv6 scope)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    bad = any(view in net for view in _views(ip) for net in forbidden)
    return bad and not any(view in net for view in _views(ip) for net in allowed)


def _addresses(infos: list[Any]) -> list[str]:
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _check(host: str, addresses: list[str], allowed: tuple[Network, ...], forbidden: tuple[Network, ...]) -> None:
    bad = next((a for a in addresses if refused(a, allowed, forbidden)), None)
    if bad is not None:
        raise httpcore.ConnectError(
            f"{host} resolves to {bad}, a link-local or cloud-metadata address (not in allow_addresses)"
        )


def origin(url: str) -> str:
    """scheme://host:port of a URL (no userinfo, path or query: safe to show)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme.lower()}://{host}:{parts.port or _DEFAULT_PORT.get(parts.scheme.lower(), 0)}"


def check_url(url: str, allowed: tuple[Network, ...], what: str, key: str) -> None:
    """Start-up: a SpecError if ``url``'s host is, or resolves to, a refused address. A
    name that does not resolve now is not an error here (each connection checks again)."""
    host = urlsplit(url).hostname or ""
    try:
        addresses = _addresses(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
    except (OSError, UnicodeError):
        return
    try:
        _check(host, addresses, allowed, FORBIDDEN)
    except httpcore.ConnectError as exc:
        raise SpecError(
            f"{what} is refused: {exc}; list the network in `allow_addresses` if this is really meant", key=key
        ) from None


def check_credentials(base_url: str, configured: str | None, location: str, headers: dict[str, str]) -> None:
    """The backend's ``headers`` go only to the origin the operator configured: ``base_url``,
    or (without it) the origin of the spec URL. A spec file is the operator's own."""
    if configured or not headers or urlsplit(location).scheme not in ("http", "https"):
        return
    if origin(base_url) != origin(location):
        raise SpecError(
            f"the spec's servers[0].url is on another origin ({origin(base_url)}) than the spec URL; "
            "this backend's `headers` are sent only "
            "to the origin the operator configured: set `base_url` explicitly to send them there",
            key="base_url",
        )


class _SyncGuard(httpcore.NetworkBackend):
    """Resolve, check every address, connect to a checked one (see the module docstring)."""

    def __init__(self, allowed: tuple[Network, ...], forbidden: tuple[Network, ...]) -> None:
        self.allowed, self.forbidden, self.inner = allowed, forbidden, httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> Any:
        try:
            addresses = _addresses(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve the host ({type(exc).__name__})") from None
        _check(host, addresses, self.allowed, self.forbidden)
        failure: Exception = httpcore.ConnectError("no address")
        for address in addresses:
            try:
                return self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise httpcore.ConnectError("unix sockets are not used")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _AsyncGuard(httpcore.AsyncNetworkBackend):
    """:class:`_SyncGuard` for the asyncio client of the API calls."""

    def __init__(self, allowed: tuple[Network, ...], forbidden: tuple[Network, ...]) -> None:
        self.allowed, self.forbidden, self.inner = allowed, forbidden, httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> Any:
        try:
            async with asyncio.timeout(timeout):
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise httpcore.ConnectTimeout("resolving the host timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve the host ({type(exc).__name__})") from None
        addresses = _addresses(infos)
        _check(host, addresses, self.allowed, self.forbidden)
        failure: Exception = httpcore.ConnectError("no address")
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise httpcore.ConnectError("unix sockets are not used")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def _guarded(transport: Any, guard: Any) -> Any:
    transport._pool._network_backend = (
        guard  # httpx builds the pool; its connections take the backend from it when they open
    )
    return transport


def async_client(
    allowed: tuple[Network, ...], *, timeout: float, forbidden: tuple[Network, ...] = FORBIDDEN
) -> httpx.AsyncClient:
    """The API calls' client: guarded, no redirects, no environment settings."""
    transport = _guarded(httpx.AsyncHTTPTransport(trust_env=False), _AsyncGuard(allowed, forbidden))
    return httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False, timeout=timeout)


def fetch_spec(
    url: str, allowed: tuple[Network, ...], *, timeout: float, read: Any, forbidden: tuple[Network, ...] = FORBIDDEN
) -> bytes:
    """GET the spec (guarded); same-origin redirects only, at most :data:`MAX_REDIRECTS`.
    ``read`` takes the response's byte iterator and returns the (capped) bytes."""
    transport = _guarded(httpx.HTTPTransport(trust_env=False), _SyncGuard(allowed, forbidden))
    with httpx.Client(transport=transport, follow_redirects=False, trust_env=False, timeout=timeout) as client:
        for _ in range(MAX_REDIRECTS + 1):
            with client.stream("GET", url) as response:
                if response.is_redirect:
                    target = urljoin(url, response.headers["location"])
                    if origin(target) != origin(url):
                        raise SpecError(
                            f"the spec URL redirects to another origin ({origin(target)}); "
                            "cross-origin redirects are not followed: "
                            "point `openapi` at the document itself"
                        )
                    url = target
                    continue
                if response.status_code >= 300:
                    raise SpecError(f"cannot fetch the spec: the spec URL answered HTTP {response.status_code}")
                return read(response.iter_bytes())
    raise SpecError(f"cannot fetch the spec: the spec URL redirects more than {MAX_REDIRECTS} times")
