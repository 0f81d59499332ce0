"""The asyncio shell: run a coroutine on the best loop, serve an ASGI app, shut down cleanly,
and own long-lived tasks (:class:`TaskOwner`: one ``asyncio.TaskGroup``, cancelled and awaited
on close).

``serve_http`` runs uvicorn (httptools parser, no access log) until SIGINT/SIGTERM,
announces the bound address on stderr once listening (so ``--port 0`` is usable
by scripts and tests), then awaits ``on_shutdown`` so every session and backend
child is closed and reaped before the process exits.

Both listeners serve through the front door (transports/front_door.py): connection caps,
request-read deadlines and head-size limits given as :class:`DoorLimits`. The process's
open-file limit is raised toward its hard limit so ``max_connections`` fit; where they
cannot, the cap is lowered to what fits (with a warning) so the excess is refused with a
503 instead of failing at accept.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
from typing import Any, Awaitable, Callable, Coroutine

from hopline.transports.door_limits import DoorCounters, DoorLimits

log = logging.getLogger("hopline.runtime")
FD_RESERVE = 256  # descriptors kept for backends, children, logs and the admin listener


class TaskOwner:
    """The structured owner of a component's long-lived tasks: each one runs in one
    ``asyncio.TaskGroup`` (held by one owner task), a task that fails is logged without
    taking its siblings down, and :meth:`aclose` cancels every one and awaits them all.
    :meth:`spawn` needs a running loop; nothing runs before the first one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._owner: asyncio.Task | None = None
        self._group: asyncio.TaskGroup | None = None
        self._pending: list[tuple[Coroutine[Any, Any, Any], str]] = []
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        if self._closed:  # closing: what would start now is not started
            coro.close()
            return
        if self._group is not None:
            self._group.create_task(_logged(coro, name), name=name)
            return
        self._pending.append((coro, name))
        if self._owner is None:
            self._owner = asyncio.get_running_loop().create_task(self._run(), name=f"{self.name}-tasks")

    async def _run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                while self._pending:
                    coro, name = self._pending.pop(0)
                    group.create_task(_logged(coro, name), name=name)
                await asyncio.get_running_loop().create_future()  # until aclose cancels the group
        finally:
            self._group = None

    async def aclose(self) -> None:
        self._closed = True
        for coro, _ in self._pending:
            coro.close()
        self._pending.clear()
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.cancel()
            await asyncio.wait({owner})  # the group cancels its tasks and awaits them


async def _logged(coro: Coroutine[Any, Any, Any], name: str) -> None:
    try:
        await coro
    except Exception:  # noqa: BLE001 (one task's failure is logged; its siblings keep running)
        log.exception("task %s failed", name)


def run(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(main)
    return uvloop.run(main)


class BindError(Exception):
    """The listening address cannot be bound (the message says what to do about it)."""


def check_bind(host: str, port: int, flag: str = "--port") -> None:
    """Raise :class:`BindError` if ``host:port`` cannot be listened on (in use, or not
    an address of this machine), before uvicorn tries and exits with its own error."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                what = "admin port" if flag == "--admin-port" else "port"
                raise BindError(f"{what} {port} is in use; pick another with {flag}") from None
            raise BindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


async def serve_http(
    app: Any,
    *,
    host: str,
    port: int,
    on_ready: Callable[[str, int], None],
    on_shutdown: Callable[[], Awaitable[None]],
    graceful: float = 5.0,
    limits: DoorLimits | None = None,
    counters: DoorCounters | None = None,
    protocol: Callable[[type], type] | None = None,
    ssl: Any = None,
) -> None:
    """``protocol``: wraps the front door's protocol class (transparent mode's interception);
    ``ssl``: the listener's server ``SSLContext`` (transparent mode's TLS termination)."""
    import uvicorn

    from hopline.transports.front_door import FrontDoor

    try:
        check_bind(host, port)
    except BindError:
        await on_shutdown()
        raise
    door = FrontDoor(_fit_fd_limit(limits or DoorLimits()), counters, tls=ssl)  # TLS handshakes under its caps
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=door.protocol() if protocol is None else protocol(door.protocol()),
        ws="none",
        timeout_keep_alive=door.limits.idle_timeout,  # the front door's idle timer replaces uvicorn's
        loop="none",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=graceful,
        proxy_headers=False,  # hopline reads no X-Forwarded-*; skip the middleware on the hot path
        server_header=False,
        date_header=False,
    )
    server = _server(config)
    watcher = asyncio.create_task(_announce(server, on_ready))
    try:
        await server.serve()
    finally:
        watcher.cancel()
        await asyncio.wait({watcher})
        await on_shutdown()
    server.raise_deferred()


def _server(config: Any) -> Any:
    """A ``uvicorn.Server`` that holds the SIGINT/SIGTERM it catches until :meth:`raise_deferred`.

    uvicorn re-raises a caught signal as ``serve()`` returns, which ended the process before
    ``on_shutdown`` ran (sessions, backends, the spans and metrics still batched for OTLP
    were dropped). Re-raised after ``on_shutdown``, the exit status still names the signal."""
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        deferred: list[int] = []

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            self.deferred = [*self.deferred, *self._captured_signals]
            self._captured_signals.clear()

        def raise_deferred(self) -> None:
            for sig in reversed(self.deferred):
                signal.raise_signal(sig)

    return Server(config)


async def serve_tcp(
    handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    *,
    host: str,
    port: int,
    on_ready: Callable[[str, int], None],
    on_shutdown: Callable[[], Awaitable[None]],
) -> None:
    """A plain TCP listener (transparent mode's TLS passthrough) until SIGINT/SIGTERM."""
    import signal

    try:
        check_bind(host, port)
    except BindError:
        await on_shutdown()
        raise
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(handler, host, port, reuse_address=True)
    try:
        sock = server.sockets[0]
        on_ready(*sock.getsockname()[:2])
        await stop.wait()
    finally:
        server.close()
        await on_shutdown()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def serve_admin(
    app: Any, *, host: str, port: int, on_ready: Callable[[str, int], None], stop: asyncio.Event,
    limits: DoorLimits | None = None, counters: DoorCounters | None = None,
) -> None:  # fmt: skip
    """A second, quiet HTTP server in this loop (the admin listener) until ``stop`` is
    set. It installs no signal handlers: the main server owns SIGINT/SIGTERM."""
    import uvicorn

    from hopline.transports.front_door import FrontDoor

    door = FrontDoor(limits or DoorLimits(), counters)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=door.protocol(),
        ws="none",
        timeout_keep_alive=door.limits.idle_timeout,
        loop="none",
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
        date_header=False,
    )
    server = uvicorn.Server(config)
    watcher = asyncio.create_task(_announce(server, on_ready))
    serving = asyncio.create_task(server._serve())  # _serve: serve() minus the signal capture
    try:
        await stop.wait()
    finally:
        server.should_exit = True
        watcher.cancel()
        await asyncio.wait({watcher})
        with contextlib.suppress(Exception):
            await serving


def _fit_fd_limit(limits: DoorLimits) -> DoorLimits:
    """Raise the soft open-file limit so ``max_connections`` (plus a reserve) fit, or lower the cap to what fits."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return limits
    want = limits.max_connections + FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < want:
        fit = max(1, soft - FD_RESERVE)
        log.warning(
            "max_connections %d does not fit the open-file limit %d; serving at most %d connections",
            limits.max_connections,
            soft,
            fit,
        )
        return dataclasses.replace(
            limits, max_connections=fit, max_connections_per_source=min(limits.max_connections_per_source, fit)
        )
    return limits


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
