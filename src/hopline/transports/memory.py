"""An in-memory channel pair, for tests and for in-process composition.

``memory_pair()`` returns two channels; what one sends, the other receives, in
order. Closing either end closes both directions once queued messages drain.
"""

from __future__ import annotations

import asyncio

from hopline.jsonrpc import Message
from hopline.layers.transport.channel import ChannelClosed

_EOF = object()


class MemoryChannel:
    def __init__(self, inbox: asyncio.Queue, outbox: asyncio.Queue, name: str) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._closed = False
        self._peer: MemoryChannel | None = None
        self.name = name

    async def send(self, message: Message) -> None:
        if self._closed or (self._peer is not None and self._peer._closed):
            raise ChannelClosed(f"{self.name}: closed")
        self._outbox.put_nowait(message)

    async def receive(self) -> Message:
        if self._closed and self._inbox.empty():
            raise ChannelClosed(f"{self.name}: closed")
        item = await self._inbox.get()
        if item is _EOF:
            self._inbox.put_nowait(_EOF)  # later receives see EOF too
            raise ChannelClosed(f"{self.name}: peer closed")
        return item

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._outbox.put_nowait(_EOF)
            self._inbox.put_nowait(_EOF)

    def is_closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"<MemoryChannel {self.name} closed={self._closed} queued={self._inbox.qsize()}>"


def memory_pair(name: str = "memory") -> tuple[MemoryChannel, MemoryChannel]:
    a_to_b: asyncio.Queue = asyncio.Queue()
    b_to_a: asyncio.Queue = asyncio.Queue()
    a = MemoryChannel(b_to_a, a_to_b, f"{name}[a]")
    b = MemoryChannel(a_to_b, b_to_a, f"{name}[b]")
    a._peer, b._peer = b, a
    return a, b
