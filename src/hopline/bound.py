"""Is a listener's address loopback only? Decided by the addresses it binds, not by how the
address is spelled: ``LOCALHOST``, ``2130706433``, ``127.1`` and ``0x7f.0.0.1`` all bind
127.0.0.1, as ``localhost`` does (the DNS-rebinding Host check of the MCP and admin listeners
depends on it, transports/http_util.py and observability/admin.py)."""

from __future__ import annotations

import ipaddress
import socket


def binds_loopback(host: str | None) -> bool:
    """True if every address ``host`` resolves to for listening is a loopback address (what
    the listener binds: asyncio resolves the host with the same ``getaddrinfo`` call). No host
    (``""``: every interface) is not loopback. A host that does not resolve cannot be bound:
    True, so a check that depends on it stays on."""
    if not host:
        return False
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError):
        return True
    return bool(infos) and all(_loopback(info[4][0]) for info in infos)


def loopback_name(host: str) -> bool:
    """True if ``host`` as written names loopback: ``localhost`` (or a name under it, RFC 6761) or a
    loopback address literal (127.0.0.0/8, ``::1``, bracketed or not). Nothing is resolved: this is
    the rule for URLs hopline is given (plain http allowed only to loopback, RFC 8252 redirects)."""
    host = host.lower().strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.partition("%")[0])  # a scope id (fe80::1%eth0) is no part of it
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback
