"""What an HTTP listener may hold for its clients: session creations in flight, stream buffers.

Admission (DESIGN §7, test-battery LOAD-08): creating a session is the expensive step
(a child process, a remote session, a gateway session's backends), so a burst of them
is shed, not queued. A creation holds one :class:`Admission` slot from arrival until it
is done (a handshake-era ``initialize`` POST until its answer is written; a legacy
``GET /sse`` until its session exists). Past ``max_pending`` slots, or once a table
holds ``max_sessions`` sessions (creations in flight counted), the request is answered
at once with :class:`Overloaded`: HTTP 503, ``Retry-After`` and a JSON-RPC error naming
the request's id. Nothing waits for a slot, so the listener keeps answering everyone
else (``/healthz``, other sessions, parse errors) whatever the burst.

Buffers: every message bound for a response stream waits in that stream's buffer until
the client reads it; :class:`StreamLimits` bounds it (messages and bytes). A client
that does not read makes the socket's write block, and the buffer then fills: past the
bound, once the writer took nothing for a while (or far past it), the stream is cut off
(sink.py says when, http_session.py what follows). :class:`BoundedLog`
is the same bound for the per-session backlog and resumability log, which drop their
oldest entries instead.

The counters are plain integers on the :class:`Admission` a listener's tables share
(``counts()``), for the admin ``/metrics`` to read.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any, Generic, Iterator, TypeVar

from hopline.jsonrpc import Id, UnavailableError

MiB = 1024 * 1024
BURST_BYTES = 2  # times its byte bound a stream may hold while its client reads (sink.py; messages: inbox.BURST)
T = TypeVar("T")


class Overloaded(UnavailableError):
    """The listener refuses a new session for now: HTTP 503 with ``Retry-After``."""

    http_status = 503

    def __init__(self, message: str, *, retry_after: int, limit: str, request_id: Id | None = None) -> None:
        super().__init__(message, reason="overloaded", request_id=request_id)
        self.data.update(limit=limit, retryAfter=retry_after)
        self.http_headers = {"retry-after": str(retry_after)}


class StreamOverflow(Exception):
    """The stream's client did not read, and its buffer reached the bound."""


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """The bound of one stream's buffer; a message alone always fits (a large result)."""

    messages: int = 1000
    bytes: int = 8 * MiB


class Admission:
    """Slots for session creations in flight, shared by one listener's session tables,
    and the counters of what the listener refused or cut off."""

    __slots__ = (
        "max_pending",
        "pending",
        "shed_busy",
        "shed_full",
        "handshake_timeouts",
        "abandoned",
        "overflows",
        "dropped",
        "resumed",
        "store_unavailable",
        "store_invalid",
        "forged",
    )

    def __init__(self, max_pending: int = 16) -> None:
        self.max_pending = max_pending
        self.pending = 0
        self.shed_busy = 0  # refused: max_pending creations already in flight
        self.shed_full = 0  # refused: max_sessions reached
        self.handshake_timeouts = 0  # creations answered with a timeout error
        self.abandoned = 0  # creations whose client left before the answer
        self.overflows = 0  # streams cut off because their client did not read
        self.dropped = 0  # backlog / event-log entries dropped at their bound
        self.resumed = 0  # sessions made elsewhere (another replica, or before a restart) resumed here
        self.store_unavailable = 0  # resumes refused because the shared session store did not answer
        self.store_invalid = 0  # resumes refused because the store answered what hopline did not write
        self.forged = 0  # messages from the store dropped: not signed with the session key, or replayed

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "max_pending"}

    def __repr__(self) -> str:
        return f"<Admission {self.pending}/{self.max_pending} {self.counts()}>"


class Slot:
    """One admitted creation; leaving the ``with`` block gives the slot back."""

    __slots__ = ("_admission", "_table", "_held")

    def __init__(self, admission: Admission, table: Any) -> None:  # table: a SessionTable (its own count)
        self._admission, self._table, self._held = admission, table, True
        admission.pending += 1
        table.pending += 1

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Give the slot back (idempotent), e.g. before slow clean-up that needs none."""
        if self._held:
            self._held = False
            self._admission.pending -= 1
            self._table.pending -= 1


class BoundedLog(Generic[T]):
    """A FIFO bounded by count and bytes that drops its oldest entries (counted)."""

    __slots__ = ("_items", "_limits", "_size", "_counters")

    def __init__(self, limits: StreamLimits, counters: Admission) -> None:
        self._items: collections.deque[tuple[int, T]] = collections.deque()
        self._limits = limits
        self._size = 0
        self._counters = counters

    def append(self, item: T, size: int) -> None:
        self._items.append((size, item))
        self._size += size
        while len(self._items) > 1 and (len(self._items) > self._limits.messages or self._size > self._limits.bytes):
            dropped, _ = self._items.popleft()
            self._size -= dropped
            self._counters.dropped += 1

    def popleft(self) -> T:
        size, item = self._items.popleft()
        self._size -= size
        return item

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return (item for _, item in self._items)

    @property
    def size(self) -> int:
        return self._size
