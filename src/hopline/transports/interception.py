"""Network interception (draft §5.4.2), Layer 1: the address a client dialled, recovered
from the socket hopline accepted.

With an iptables/nftables ``REDIRECT`` (or a mesh's redirect to a local port) the
kernel rewrites a connection's destination to hopline's listener and keeps the one the
client dialled in its connection tracking: ``getsockopt(SOL_IP, SO_ORIGINAL_DST)``
(IPv4) or ``getsockopt(SOL_IPV6, IP6T_SO_ORIGINAL_DST)`` (IPv6) returns it. No
privilege is needed to read it, so hopline can run as an unprivileged uid; the redirect
itself is the network's (see README, "Transparent interception").

:func:`intercepting` makes a listener's protocol class record that address per
connection; every request on the connection then carries it in its ASGI scope as
``scope["extensions"][ORIGINAL_DESTINATION]``: ``"ip:port"`` (``"[ip6]:port"``), or
None when the connection was not redirected (it was dialled to hopline itself: its
declaration and ``/healthz``) or the platform cannot say; and, where hopline terminated
the connection's TLS (``transports/transparent_tls.py``), the SNI the client sent as
``scope["extensions"][SNI]``.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from typing import Any

ORIGINAL_DESTINATION = "hopline.original_destination"
SNI = "hopline.sni"  # the server name a client asked for where hopline terminates its TLS (None: none)
SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
IP6T_SO_ORIGINAL_DST = 80  # linux/netfilter_ipv6/ip6_tables.h
SOL_IPV6 = getattr(socket, "SOL_IPV6", 41)


def address(host: str, port: int) -> str:
    """``ip:port`` as a destination is named (IPv6 bracketed, compressed)."""
    ip = ipaddress.ip_address(host)
    return f"[{ip.compressed}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def original_destination(sock: Any) -> tuple[str, int] | None:
    """The (ip, port) the client dialled, or None: not redirected (the same as the socket's
    own address), no connection tracking, not an IP socket."""
    try:
        family = sock.family
        local = sock.getsockname()
        if family == socket.AF_INET:
            raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)  # struct sockaddr_in
            port = struct.unpack_from("!H", raw, 2)[0]
            host = socket.inet_ntop(socket.AF_INET, raw[4:8])
        elif family == socket.AF_INET6:
            raw = sock.getsockopt(SOL_IPV6, IP6T_SO_ORIGINAL_DST, 28)  # struct sockaddr_in6
            port = struct.unpack_from("!H", raw, 2)[0]
            host = socket.inet_ntop(socket.AF_INET6, raw[8:24])
            mapped = ipaddress.IPv6Address(host).ipv4_mapped
            if mapped is not None:
                host = str(mapped)
        else:
            return None
    except (OSError, AttributeError, struct.error, ValueError):
        return None  # ENOENT: not tracked; ENOPROTOOPT: no netfilter here
    if (host, port) == (local[0], local[1]) or (host == "0.0.0.0" and port == 0):
        return None  # dialled to hopline itself
    return host, port


def intercepting(protocol: type) -> type:
    """A subclass of the listener's (uvicorn) protocol class whose requests carry their
    connection's original destination in ``scope["extensions"]``."""

    class Intercepting(protocol):  # type: ignore[valid-type, misc]
        _original: str | None = None
        _sni: str | None = None

        def connection_made(self, transport: Any) -> None:
            sock = transport.get_extra_info("socket")
            found = original_destination(sock) if sock is not None else None
            self._original = address(*found) if found is not None else None
            sslobj = transport.get_extra_info("ssl_object")  # a terminated connection: its SNI's context
            self._sni = getattr(sslobj.context, "hopline_sni", None) if sslobj is not None else None
            super().connection_made(transport)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope["extensions"] = {ORIGINAL_DESTINATION: self._original, SNI: self._sni}

    Intercepting.__name__ = Intercepting.__qualname__ = f"Intercepting{protocol.__name__}"
    return Intercepting
