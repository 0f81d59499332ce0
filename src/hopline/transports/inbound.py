"""The receiving half shared by the HTTP upstreams: a bounded queue and a close reason.

Messages a backend sends (over POST responses, SSE streams, the GET stream) are
``put`` here in arrival order; ``receive`` hands them out and, once ``finish``
was called and the queue is drained, raises :class:`ChannelClosed` with the
reason. The bound makes a backend that floods us wait (backpressure) instead of
growing memory without limit. Frames that are not JSON-RPC are counted in
``garbage_frames`` and logged rate-limited (:meth:`dropped`).

``settle``: the one reader may take answers straight from ``put`` (RpcPeer resolves the
waiting call's future), skipping the queue and a hop through the reader task; only while
the queue is empty, so nothing put earlier (a progress notification on the same stream) is
overtaken. Measured with bench/profile_call.py (a proxied ``tools/call``): one task step
and a queue put/get fewer per call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Callable

from hopline.jsonrpc import Message
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.garbage import RateLimitedLog
from hopline.layers.transport.loop import running_loop

_EOF = object()


def _wake_first(waiters: collections.deque[asyncio.Future]) -> None:
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return


class Inbound:
    name: str

    def __init__(self, max_queue: int) -> None:
        # A bounded FIFO like asyncio.Queue(max_queue) (put waits for room, get for an item),
        # kept by hand: asyncio.Queue's put/get/empty/full are a dozen Python calls per
        # message (bench/profile_call.py --relay: ~25 per relayed call fewer).
        self._items: collections.deque = collections.deque()
        self._max = max_queue
        self._getters: collections.deque[asyncio.Future] = collections.deque()
        self._putters: collections.deque[asyncio.Future] = collections.deque()
        self._closed = False
        self._reason = "closed"
        self.garbage_frames = 0
        self.settle: Callable[[Message], bool] | None = None  # see the module docstring
        self._garbage = RateLimitedLog(logging.getLogger("hopline.http_upstream"))

    def dropped(self, fmt: str, *args: object) -> None:
        """Count a frame that is not JSON-RPC and say so (rate-limited)."""
        self.garbage_frames += 1
        self._garbage.warn(fmt, *args)

    async def put(self, message: Message) -> None:
        items = self._items
        settle = self.settle
        if settle is not None and not items and settle(message):
            return
        while 0 < self._max <= len(items):  # full: wait for room (backpressure)
            putter = running_loop().create_future()
            self._putters.append(putter)
            try:
                await putter
            except BaseException:
                putter.cancel()
                with contextlib.suppress(ValueError):
                    self._putters.remove(putter)
                if len(items) < self._max and not putter.cancelled():
                    _wake_first(self._putters)  # the room we were woken for goes to the next one
                raise
        items.append(message)
        if self._getters:
            _wake_first(self._getters)

    async def receive(self) -> Message:
        items = self._items
        while True:
            while not items:
                if self._closed:
                    raise ChannelClosed(f"{self.name}: {self._reason}")
                getter = running_loop().create_future()
                self._getters.append(getter)
                try:
                    await getter
                except BaseException:
                    getter.cancel()
                    with contextlib.suppress(ValueError):
                        self._getters.remove(getter)
                    if items and not getter.cancelled():
                        _wake_first(self._getters)  # the item we were woken for goes to the next one
                    raise
            item = items.popleft()
            if self._putters:
                _wake_first(self._putters)
            if item is not _EOF:
                return item

    def _finish(self, reason: str) -> None:
        """No more messages will come; ``receive`` ends once the queue is drained."""
        self._closed = True
        self._reason = reason
        if not 0 < self._max <= len(self._items):  # as put_nowait would (a full queue ends when drained)
            self._items.append(_EOF)
        _wake_first(self._getters)
