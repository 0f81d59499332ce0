"""RFC 8707 resource URIs: the one canonical form a token's audience is compared with.

:func:`canonical_resource` lower-cases scheme and host, drops a default port, a trailing
slash and nothing else. The configuration (``config/auth.py``) validates ``auth.resource``
and ``auth.backends.<id>.resource`` with it; token propagation derives a backend's
default ``resource`` from its URL with it.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical_resource(uri: str) -> str:
    """The RFC 8707 canonical form of an http(s) resource URI; raises ValueError if it is not one."""
    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        raise ValueError("must be an http:// or https:// URI with a host (and a valid port, if any)") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError("must be an http:// or https:// URI with a host")
    if parts.fragment or uri.rstrip().endswith("#"):
        raise ValueError("must not contain a fragment (RFC 8707 §2)")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not contain user information")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))
