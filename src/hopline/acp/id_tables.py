"""Request ids, rewritten per connection, and the tables that map answers back.

Every connection the conductor owns has its own id space (reference §1.1): a
request arriving on connection A with id X is sent on connection B under a
fresh id Y that the conductor mints for B. :class:`Hops` remembers
``(B, Y) → (A, X)`` so B's answer goes back to A under X, and the reverse index
``(A, X) → (B, Y)`` so a ``$/cancel_request`` from A can be translated hop by
hop. Ids are minted, never reused while pending, and returned exactly (JSON
type included) to whoever chose them (DESIGN §3.3).

When a connection is lost, :meth:`Hops.lose` hands back what was awaited from
it (to be answered with an error) and what it had sent elsewhere (to be
cancelled there, its answers dropped as orphans).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hopline.jsonrpc import Id, Message

# Why the conductor awaits an answer; decides what it does with the answer.
FORWARD = 0  # an ordinary forwarded request: map the id back and pass it on
PROBE = 1  # a proxy handshake offered to a component whose dialect is not locked yet
PARENT_INIT = 2  # proxy mode: the answer to our parent's handshake (echo the role)


@dataclass(slots=True)
class Pending:
    origin: int | None  # connection the request came from; None once that one is gone
    origin_id: Id | None
    method: str
    kind: int = FORWARD
    position: int = 0  # chain position the request was sent to
    source: int = 0  # chain position it came from (for traces)
    params: Any = None  # kept for PROBE, to offer the next dialect
    dialect: str | None = None  # PROBE / PARENT_INIT: which handshake this is
    # Sees the answer first (whatever it is, the conductor's own errors included)
    # and returns what goes on to ``origin``, or None to stop it here.
    then: Callable[[Message], Message | None] | None = None
    setup: Any = None  # session setup requests: (params as delivered, MCP server keys)
    ends: str | None = None  # session/close|delete: the session it ends


class Hops:
    __slots__ = ("_next", "_pending", "_forwarded")

    def __init__(self, connections: int) -> None:
        self._next = [0] * connections
        self._pending: list[dict[Id, Pending]] = [{} for _ in range(connections)]
        self._forwarded: list[dict[Id, tuple[int, Id]]] = [{} for _ in range(connections)]

    def open(self, conn: int, pending: Pending) -> int:
        """Mint an id on ``conn`` for a request we are about to send there."""
        self._next[conn] += 1
        new_id = self._next[conn]
        self._pending[conn][new_id] = pending
        if pending.origin is not None and pending.origin_id is not None:
            self._forwarded[pending.origin][pending.origin_id] = (conn, new_id)
        return new_id

    def close(self, conn: int, msg_id: Any) -> Pending | None:
        """The answer to ``msg_id`` arrived on ``conn``: who was waiting for it?"""
        try:
            pending = self._pending[conn].pop(msg_id)
        except (KeyError, TypeError):  # unknown, or an unhashable id from a broken peer
            return None
        if pending.origin is not None:
            self._forwarded[pending.origin].pop(pending.origin_id, None)
        return pending

    def where(self, origin: int, origin_id: Any) -> tuple[int, Id] | None:
        """Where the request ``origin_id`` from ``origin`` went (for ``$/cancel_request``)."""
        try:
            return self._forwarded[origin].get(origin_id)
        except TypeError:
            return None

    def lose(self, conn: int) -> tuple[list[Pending], list[tuple[int, Id]]]:
        """``conn`` is gone: (requests awaited from it, requests it had sent elsewhere)."""
        awaited = list(self._pending[conn].values())
        self._pending[conn].clear()
        for pending in awaited:
            if pending.origin is not None:
                self._forwarded[pending.origin].pop(pending.origin_id, None)
        sent = list(self._forwarded[conn].values())
        self._forwarded[conn].clear()
        for target, target_id in sent:
            orphan = self._pending[target].get(target_id)
            if orphan is not None:
                orphan.origin = orphan.origin_id = None
        return awaited, sent

    def outstanding(self, conn: int) -> int:
        """Requests the conductor awaits an answer to on ``conn``."""
        return len(self._pending[conn])

    def in_flight_from(self, conn: int) -> int:
        """Requests ``conn`` sent that are still awaiting their answer somewhere."""
        return len(self._forwarded[conn])

    def __repr__(self) -> str:
        return f"<Hops pending={[len(p) for p in self._pending]}>"
