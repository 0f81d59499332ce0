"""A single-consumer message queue that waits without spawning tasks.

``asyncio.Queue.get`` under ``asyncio.wait``/``wait_for`` costs a task per wait;
on the relay's hot path (one wait per request) that is a measurable share of the
CPU. :class:`Inbox` parks its one consumer on a bare future, times out with a
timer handle, and can be *interrupted* from outside (the client went away), so a
response writer waits for "next message, timeout, or disconnect" with no task.
"""

from __future__ import annotations

import asyncio
import collections
from time import monotonic
from typing import Callable, Generic, TypeVar

from hopline.layers.transport.loop import running_loop

T = TypeVar("T")
STALL = 5.0  # seconds a bounded stream's consumer may take nothing while past its bound
BURST = 32  # times its bound a bounded stream may hold while its consumer takes items


class Interrupted(Exception):
    """The wait was interrupted (e.g. the HTTP client disconnected)."""


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


def stalled(since: float | None, queued: int, ceiling: int) -> tuple[bool, float | None]:
    """Past a stream's bound, is its consumer stalled? (the rule of :class:`Inbox` and of
    transports/sink.py). Yes once ``ceiling`` items wait, or when it took nothing for
    ``STALL`` seconds ``since`` the bound was first passed (None: just now, and the time to
    remember is returned). A consumer that takes items is reading, however many a burst
    put at once: what waits is then the producer's burst, not the client's debt."""
    if queued >= ceiling:
        return True, since
    now = monotonic()  # the loop's clock (asyncio's time() is monotonic()), without finding the loop
    if since is None:
        return False, now
    return now - since >= STALL, since


class Inbox(Generic[T]):
    """A FIFO with one consumer that parks on a future. Unbounded unless its owner sets
    ``limit`` (a stream's writer does): past it, once the consumer is stalled (:func:`stalled`:
    it took nothing for ``STALL`` seconds, or ``BURST`` times the limit wait) the queue is
    dropped, ``overflowed`` is set, later items are dropped too, and ``on_overflow`` is called
    once (to cut the stream)."""

    __slots__ = ("_items", "_waiter", "_interrupt", "limit", "overflowed", "on_overflow", "stalled_at")

    def __init__(self) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._waiter: asyncio.Future | None = None
        self._interrupt: BaseException | None = None
        self.limit: int | None = None
        self.overflowed = False
        self.on_overflow: Callable[[], object] | None = None
        self.stalled_at: float | None = None  # past the limit since, with nothing taken (see stalled())

    def put_nowait(self, item: T) -> None:
        if self.limit is not None and len(self._items) >= self.limit:
            stop, self.stalled_at = stalled(self.stalled_at, len(self._items), self.limit * BURST)
            if not stop:
                self._items.append(item)  # a burst the consumer has not had its turn at yet
                return
            if not self.overflowed:
                self.overflowed = True
                self._items.clear()
                if self.on_overflow is not None:
                    self.on_overflow()
            return
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def push_front(self, item: T) -> None:
        """Give back an item taken too early (its consumer handed over to another)."""
        self._items.appendleft(item)

    def interrupt_waiter(self, exc: BaseException) -> None:
        """Interrupt only the consumer waiting right now, if any (a hand-over)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def get_nowait(self) -> T:
        return self._items.popleft()

    def clear(self) -> None:
        """Drop every queued item (a consumer that will never read them)."""
        self._items.clear()

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)

    def interrupt(self, exc: BaseException) -> None:
        """Make the current (or next) wait raise ``exc`` once the inbox is empty."""
        self._interrupt = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self, timeout: float | None = None) -> T:
        """The next item; TimeoutError after ``timeout`` seconds; the interrupt if one is set."""
        while not self._items:
            if self._interrupt is not None:
                raise self._interrupt
            loop = running_loop()
            waiter = self._waiter = loop.create_future()
            handle = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
            try:
                await waiter
            finally:
                if self._waiter is waiter:  # a hand-over may have parked a new consumer already
                    self._waiter = None
                if handle is not None:
                    handle.cancel()
        self.stalled_at = None  # the consumer takes: not stalled
        return self._items.popleft()
