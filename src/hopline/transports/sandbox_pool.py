"""The ``monty`` worker processes Code mode runs in: a bounded pool, one per gateway.

A run borrows one worker (:meth:`SandboxPool.session`: a Monty session checked out and
ready), and the worker is killed when the run ends, however it ends. **One run per
worker**: nothing of one caller's run (interpreter heap, allocator state, anything a
Monty bug might let survive a session) can reach another caller's. Reusing a worker's
process for a fresh session would save about 2 ms per run (``bench/code_pool.py``: ~3 ms
a run with a spare, ~1 ms reused, ~5–6 ms starting a process per run), but Monty
promises no isolation between sessions of one process (it has a knob to recycle workers,
``max_checkouts_per_worker``, which we set to 1), and 2 ms is small next to the tool
calls a run makes. What keeps latency low instead is a **pre-started spare**: the
pool starts ``spares`` workers ahead of demand (each a process with its session already
checked out), so a run normally starts at once while the next spare starts beside it.

Bounds, each a constructor argument (``tools.code.*`` in the configuration):

- ``max_workers`` processes alive at any moment: idle, running, starting or being
  reaped, all count; a run that finds none free waits in a queue;
- ``queue`` runs waiting at once, each at most ``queue_wait`` seconds; past either the
  run gets :class:`PoolError` (``busy``) at once instead of a worker;
- ``idle_timeout``: a worker nobody took for this long is reaped, spares included, so a
  quiet gateway holds no process; spares are started again by the next run;
- ``request_timeout``: Monty's own watchdog per turn (the caller's run timeout + 1 s);
- every retired worker is seen to end (a pidfd on Linux, else polling its pid) and is
  killed with SIGKILL if it has not ended ``CLOSE_BOUND`` seconds after it was told to;
- :meth:`aclose` (gateway shutdown or reload) refuses new runs, reaps idle workers, lets
  runs in flight finish for ``grace`` seconds and then kills their workers.

Why hand-written around ``pydantic_monty.AsyncMonty`` (whose pool has a cap, warm
workers and a checkout timeout): it has no queue bound or idle reaping, keeps no spare
once workers are recycled per checkout, and a task cancelled while ``AsyncMonty``
starts its workers leaks them (the worker is started off the event loop and nobody owns
it). That leak is why 20 cancelled parallel runs used to leave 20 idle workers alive.
Here each worker is an ``AsyncMonty`` of one process, started and closed only by the
pool's own tasks, which callers cannot cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

from hopline.layers.transport.pool import PoolError

log = logging.getLogger("hopline.sandbox")

CLOSE_BOUND = 2.0  # seconds each step of closing a worker may take before it is killed


def default_max_workers() -> int:
    """The CPU count, capped at 4: runs are CPU-bound interpreters."""
    return max(1, min(4, os.cpu_count() or 1))


class _Worker:
    """One ``monty`` process: an ``AsyncMonty`` of one process with one session checked
    out. ``pid`` and ``pidfd`` let the pool see the process end, and kill it."""

    __slots__ = ("monty", "session", "pid", "pidfd", "since")

    def __init__(self, monty: Any, session: Any, now: float) -> None:
        self.monty, self.session, self.since = monty, session, now
        self.pid: int | None = session.worker_pid
        self.pidfd: int | None = None
        if self.pid is not None and hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self.pidfd = os.pidfd_open(self.pid)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            elif self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)

    async def close(self) -> None:
        for step in (self.session.__aexit__, self.monty.__aexit__):
            try:
                await asyncio.wait_for(step(None, None, None), CLOSE_BOUND)
            except Exception as exc:  # a crashed or stuck worker: it is killed below
                log.debug("closing sandbox worker %s: %s", self.pid, exc)
        if not await self.ended(CLOSE_BOUND):
            log.warning("sandbox worker %s did not exit; killing it", self.pid)
            self.kill()
            await self.ended(CLOSE_BOUND)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    async def ended(self, bound: float) -> bool:
        """Whether the process ended (a zombie counts: it runs nothing) within ``bound``."""
        if self.pidfd is None:
            return await _poll_gone(self.pid, bound)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.add_reader(self.pidfd, lambda: done.done() or done.set_result(None))
        try:
            await asyncio.wait_for(done, bound)
            return True
        except TimeoutError:
            return False
        finally:
            loop.remove_reader(self.pidfd)


async def _poll_gone(pid: int | None, bound: float) -> bool:
    """Without pidfds (not Linux): ask the OS every 10 ms whether ``pid`` is gone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    while pid is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return True
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


