"""The asyncio shell: run a coroutine on the best loop, serve an ASGI app, shut down cleanly.

``serve_http`` runs uvicorn (httptools parser, no access log) until SIGINT/SIGTERM,
announces the bound address on stderr once listening (so ``--port 0`` is usable
by scripts and tests), then awaits ``on_shutdown`` so every session and backend
child is closed and reaped before the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any, Awaitable, Callable, Coroutine


def run(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(main)
    return uvloop.run(main)


async def serve_http(
    app: Any,
    *,
    host: str,
    port: int,
    on_ready: Callable[[str, int], None],
    on_shutdown: Callable[[], Awaitable[None]],
    graceful: float = 5.0,
) -> None:
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http="httptools",
        loop="none",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=graceful,
        proxy_headers=False,  # hopline reads no X-Forwarded-*; skip the middleware on the hot path
        server_header=False,
        date_header=False,
        h11_max_incomplete_event_size=64 * 1024,
    )
    server = uvicorn.Server(config)
    watcher = asyncio.create_task(_announce(server, on_ready))
    try:
        await server.serve()
    finally:
        watcher.cancel()
        await on_shutdown()


async def serve_admin(app: Any, *, host: str, port: int, on_ready: Callable[[str, int], None], stop: asyncio.Event) -> None:
    """A second, quiet HTTP server in this loop (the admin listener) until ``stop`` is
    set. It installs no signal handlers: the main server owns SIGINT/SIGTERM."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, http="httptools", loop="none", lifespan="off", access_log=False, log_level="warning", server_header=False, date_header=False)
    server = uvicorn.Server(config)
    watcher = asyncio.create_task(_announce(server, on_ready))
    serving = asyncio.create_task(server._serve())  # _serve: serve() minus the signal capture
    try:
        await stop.wait()
    finally:
        server.should_exit = True
        watcher.cancel()
        with contextlib.suppress(Exception):
            await serving


async def _announce(server: Any, on_ready: Callable[[str, int], None]) -> None:
    while not server.started:
        await asyncio.sleep(0.01)
    for s in server.servers:
        for sock in s.sockets:
            host, port = sock.getsockname()[:2]
            on_ready(host, port)
            return


def announce(line: str) -> None:
    with contextlib.suppress(Exception):
        print(line, file=sys.stderr, flush=True)
