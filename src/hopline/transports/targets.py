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


def find_command(command: str, env: dict[str, str] | None = None, cwd: str | None = None) -> str | None:
    """Where ``command`` would be executed from, as a stdio child is started: a name is looked
    up on ``PATH`` (``env``'s, else hopline's), a path (with a ``/``) taken from ``cwd``; None
    when there is no executable file there."""
    import os
    import shutil

    if not command:
        return None
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        path = command if os.path.isabs(command) or cwd is None else os.path.join(cwd, command)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    search = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    return shutil.which(command, path=search)
