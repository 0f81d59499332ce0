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
import contextlib
import logging
from typing import Callable

from hopline.jsonrpc import Message
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.garbage import RateLimitedLog

_EOF = object()


class Inbound:
    name: str

    def __init__(self, max_queue: int) -> None:
        self._inbox: asyncio.Queue = asyncio.Queue(max_queue)
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
        inbox = self._inbox
        settle = self.settle
        if settle is not None and inbox.empty() and settle(message):
            return
        if inbox.full():
            await inbox.put(message)  # a full queue: wait for room (backpressure)
        else:
            inbox.put_nowait(message)  # the common case, without Queue.put's coroutine

    async def receive(self) -> Message:
        inbox = self._inbox
        while True:
            if inbox.empty():
                if self._closed:
                    raise ChannelClosed(f"{self.name}: {self._reason}")
                item = await inbox.get()
            else:
                item = inbox.get_nowait()  # something is queued: no Queue.get coroutine
            if item is not _EOF:
                return item

    def _finish(self, reason: str) -> None:
        """No more messages will come; ``receive`` ends once the queue is drained."""
        self._closed = True
        self._reason = reason
        with contextlib.suppress(asyncio.QueueFull):
            self._inbox.put_nowait(_EOF)
