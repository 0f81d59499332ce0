"""The asyncio shell around :class:`~hopline.acp.router.Router`: channels in, channels out.

Contract
- One reader task per connection feeds each message to the router as it
  arrives; the router answers at once with the messages to send. Each
  connection has one writer task draining an unbounded FIFO outbox, so the
  routing path never waits on a slow peer (no deadlock between a proxy that
  awaits its successor and the answer queued behind it) and every
  (source → destination) order is kept.
- The chain is built lazily: components are spawned when the router first sends
  them something (the first ``initialize``), all at once. A component that
  cannot be started or that exits is reported to the router, which answers
  every affected request with the conductor's own error (never a hang).
- A component that writes non-JSON-RPC lines to stdout is named in a warning
  (the lines are dropped by the framing and the stream stays in sync).
- Components are started by the spawner (default: :class:`hopline.acp.launch.Launcher`,
  which runs commands as processes and built-ins in process).
- ``--on-crash restart``: a component (proxy or terminal agent) that exits is
  spawned again after a backoff (:meth:`Chain.backoff`: ``restart_backoff``
  doubled per consecutive attempt, at most ``chain.restart_attempts`` in a row),
  offered its role again (a proxy the handshake, the agent ``initialize``) and
  given its sessions back (:mod:`hopline.acp.sessions`); if that is not done
  within ``rejoin_timeout`` the new process is stopped and counts as another
  failure. Its traffic waits meanwhile; when no attempt is left it is refused.
- Upstream EOF means the client has no more to say: requests it already sent
  are still answered (bounded by ``drain_timeout``), then each component's
  stdin is closed, what they still send is routed, and they are stopped (stdin
  EOF → SIGTERM → SIGKILL, always reaped). Upstream may be two half channels
  (``upstream`` to receive, ``upstream_out`` to send) so that its output
  outlives its input. :meth:`Conductor.run` returns when all is down.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Awaitable, Callable

from hopline.acp.chain import Chain, Component
from hopline.acp.launch import Launcher
from hopline.acp.lifecycle import State
from hopline.acp.router import Output, Router, Tracer
from hopline.jsonrpc import InternalError, Message
from hopline.layers.transport.channel import Channel, ChannelClosed

log = logging.getLogger("hopline.acp")

Spawner = Callable[[Component], Awaitable[Channel]]


class Outbox:
    """An unbounded FIFO of messages for one channel, drained by one writer task."""

    __slots__ = ("queue", "wakeup", "empty", "channel", "dead")

    def __init__(self) -> None:
        self.queue: collections.deque[Message] = collections.deque()
        self.wakeup = asyncio.Event()
        self.empty = asyncio.Event()
        self.empty.set()
        self.channel: Channel | None = None  # None until the component is spawned
        self.dead = False

    def push(self, message: Message) -> None:
        if not self.dead:
            self.queue.append(message)
            self.empty.clear()
            self.wakeup.set()

    async def drain(self) -> None:
        while True:
            await self.wakeup.wait()
            self.wakeup.clear()
            channel = self.channel
            if channel is None:
                continue
            while self.queue:
                try:
                    await channel.send(self.queue.popleft())
                except ChannelClosed:
                    self.dead = True
                    self.queue.clear()
            self.empty.set()
            if self.dead:
                return

    async def flushed(self) -> None:
        if not self.dead and self.channel is not None:
            await self.empty.wait()


class Conductor:
    def __init__(
        self,
        chain: Chain,
        upstream: Channel,
        *,
        upstream_out: Channel | None = None,
        spawn: Spawner | None = None,
        tracer: Tracer | None = None,
        drain_timeout: float = 10.0,
        restart_backoff: float | None = None,
        rejoin_timeout: float | None = None,
    ) -> None:
        self.chain = chain
        self.router = Router(chain, tracer=tracer)
        self._launcher = None if spawn is not None else Launcher(chain)
        self._spawn: Spawner = spawn or self._launcher  # type: ignore[assignment]
        self.drain_timeout = drain_timeout
        self.restart_backoff = restart_backoff  # None: the chain's (restart_backoff, doubled, capped)
        self.rejoin_timeout = chain.rejoin_timeout if rejoin_timeout is None else rejoin_timeout
        self._rejoining: dict[int, asyncio.Event] = {}  # restarted components not READY yet
        n = len(chain.components)
        self.outboxes = [Outbox() for _ in range(n + 1)]
        self.outboxes[0].channel = upstream_out or upstream
        self.channels: list[Channel | None] = [upstream, *([None] * n)]
        self._started = False
        self._tasks: set[asyncio.Task] = set()
        self._garbage = [0] * (n + 1)
        self._input_done = False  # upstream said all it will say
        self._closing = False  # the chain is being stopped
        self._answered = asyncio.Event()  # set while closing once upstream has all its answers

    async def run(self) -> None:
        """Serve until upstream's input ends; answer what is in flight; stop the chain."""
        writer = asyncio.create_task(self.outboxes[0].drain(), name="acp-write-upstream")
        try:
            await self._read(0)
            self._input_done = True
            self._check_answered()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._answered.wait(), self.drain_timeout)
            await self._shutdown()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.outboxes[0].flushed(), 5)
        finally:
            self._closing = True
            writer.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(writer, *self._tasks, return_exceptions=True)
            await self._close_all()
            if self._launcher is not None:
                await self._launcher.aclose()

    # -- pumping ----------------------------------------------------------------------
    async def _read(self, conn: int) -> None:
        channel = self.channels[conn]
        assert channel is not None
        handle, dispatch = self.router.handle, self._dispatch
        while True:
            try:
                message = await channel.receive()
            except ChannelClosed as exc:
                self._report_garbage(conn, channel)
                if conn != 0:
                    self._lost(conn, exc.reason)
                    if not self._closing:  # reap it now; shutdown closes the rest
                        self._own(asyncio.create_task(channel.aclose(), name=f"acp-reap-{conn}"))
                return
            if getattr(channel, "garbage_frames", 0) != self._garbage[conn]:
                self._report_garbage(conn, channel)
            try:
                dispatch(handle(conn, message))
            except Exception:  # a bug must cost one message, never the whole chain
                log.exception("ACP conductor: internal error while routing %r from connection %d", message, conn)
                if message.is_request():
                    self.outboxes[conn].push(InternalError("internal error in the conductor").to_response(message.id))

    def _dispatch(self, outputs: list[Output]) -> None:
        outboxes = self.outboxes
        for conn, message in outputs:
            outboxes[conn].push(message)
            if conn and not self._started:
                self._start_chain()
        if self._input_done:
            self._check_answered()
        for conn, settled in self._rejoining.items():
            if self.router.state[conn] not in (State.REJOINING, State.RELOADING):
                settled.set()

    def _check_answered(self) -> None:
        if self.router.in_flight(0) == 0:
            self._answered.set()

    def _lost(self, conn: int, reason: str) -> None:
        name = self.chain.components[conn - 1].name
        if not self._closing:
            log.warning("ACP component %r is gone: %s", name, reason)
        self.outboxes[conn].dead = True
        self.outboxes[conn].wakeup.set()  # its writer ends
        self._dispatch(self.router.lost(conn, reason))
        if self.router.state[conn] is State.RESTARTING and not self._closing:
            attempt = self.router.restarts[conn]
            delay = (
                self.chain.backoff(attempt)
                if self.restart_backoff is None
                else self.restart_backoff * 2 ** (attempt - 1)
            )
            log.warning(
                "ACP component %r: restart %d of at most %d in %.2f s",
                name,
                attempt,
                self.chain.restart_attempts,
                delay,
            )
            self._own(asyncio.create_task(self._restart(conn, delay), name=f"acp-restart-{conn}"))

    async def _restart(self, conn: int, delay: float) -> None:
        await asyncio.sleep(delay)  # backoff: a proxy that dies at once must not spin
        try:
            channel = await self._spawn(self.chain.components[conn - 1])
        except Exception as exc:
            return self._lost(conn, exc.reason if isinstance(exc, ChannelClosed) else f"could not start: {exc}")
        if self._closing:
            await channel.aclose()
            return
        settled = self._rejoining[conn] = asyncio.Event()
        self._attach(conn, channel)  # no await between this and the offer: nothing can overtake it
        self._dispatch(self.router.rejoin(conn))
        try:
            await asyncio.wait_for(settled.wait(), self.rejoin_timeout)
        except asyncio.TimeoutError:
            log.warning(
                "ACP component %r did not take its place again within %g s; stopping it",
                self.chain.components[conn - 1].name,
                self.rejoin_timeout,
            )
            await channel.aclose()  # its reader reports the loss: the next attempt, or the end
        finally:
            self._rejoining.pop(conn, None)

    def _report_garbage(self, conn: int, channel: Channel) -> None:
        count = getattr(channel, "garbage_frames", 0)
        if conn == 0 or count == self._garbage[conn]:
            return
        self._garbage[conn] = count
        log.warning(
            "ACP component %r polluted its stdout: %d line(s) that are not JSON-RPC were dropped "
            "(stdout carries ACP messages only; a component must log to stderr)",
            self.chain.components[conn - 1].name,
            count,
        )

    # -- lifecycle ------------------------------------------------------------------
    def _start_chain(self) -> None:
        self._started = True
        self._own(asyncio.create_task(self._spawn_all(), name="acp-spawn"))

    async def _spawn_all(self) -> None:
        components = self.chain.components
        results = await asyncio.gather(*(self._spawn(c) for c in components), return_exceptions=True)
        for conn, result in enumerate(results, start=1):
            if isinstance(result, BaseException):
                reason = result.reason if isinstance(result, ChannelClosed) else f"could not start: {result}"
                self._lost(conn, reason)
                continue
            if self._closing:
                await result.aclose()
                continue
            self._attach(conn, result)

    def _attach(self, conn: int, channel: Channel) -> None:
        """Start pumping a (new) component channel; what was queued for it goes first."""
        self.channels[conn] = channel
        outbox = self.outboxes[conn]
        if outbox.dead:  # a restarted component: a fresh outbox
            outbox = self.outboxes[conn] = Outbox()
        outbox.channel = channel
        self._garbage[conn] = 0
        self._own(asyncio.create_task(outbox.drain(), name=f"acp-write-{conn}"))
        outbox.wakeup.set()
        self._own(asyncio.create_task(self._read(conn), name=f"acp-read-{conn}"))

    def _own(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _shutdown(self) -> None:
        """Close the components' stdin, route what they still say, reap them."""
        self._closing = True
        spawning = [t for t in self._tasks if t.get_name() == "acp-spawn"]
        if spawning:
            await asyncio.wait(spawning, timeout=10)
        for outbox in self.outboxes[1:]:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(outbox.flushed(), 1)
        await self._close_all()
        readers = [t for t in self._tasks if t.get_name().startswith("acp-read")]
        if readers:
            await asyncio.wait(readers, timeout=5)

    async def _close_all(self) -> None:
        closers = [ch.aclose() for ch in self.channels[1:] if ch is not None]
        await asyncio.gather(*closers, return_exceptions=True)
