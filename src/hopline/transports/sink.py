"""One HTTP response stream's buffer: the messages a session routed to it, bounded.

A :class:`Sink` sits between a session's backend reader (which puts) and the HTTP
response writing that stream (which receives). It holds ``StreamLimits`` of unread
messages (count and bytes; a message alone always fits, so a large result passes), and
more only while its writer takes them: a burst put at once, before the writer had its
turn, is no debt of the client's. A put past the bound when the client is not reading
(its writer, blocked on the client's full socket, took nothing for ``inbox.STALL``
seconds) or past ``inbox.BURST`` times the bound (``BURST_BYTES`` times in bytes) whatever
it does, *overflows* the sink: its queue is dropped, its
writer is woken with :class:`~hopline.transports.admission.StreamOverflow` (through the
inbox if it waits there, through its ``guard`` if it is blocked in ``send`` on a client
that does not read), and everything put later is dropped. What the session does about
it (cancel the request, end the session) is http_session.py's business.
"""

from __future__ import annotations

import asyncio
import contextlib

from hopline.jsonrpc import Id, Message
from hopline.layers.transport.inbox import BURST, Inbox, stalled
from hopline.transports.admission import BURST_BYTES, StreamLimits, StreamOverflow
from hopline.layers.transport.loop import running_loop


class HandedOver(Exception):
    """This stream's consumer was replaced (the client resumed it with Last-Event-ID)."""


class Sink:
    """The messages bound for one HTTP response stream, at most ``limits`` of them unread.

    ``generation`` changes when another HTTP response takes the stream over (a
    resumption), so the previous writer knows to stop and give back what it took.
    ``guard`` is the writer's ``asyncio.timeout`` while it writes (None otherwise): a
    writer blocked in ``send`` on a client that does not read is woken by expiring it.
    """

    __slots__ = (
        "inbox",
        "stream_no",
        "seq",
        "request_id",
        "attached",
        "generation",
        "limits",
        "size",
        "overflowed",
        "guard",
    )

    def __init__(self, stream_no: int, request_id: Id | None = None, limits: StreamLimits = StreamLimits()) -> None:
        self.inbox: Inbox[Message] = Inbox()
        self.stream_no = stream_no
        self.seq = 0
        self.request_id = request_id
        self.attached = True
        self.generation = 0
        self.limits = limits
        self.size = 0  # bytes queued
        self.overflowed = False
        self.guard: asyncio.Timeout | None = None

    def put(self, message: Message) -> bool:
        """Queue ``message``; True if this put overflowed the buffer (the caller cuts the
        stream off). Once overflowed, a sink drops everything put on it."""
        if self.overflowed:
            return False
        size = len(message.encode())
        queued = self.inbox.qsize()
        limits = self.limits
        if queued and (queued >= limits.messages or self.size + size > limits.bytes) and self._stalled(queued, size):
            self.overflow()
            return True
        self.size += size
        self.inbox.put_nowait(message)
        return False

    def _stalled(self, queued: int, size: int) -> bool:
        """Past the bound: is the client not reading? (inbox.stalled: its writer took nothing
        for STALL seconds, or BURST times the bound waits; BURST_BYTES times in bytes)."""
        if self.size + size > self.limits.bytes * BURST_BYTES:
            return True
        stop, self.inbox.stalled_at = stalled(self.inbox.stalled_at, queued, self.limits.messages * BURST)
        return stop

    def overflow(self) -> None:
        """Drop what is queued and wake the writer, wherever it waits, with StreamOverflow."""
        self.overflowed = True
        self.inbox.clear()
        self.size = 0
        self.inbox.interrupt(StreamOverflow())
        if self.guard is not None:
            with contextlib.suppress(RuntimeError):  # already expiring
                self.guard.reschedule(running_loop().time())

    async def receive(self, timeout: float | None = None) -> Message:
        message = await self.inbox.get(timeout)
        self.size -= len(message.encode())
        return message

    def give_back(self, message: Message) -> None:
        """Return a message taken too early (the stream was resumed elsewhere)."""
        self.inbox.push_front(message)
        self.size += len(message.encode())

    def interrupt(self, exc: BaseException) -> None:
        self.inbox.interrupt(exc)

    def take_over(self) -> None:
        self.generation += 1
        self.attached = True
        self.inbox.interrupt_waiter(HandedOver())

    def next_event_id(self) -> str:
        self.seq += 1
        return f"{self.stream_no}-{self.seq}"