class SandboxPool:
    """At most ``max_workers`` ``monty`` processes, one run each; see the module docstring.

    ``checkout`` holds the keyword arguments of ``AsyncMonty.checkout`` (script name,
    resource limits, OS policy) for every run this pool serves. The pool binds to the
    event loop of its first run; it spawns nothing before that."""

    def __init__(
        self,
        *,
        max_workers: int | None = None,
        spares: int = 1,
        queue: int = 32,
        queue_wait: float = 10.0,
        idle_timeout: float = 60.0,
        request_timeout: float | None = None,
        checkout: Mapping[str, Any] | None = None,
        binary_path: str | None = None,
    ) -> None:
        self.max_workers = max_workers or default_max_workers()
        self.spares = max(0, min(spares, self.max_workers))
        self.queue, self.queue_wait, self.idle_timeout = queue, queue_wait, idle_timeout
        self.request_timeout = request_timeout
        self.checkout = dict(checkout or {})
        self.binary_path = binary_path
        self._idle: deque[_Worker] = deque()  # oldest first: taken first, so spares in use never expire
        self._busy: set[_Worker] = set()
        self._waiters: deque[asyncio.Future[_Worker]] = deque()
        self._starting = 0
        self._retiring = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_run = float("-inf")
        self._reaper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self.closed = False

    def __repr__(self) -> str:
        return f"<SandboxPool {self.stats()}>"

    @property
    def live(self) -> int:
        """Processes this pool owns now (idle, running, starting, being reaped)."""
        return len(self._idle) + len(self._busy) + self._starting + self._retiring

    def stats(self) -> dict[str, int]:
        return {
            "idle": len(self._idle),
            "busy": len(self._busy),
            "starting": self._starting,
            "retiring": self._retiring,
            "waiting": len(self._waiters),
        }

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        """A Monty session in a worker of its own for one run; the worker is reaped on exit.
        Raises :class:`PoolError` if no worker can be had within the bounds."""
        worker = await self._acquire()
        try:
            yield worker.session
        finally:  # no await here: a cancelled run still hands its worker back
            self._busy.discard(worker)
            self._retire(worker)
            self._changed.set()

    async def aclose(self, grace: float | None = None) -> None:
        """Refuse new runs, reap idle workers, give runs in flight ``grace`` seconds
        (default: the watchdog's ``request_timeout``, else 10 s), then kill their
        workers; returns when every process of this pool has ended."""
        self.closed = True
        if self._loop is None:
            return
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolError("the sandbox is shutting down"))
        while self._idle:
            self._retire(self._idle.popleft())
        try:
            async with asyncio.timeout(grace if grace is not None else self.request_timeout or 10.0):
                await self._until(lambda: not self._busy and not self._starting)
        except TimeoutError:
            for worker in self._busy:
                log.info("sandbox worker %s still running as its pool closes; killing it", worker.pid)
                worker.kill()
            with contextlib.suppress(TimeoutError):  # the killed runs unwind and hand their workers back
                async with asyncio.timeout(CLOSE_BOUND):
                    await self._until(lambda: not self._busy and not self._starting)
        await self._until(lambda: not self._tasks)

    # -- internals ------------------------------------------------------------------------------
    async def _acquire(self) -> _Worker:
        loop = self._bind()
        if self.closed:
            raise PoolError("the sandbox is shutting down")
        self._last_run = loop.time()
        if self._idle:
            worker = self._idle.popleft()
            self._busy.add(worker)
            self._fill()
            return worker
        taken = len(self._busy) + len(self._waiters)
        if taken >= self.max_workers + self.queue:
            limit = f"({self.max_workers} workers, a queue of {self.queue})"
            raise PoolError(f"{taken} runs are running or waiting, the most this gateway takes {limit}", busy=True)
        waiter: asyncio.Future[_Worker] = loop.create_future()
        self._waiters.append(waiter)
        self._fill()
        try:
            async with asyncio.timeout(self.queue_wait):
                return await waiter
        except TimeoutError:
            self._give_up(waiter)
            raise PoolError(
                f"no worker became free within {self.queue_wait:g} s (all {self.max_workers} are running)", busy=True
            ) from None
        except BaseException:
            self._give_up(waiter)
            raise

    def _give_up(self, waiter: asyncio.Future[_Worker]) -> None:
        """A waiter left (timed out, cancelled); a worker handed to it just then was never used."""
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            worker = waiter.result()
            self._busy.discard(worker)
            self._offer(worker)
            return
        waiter.cancel()
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None and self.live:
                raise RuntimeError("a SandboxPool serves one event loop; its workers belong to another")
            self._loop, self._changed = loop, asyncio.Event()
        return loop

    def _fill(self) -> None:
        """Start workers for the runs waiting, plus ``spares`` while runs come, within the cap."""
        if self.closed or self._loop is None:
            return
        recent = self._loop.time() - self._last_run < self.idle_timeout
        wanted = len(self._waiters) + (self.spares if recent else 0)
        while len(self._idle) + self._starting < wanted and self.live < self.max_workers:
            self._starting += 1
            self._spawn(self._start())

    async def _start(self) -> None:
        try:
            worker = await self._open()
        except Exception as exc:
            self._starting -= 1
            log.warning("a sandbox worker could not start: %s", exc)
            while self._waiters:  # one start served one waiter; that waiter learns why
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(PoolError(f"a sandbox worker could not start: {exc}"))
                    break
            self._changed.set()
            return
        self._starting -= 1
        self._offer(worker)
        self._changed.set()

    async def _open(self) -> _Worker:
        import pydantic_monty as monty  # only paid for when Code mode runs code

        pool = monty.AsyncMonty(
            binary_path=self.binary_path,
            min_processes=1,
            max_processes=1,
            max_checkouts_per_worker=1,
            request_timeout=self.request_timeout,
        )
        await pool.__aenter__()
        try:
            session = pool.checkout(**self.checkout)
            await session.__aenter__()
        except BaseException:
            await pool.__aexit__(None, None, None)
            raise
        assert self._loop is not None
        return _Worker(pool, session, self._loop.time())

    def _offer(self, worker: _Worker) -> None:
        """A fresh worker goes to the first run still waiting, else it waits idle."""
        if self.closed:
            self._retire(worker)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._busy.add(worker)
                waiter.set_result(worker)
                return
        assert self._loop is not None
        worker.since = self._loop.time()
        self._idle.append(worker)
        self._arm_reaper()

    def _retire(self, worker: _Worker) -> None:
        self._retiring += 1
        self._spawn(self._close(worker))

    async def _close(self, worker: _Worker) -> None:
        try:
            await worker.close()
        finally:
            self._retiring -= 1
            self._fill()
            self._changed.set()

    def _arm_reaper(self) -> None:
        if self._reaper is None and self._idle and self._loop is not None:
            self._reaper = self._loop.call_at(self._idle[0].since + self.idle_timeout, self._reap)

    def _reap(self) -> None:
        self._reaper = None
        assert self._loop is not None
        now = self._loop.time()
        while self._idle and now - self._idle[0].since >= self.idle_timeout:
            self._retire(self._idle.popleft())
        self._arm_reaper()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._changed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("sandbox pool task failed", exc_info=task.exception())

    async def _until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self._changed.clear()
            await self._changed.wait()
