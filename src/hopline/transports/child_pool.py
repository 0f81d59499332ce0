"""The child processes of one stdio backend: a cap, bounded spawning, pre-warmed spares.

DESIGN §7: "process count never follows client count". Every child of a backend — the
one a shared backend session runs on as much as one per client session — is a
:class:`Lease` from that backend's :class:`ChildPool`, which keeps these bounds:

- **cap** (``max_children``): live children (leased, spare, being spawned) never
  exceed it. A request at the cap first asks the least recently active *reclaimable*
  lease to give its child up (its owner decides: the gateway parks an idle backend
  session, the relay closes a session idle past its timeout); else it waits up to
  ``wait`` seconds for a slot; else it fails with :class:`AtCapacity` (-31001, with
  ``retry_after``). How long "idle" must be under pressure is the owner's choice
  (``pressure_idle``), with shorter ones for the sessions a client has most likely
  left: ``fresh_idle`` for a lease that carried no more than its handshake (what a
  burst leaves behind), ``absent_idle`` for one whose client holds no stream open on it
  (``Lease.listening``: a one-shot client such as ``mcp-inspector --cli`` never sends
  DELETE, but its GET stream ends with it). A request at the cap that would find a
  lease reclaimable within ``RECLAIM_WAIT`` seconds waits for it rather than failing.
- **spawning** (``max_spawning``): at most that many fork/execs of this backend at
  once, so a burst of sessions never forks hundreds of processes together.
- **spares** (``prewarm``): children spawned ahead (never initialized: the handshake
  must carry the client's own capabilities), handed to the next request at once and
  replaced in the background. Pre-warming starts with the backend's first use, so a
  gateway with twenty rarely used backends starts no spares for them. A spare that
  died meanwhile is discarded. Spares count against the cap and are the first thing
  taken back when a request needs their slot.
- **idle reaping** (``idle_timeout``): a sweeper offers every reclaimable lease idle
  that long back to its owner.
- **abandonment**: an acquire whose task is cancelled releases its slot, and the child
  it would have got is closed; ``aclose`` reaps every child.

A lease counts what is in flight on it (requests either way not yet answered), so
"idle" means nothing pending and nothing sent or received for a while. This is the
one place that reads message ids below the session layer; it costs a set operation
per request and response.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import Any, Awaitable, Callable

from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.child_lease import AtCapacity, Lease

log = logging.getLogger("hopline.pool")

DEFAULT_MAX_CHILDREN = 8
DEFAULT_MAX_SPAWNING = 4
SPARE_WAIT = 10.0  # how long a request waits for a spare already being forked
RECLAIM_WAIT = 5.0  # how long a request at the cap waits for a lease to become reclaimable


class ChildPool:
    """Children of one stdio backend, within the bounds above (module docstring)."""

    def __init__(
        self,
        spawn: Callable[[], Awaitable[Any]],
        *,
        name: str,
        max_children: int = DEFAULT_MAX_CHILDREN,
        prewarm: int = 0,
        max_spawning: int = DEFAULT_MAX_SPAWNING,
        wait: float = 10.0,
        idle_timeout: float | None = None,
        pressure_idle: float = 0.0,
        fresh_idle: float | None = None,
        absent_idle: float | None = None,
        retry_after: float = 5.0,
        log_failures: bool = False,
    ) -> None:
        """``spawn``: starts one child (anything with ``send``/``receive``/``aclose``/
        ``is_alive``/``is_closed``). ``pressure_idle``: how long a lease must have been
        idle before it is reclaimed to make room at the cap (0: any lease not busy);
        ``fresh_idle``: the same for a lease that carried at most one request (its
        handshake); ``absent_idle``: for a lease whose client holds no stream open;
        both default to ``pressure_idle``. A spare that cannot start is logged; a child
        a request waited for only with ``log_failures`` (the relay: nothing else says it)."""
        if max_children < 1:
            raise ValueError("max_children must be at least 1")
        self._spawn = spawn
        self.name = name
        self.max_children = max_children
        self.prewarm = min(max(prewarm, 0), max_children)
        self.wait = wait
        self.idle_timeout = idle_timeout
        self.pressure_idle = pressure_idle
        self.fresh_idle = pressure_idle if fresh_idle is None else min(fresh_idle, pressure_idle)
        self.absent_idle = pressure_idle if absent_idle is None else min(absent_idle, pressure_idle)
        self.retry_after = retry_after
        self.log_failures = log_failures
        self._gate = asyncio.Semaphore(max(1, max_spawning))
        self._leased: dict[Lease, None] = {}
        self._spares: collections.deque[Any] = collections.deque()
        self._starting = 0  # slots reserved by spawns in progress (requests' and spares')
        self._last_failure: str | None = None  # the last start failure logged (each is logged once in a row)
        self._warming = 0  # ... of which spares
        self._closing = 0  # children nobody will use, being closed (they hold their slot until reaped)
        self._abandoned: set[asyncio.Future[Any]] = set()  # spawns whose requester left
        self._handed: dict[asyncio.Future[Any], Lease] = {}  # spawns done, their lease not yet taken by the requester
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._tasks: set[asyncio.Task] = set()
        self._sweeper: asyncio.Task | None = None
        self._claiming = 0  # acquires under way: no spare is started while they look for a slot
        self._used = False
        self._closed = False

    # -- counts ---------------------------------------------------------------------------
    def live(self) -> int:
        """Children that hold a slot now: spawning, spare, or leased and alive."""
        self._prune()
        return self._starting + self._closing + len(self._spares) + sum(1 for lease in self._leased if lease.alive())

    def stats(self) -> dict[str, int]:
        self._prune()
        return {
            "leased": sum(1 for lease in self._leased if lease.alive()),
            "spare": len(self._spares),
            "starting": self._starting,
            "waiting": len(self._waiters),
            "max": self.max_children,
        }

    def pids(self) -> list[int]:
        """The process ids of the leased children that are alive (the admin page shows them)."""
        return sorted(p for p in (lease.pid for lease in list(self._leased) if lease.alive()) if p is not None)

    def _prune(self) -> None:
        if any(not c.is_alive() for c in self._spares):
            dead = [c for c in self._spares if not c.is_alive()]
            self._spares = collections.deque(c for c in self._spares if c.is_alive())
            for child in dead:
                self._background(child.aclose())
        for lease in [lease for lease in self._leased if not lease.alive()]:
            del self._leased[lease]  # exited on its own: its slot is free (its owner still closes it)

    # -- acquiring ------------------------------------------------------------------------
    async def acquire(self, *, wait: float | None = None) -> Lease:
        """A child for one owner: a spare if there is one, else a new one within the cap.
        Raises :class:`AtCapacity` when no slot comes free within ``wait`` (default: the
        pool's), or ChannelClosed when the backend cannot be started."""
        if self._closed:
            raise ChannelClosed(f"{self.name}: shutting down")
        self._used = True
        self._ensure_sweeper()
        self._claiming += 1
        try:
            lease = await self._claim(self.wait if wait is None else wait)
        finally:
            self._claiming -= 1
        if self._closed:  # closed while this child was on its way
            await lease.aclose()
            raise ChannelClosed(f"{self.name}: shutting down")
        self._top_up()
        return lease

    async def _claim(self, wait: float) -> Lease:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        patience = loop.time() + max(wait, RECLAIM_WAIT)  # for a lease about to become reclaimable
        while True:
            spare = self._take_spare()
            if spare is not None:
                return self._lease(spare)
            if self._warming > len(self._waiters):  # a spare is being forked and nobody waits for it: take it
                await self._wait(SPARE_WAIT)
                continue
            if self.live() < self.max_children:
                return await self._claimed(self._spawn_reserved(spare=False))
            if await self._reclaim_one():
                continue
            remaining = deadline - loop.time()
            soonest = self._next_reclaimable()
            if soonest is not None and soonest <= patience - loop.time() and not self._closed:
                await self._wait(soonest + 0.005)  # woken early if a slot frees meanwhile
                continue
            if remaining <= 0 or self._closed:
                raise AtCapacity(self.name, self.max_children, self.retry_after)
            await self._wait(remaining)

    def _lease(self, child: Any) -> Lease:
        lease = Lease(child, self)
        self._leased[lease] = None
        return lease

    async def _wait(self, timeout: float) -> None:
        """Until a slot or a spare may have come free (or ``timeout``)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            pass  # the caller looks once more, then gives up
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._wake()  # what we were woken for goes to the next waiter
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def _take_spare(self) -> Any:
        while self._spares:
            child = self._spares.popleft()
            if child.is_alive():
                return child
            self._background(child.aclose())
        return None

    def _spawn_reserved(self, *, spare: bool) -> asyncio.Future[Any]:
        """Reserve a slot now and spawn one child into it, in a task of its own: a
        cancelled requester cannot interrupt a fork half-way, and the child that arrives
        for a requester who left is closed (:meth:`_claimed`)."""
        self._starting += 1
        self._warming += spare
        task = asyncio.ensure_future(self._spawn_into_slot(spare))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _spawn_into_slot(self, spare: bool) -> Any:
        """The new child takes over its reservation (leased, spare, or closing) in the
        spawn's own last step, so no count ever misses it, and once the task is done its
        lease is in ``_handed``: a requester cancelled in the very step the spawn finishes
        (a done-callback would settle it only after the requester had looked) finds it
        there and closes it, instead of leaving it to nobody."""
        me = asyncio.current_task()
        try:
            child = await self._spawn_gated()
        except Exception as exc:
            reason = str(getattr(exc, "reason", exc))
            if (spare or self.log_failures) and not self._closed and reason != self._last_failure:  # once in a row
                self._last_failure = reason
                what = "a spare child" if spare else "a child"
                log.warning("backend %s: could not start %s: %s", self.name, what, reason)
            raise
        else:
            self._last_failure = None
            if me in self._abandoned or self._closed:
                self._discard(child)  # its requester left: closed, in its slot until reaped
                if self._closed:
                    raise ChannelClosed(f"{self.name}: shutting down")
            elif spare:
                self._spares.append(child)
            else:
                self._handed[me] = self._lease(child)  # type: ignore[index]
            return child
        finally:
            self._abandoned.discard(me)  # type: ignore[arg-type]
            self._starting -= 1
            self._warming -= spare
            self._wake()

    async def _claimed(self, task: asyncio.Future[Any]) -> Lease:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._abandoned.add(task)
            else:
                lease = self._handed.pop(task, None)
                if lease is not None:
                    self._background(lease.aclose())
            raise
        return self._handed.pop(task)

    def _discard(self, child: Any) -> None:
        """Close a child nobody will use; it keeps its slot until it has been reaped."""
        self._closing += 1

        async def close() -> None:
            try:
                await child.aclose()
            finally:
                self._closing -= 1
                self._wake()

        self._background(close())

    async def _spawn_gated(self) -> Any:
        async with self._gate:
            if self._closed:
                raise ChannelClosed(f"{self.name}: shutting down")
            child = await self._spawn()
        if self._closed:
            await child.aclose()
            raise ChannelClosed(f"{self.name}: shutting down")
        return child

    # -- spares ------------------------------------------------------------------------------
    def _top_up(self) -> None:
        """Start spares until ``prewarm`` are ready or on their way, room and waiters permitting."""
        if self._closed or not self._used or self._claiming or self._waiters:
            return
        while len(self._spares) + self._warming < self.prewarm and self.live() < self.max_children:
            self._spawn_reserved(spare=True)  # joins the spares when it has started

    # -- giving slots back -------------------------------------------------------------------
    def _returned(self, lease: Lease) -> None:
        self._leased.pop(lease, None)
        self._wake()
        self._top_up()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
                return

    def _threshold(self, lease: Lease) -> float:
        if lease.requests <= 1:
            return self.fresh_idle
        if lease.listening is not None and not lease.listening():
            return self.absent_idle
        return self.pressure_idle

    def _next_reclaimable(self) -> float | None:
        """Seconds until some idle lease becomes reclaimable under pressure (None: none will
        by waiting alone; busy leases are not counted, their answers wake nobody)."""
        now = time.monotonic()
        waits = [
            self._threshold(lease) - idle
            for lease in self._leased
            if lease.reclaim is not None and lease.alive() and (idle := lease.idle_for(now)) is not None
        ]
        waits = [w for w in waits if w > 0]  # one already past it was asked and kept its child
        return min(waits) if waits else None

    async def _reclaim_one(self) -> bool:
        """Take one child back for a request at the cap: the least recently active
        lease idle at least its threshold (``pressure_idle``, or ``fresh_idle`` after a
        bare handshake) whose owner gives it up."""
        now = time.monotonic()
        candidates = sorted(
            (
                lease
                for lease in self._leased
                if lease.reclaim is not None
                and lease.alive()
                and (lease.idle_for(now) or -1.0) >= self._threshold(lease)
            ),
            key=lambda lease: lease.last_active,
        )
        for lease in candidates:
            reclaim = lease.reclaim
            if reclaim is None:
                continue
            try:
                gave = await reclaim()
            except Exception:
                log.exception("backend %s: reclaiming child %s failed", self.name, lease.pid)
                continue
            if gave:
                if not lease._released:
                    await lease.aclose()
                log.info("backend %s: reclaimed idle child %s", self.name, lease.pid)
                return True
        return False

    def _ensure_sweeper(self) -> None:
        if self.idle_timeout is not None and (self._sweeper is None or self._sweeper.done()) and not self._closed:
            self._sweeper = asyncio.create_task(self._sweep(), name=f"pool-sweeper-{self.name}")

    async def _sweep(self) -> None:
        assert self.idle_timeout is not None
        period = max(0.05, min(30.0, self.idle_timeout / 4))
        while not self._closed:
            await asyncio.sleep(period)
            now = time.monotonic()
            for lease in [
                lease
                for lease in self._leased
                if lease.reclaim is not None and (lease.idle_for(now) or -1.0) >= self.idle_timeout
            ]:
                reclaim = lease.reclaim
                with contextlib.suppress(Exception):
                    if (
                        reclaim is not None
                        and lease.alive()
                        and (lease.idle_for() or -1.0) >= self.idle_timeout
                        and await reclaim()
                        and not lease._released
                    ):
                        await lease.aclose()

    def _background(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Reap every child: leased, spare and still starting."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        leases, self._leased = list(self._leased), {}
        spares, self._spares = list(self._spares), collections.deque()
        for lease in leases:
            lease._released = True
        await asyncio.gather(
            *(c.aclose() for c in [*(lease.child for lease in leases), *spares]), return_exceptions=True
        )
        while self._tasks:  # spawns in flight close what they bring (the pool is closed)
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
