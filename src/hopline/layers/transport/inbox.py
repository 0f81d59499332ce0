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
from typing import Callable, Generic, TypeVar

from hopline.layers.transport.loop import running_loop

T = TypeVar("T")


class Interrupted(Exception):
    """The wait was interrupted (e.g. the HTTP client disconnected)."""


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class Inbox(Generic[T]):
    """A FIFO with one consumer that parks on a future. Unbounded unless its owner sets
    ``limit`` (a stream's writer does): past it the queue is dropped, ``overflowed`` is set,
    later items are dropped too, and ``on_overflow`` is called once (to cut the stream)."""

    __slots__ = ("_items", "_waiter", "_interrupt", "limit", "overflowed", "on_overflow")

    def __init__(self) -> None:
        self._items: collections.deque[T] = collections.deque()
        self._waiter: asyncio.Future | None = None
        self._interrupt: BaseException | None = None
        self.limit: int | None = None
        self.overflowed = False
        self.on_overflow: Callable[[], object] | None = None

    def put_nowait(self, item: T) -> None:
        if self.limit is not None and len(self._items) >= self.limit:
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
        return self._items.popleft()
