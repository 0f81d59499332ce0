"""The one interface every connection is seen through: a :class:`Channel`.

A channel carries whole JSON-RPC messages in both directions. Listeners turn a
client connection into a channel; upstreams turn a backend connection into one;
a mode joins channels through its pipeline. Five methods or fewer (STYLE 6).

``receive`` raises :class:`ChannelClosed` once the peer is gone, with a reason a
human can act on ("backend exited with status 1"). ``send`` on a closed channel
raises it too. ``aclose`` is idempotent.
"""

from __future__ import annotations

from typing import AsyncIterator, Awaitable, Callable, Protocol, runtime_checkable

from hopline.binding import Era
from hopline.jsonrpc import Message


class ChannelClosed(Exception):
    """The other end of a channel is gone (EOF, exit, reset, closed by us)."""

    def __init__(self, reason: str = "closed") -> None:
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class Channel(Protocol):
    async def send(self, message: Message) -> None: ...

    async def receive(self) -> Message: ...

    async def aclose(self) -> None: ...

    def is_closed(self) -> bool: ...


@runtime_checkable
class Pooled(Protocol):
    """A channel on a pooled worker (a stdio backend's child, ``transports/child_pool.py``)
    that its pool may ask back. Whoever holds it sets ``reclaim`` (give it up if idle:
    True if given) and ``listening`` (whether its client still holds a stream open: a
    one-shot client's session is taken back sooner)."""

    reclaim: Callable[[], Awaitable[bool]] | None
    listening: Callable[[], bool] | None

    @property
    def pid(self) -> int | None: ...

    def busy(self) -> bool: ...


@runtime_checkable
class Settles(Protocol):
    """An optional capability of a channel: answers may skip its queue. ``settle`` is None
    until the channel's one reader sets it; then the channel offers each answer to
    ``settle(message)`` as it is delivered, while nothing earlier waits in its queue (so
    nothing is overtaken), and queues it as usual only when ``settle`` returns False.
    Implemented by ``transports.inbound.Inbound`` (the HTTP upstreams: RpcPeer resolves the
    call's future) and ``layers.session.client_end.ClientEnd`` (http_session.py routes the
    answer to its POST's stream); tests/layers/transport/test_settles.py holds both to it.
    Readers look for it with ``isinstance(channel, Settles)``, once per channel."""

    settle: Callable[[Message], bool] | None


async def messages(channel: Channel) -> AsyncIterator[Message]:
    """Iterate a channel until it closes."""
    while True:
        try:
            yield await channel.receive()
        except ChannelClosed:
            return


@runtime_checkable
class Source(Protocol):
    """What a response writer reads from: a channel end that can wait with a
    timeout and be interrupted (the HTTP client went away) without a task."""

    async def receive(self, timeout: float | None = None) -> Message: ...

    def interrupt(self, exc: BaseException) -> None: ...


class Backends(Protocol):
    """What a client-facing listener asks of the mode behind it.

    ``open_session`` gives a channel dedicated to one handshake-era client session
    (Relay: its own stdio child by default). ``open_exchange`` gives a transient
    channel for one stateless exchange (a 2026-07-28 request, or a handshake-era
    request on a stateless listener); closing it before the response arrives
    cancels the request at the backend.
    """

    async def open_session(self, era: Era) -> Channel: ...

    async def open_exchange(self, era: Era) -> "Exchange": ...

    async def aclose(self) -> None: ...


class Exchange(Channel, Source, Protocol):
    """A channel for one stateless exchange (see ``Backends.open_exchange``)."""
