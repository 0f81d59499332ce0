"""One child of a stdio backend's pool, as its owner holds it: :class:`Lease` (a Channel
that counts what is in flight, for idleness, and returns its slot once the child is reaped),
and :class:`AtCapacity`, the refusal when the pool has no slot to give (child_pool.py)."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Awaitable, Callable, Protocol

from hopline.jsonrpc import Message, UnavailableError


class Pool(Protocol):
    """What a lease needs of its pool (child_pool.ChildPool): a name, and to be told
    when its child has been reaped."""

    name: str

    def _returned(self, lease: Lease) -> None: ...


class AtCapacity(UnavailableError):
    """The backend has as many children as it may; none could be taken back in time.

    Where it ends a session creation (the relay), the listener answers it as HTTP 503 with
    ``Retry-After``; inside a gateway session it is a JSON-RPC error (-31001) like any other."""

    http_status = 503

    def __init__(self, name: str, cap: int, retry_after: float) -> None:
        super().__init__(
            f"backend {name} is at its cap of {cap} child process{'es' if cap != 1 else ''}; "
            f"retry in {retry_after:g} s",
            backend=name,
            reason="at_capacity",
        )
        self.data["retry_after"] = retry_after
        self.retry_after = retry_after
        self.http_headers = {"retry-after": str(max(1, math.ceil(retry_after)))}


class Lease:
    """One child handed to one owner: a Channel over it that returns the slot on close.

    ``reclaim`` is the owner's say in reaping: an async callable that gives the child up
    (closing this lease) and returns True, or returns False to keep it. None (the
    default): never reclaimed (shared children, sessions whose owner cannot recover).
    ``listening``, set by an owner that knows it: whether a client holds a stream open on
    this child's session (one that holds none and is idle has most likely left).
    """

    __slots__ = (
        "child",
        "pool",
        "reclaim",
        "listening",
        "last_active",
        "requests",
        "_pending_out",
        "_pending_in",
        "_released",
        "_closing",
    )

    def __init__(self, child: Any, pool: Pool) -> None:
        self.child = child
        self.pool = pool
        self.reclaim: Callable[[], Awaitable[bool]] | None = None
        self.listening: Callable[[], bool] | None = None
        self.last_active = time.monotonic()
        self.requests = 0  # requests sent to the child: 1 after a bare handshake
        self._pending_out: set[Any] = set()  # our requests the child has not answered
        self._pending_in: set[Any] = set()  # the child's requests we have not answered
        self._released = False
        self._closing: asyncio.Future[None] | None = None

    @property
    def pid(self) -> int | None:
        return getattr(getattr(self.child, "process", None), "pid", None)

    async def send(self, message: Message) -> None:
        body = message.body
        if "id" in body:
            if "method" in body:
                self._pending_out.add(body["id"])
                self.requests += 1
            else:
                self._pending_in.discard(body["id"])
        elif body.get("method") == "notifications/cancelled" and isinstance(body.get("params"), dict):
            self._pending_out.discard(body["params"].get("requestId"))  # it may never be answered
        self.last_active = time.monotonic()
        await self.child.send(message)

    async def receive(self) -> Message:
        message = await self.child.receive()
        body = message.body
        if "id" in body:
            (self._pending_in.add if "method" in body else self._pending_out.discard)(body["id"])
        self.last_active = time.monotonic()
        return message

    def busy(self) -> bool:
        """Requests in flight: ours to the child, or the child's to a client that listens.
        A child's request to a client holding no stream open (a roots/list to a one-shot
        client that has exited) would otherwise keep its child busy for good."""
        if self._pending_out:
            return True
        return bool(self._pending_in) and (self.listening is None or self.listening())

    def idle_for(self, now: float | None = None) -> float | None:
        """Seconds since the last message, or None while anything is in flight."""
        if self.busy():
            return None
        return (time.monotonic() if now is None else now) - self.last_active

    def alive(self) -> bool:
        return self.child.is_alive()

    async def aclose(self) -> None:
        """Close the child; its slot is free once it has been reaped (so a sampled
        process count never sees more children than the cap)."""
        if self._closing is None:
            self._released = True
            # In a task of its own: a closer that is cancelled half-way (a timeout, a client
            # gone) neither leaves the child running nor frees its slot before it is reaped.
            self._closing = asyncio.ensure_future(self.child.aclose())
            self._closing.add_done_callback(lambda _t: self.pool._returned(self))
        await asyncio.shield(self._closing)

    def is_closed(self) -> bool:
        return self._released or self.child.is_closed()

    def __repr__(self) -> str:
        return f"<Lease {self.pool.name} pid={self.pid} released={self._released}>"
