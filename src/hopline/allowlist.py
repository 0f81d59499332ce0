"""Where a sandboxed child may connect (``sandbox.allow``, issue 35): the rules, pure.

An entry is ``host`` (ports 443 and 80), ``host:port``, ``*.domain`` / ``*.domain:port`` (any name
under the domain, not the domain itself) or an IP address (``[v6]:port`` with a port). What a rule
admits is decided twice by the egress proxy (``transports/egress.py``): the name and port the child
asks for, then every address the name resolves to. A name must resolve to public addresses only;
an address that is loopback, private, link-local, shared (CGNAT), multicast, reserved or a cloud
metadata endpoint is reachable only when an entry names that address (and port) itself.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable

DEFAULT_PORTS = (443, 80)
#: Cloud metadata endpoints that sit in public or odd ranges (besides link-local 169.254.0.0/16).
METADATA = (ipaddress.ip_address("100.100.100.200"), ipaddress.ip_address("fd00:ec2::254"))
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


@dataclass(frozen=True)
class Rule:
    host: str  # lower case; an address in its compressed form; "*.domain" for a wildcard
    ports: tuple[int, ...]

    @property
    def address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None

    @classmethod
    def parse(cls, entry: str) -> Rule:
        text = entry.strip().lower()
        if not text or any(c.isspace() for c in text) or "/" in text or "@" in text:
            raise ValueError(f"{entry!r}: write host, host:port, *.domain[:port] or an IP address")
        port: int | None = None
        if text.startswith("["):  # [v6] or [v6]:port
            host, sep, rest = text[1:].partition("]")
            if not sep or (rest and not rest.startswith(":")):
                raise ValueError(f"{entry!r}: an IPv6 address is written [address] or [address]:port")
            port = _port(entry, rest[1:]) if rest else None
        elif text.count(":") == 1:
            host, _, raw = text.partition(":")
            port = _port(entry, raw)
        else:
            host = text
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            name = host[2:] if host.startswith("*.") else host
            labels = name.split(".")
            if ":" in host or not name or not set(name) <= _NAME_CHARS or any(not x or len(x) > 63 for x in labels):
                raise ValueError(f"{entry!r}: not a host name, *.domain or IP address") from None
            if host.startswith("*.") and len(labels) < 2:
                raise ValueError(f"{entry!r}: a wildcard names a domain with a dot (*.example.com)") from None
        return cls(host, (port,) if port is not None else DEFAULT_PORTS)

    def admits(self, host: str, port: int) -> bool:
        """Whether a tunnel to ``host`` (lower case, as asked) and ``port`` is this rule's."""
        if port not in self.ports:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host


def _port(entry: str, raw: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
    return int(raw)


def canonical_host(host: str) -> str:
    """The host as a client writes it in CONNECT, as rules compare it: lower case, brackets off,
    an address in its compressed form, no trailing dot."""
    host = host.strip().lower().strip("[]").rstrip(".")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def parse(entries: Iterable[str]) -> tuple[Rule, ...]:
    return tuple(Rule.parse(e) for e in entries)


def matching(rules: Iterable[Rule], host: str, port: int) -> Rule | None:
    host = canonical_host(host)
    return next((r for r in rules if r.admits(host, port)), None)


def address_allowed(address: str, port: int, rules: Iterable[Rule]) -> bool:
    """Whether the proxy may connect to ``address`` and ``port`` (an address a name resolved to, or
    one asked for as an address): a public address, or one an entry names itself with that port."""
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(r.address == ip and port in r.ports for r in rules):
        return True
    return ip.is_global and not ip.is_multicast and ip not in METADATA
