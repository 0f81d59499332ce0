"""How the suite's HTTP test servers listen: on a port the kernel picks, announced once they accept.

A server script binds ``127.0.0.1:PORT`` itself (``--port 0``: any free port), builds its app
knowing the port it got, and runs uvicorn on that socket; once uvicorn accepts connections it
prints ``NAME: URL`` on stderr. ``tests.peers.start_script`` reads the port from that line, so no
test picks a port for a server to bind later (another process could take it meanwhile: the
free-port race of issue 37).

Scripts run as ``python tests/servers/x.py`` import this module as ``serving`` (their own folder
is first on ``sys.path``).
"""

from __future__ import annotations

import socket
import sys
from typing import Any


def bind(port: int = 0) -> socket.socket:
    """A TCP socket bound to ``127.0.0.1:port`` (0: a free port); uvicorn listens on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def port_of(sock: socket.socket) -> int:
    return sock.getsockname()[1]


def serve(app: Any, sock: socket.socket, announce: str, **config: Any) -> None:
    """Run ``app`` with uvicorn on ``sock``; print ``announce`` on stderr once it accepts connections."""
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:  # a failed lifespan startup announces nothing
                print(announce, file=sys.stderr, flush=True)

    Announcing(uvicorn.Config(app, log_level="warning", **config)).run(sockets=[sock])
