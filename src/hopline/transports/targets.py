"""Where a backend is: a stdio server command (:class:`StdioTarget`) or a remote
Streamable HTTP or legacy SSE server (:class:`RemoteTarget`). Plain data; the
connectors (compose/connectors.py) open channels to them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StdioTarget:
    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None
    # More of hopline's environment for the child than the safe list (transports/stdio.py
    # child_environment): names or fnmatch patterns, or True for everything.
    inherit_env: bool | list[str] | tuple[str, ...] = ()
    # A permission profile (transports/confine.py Profile) the children run under, and the files it never shows.
    sandbox: Any = None
    hidden: tuple[str, ...] = ()


@dataclass
class RemoteTarget:
    url: str
    transport: str = "auto"  # "streamable-http" | "sse" | "auto" (by URL path)
    headers: dict[str, str] = field(default_factory=dict)
    auth: Any = None  # an httpx.Auth adding credentials to every request (layers/policy/propagation.py)
    # What errors call the backend. The gateway passes its id: a URL may carry a secret
    # (a token in its query) that must not reach clients in an error's message or data.
    name: str | None = None

    def is_sse(self) -> bool:
        if self.transport == "auto":
            return self.url.rstrip("/").endswith("/sse")
        return self.transport == "sse"
