"""Id remapping for many clients over one backend connection (sans-io).

Clients choose their own JSON-RPC ids and progress tokens, so two clients on one
shared backend connection collide (test-battery F9, BAD-09). :class:`IdMap` gives
every forwarded request a fresh unguessable integer id toward the backend
(:func:`~hopline.layers.transport.wireids.fresh_id`, below 2**53) and remembers
``backend id → (owner, original id)``, restoring the original value *and JSON
type* on the way back (reference/mcp-wire.md §9). Progress tokens get the same
treatment (``hl-<backend id>``). Server→client requests get fresh ids toward their client, and the
client's answer is mapped back to the backend's id.

Pure data: no I/O, no event loop; the async shell is ``mux.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Hashable

from hopline.jsonrpc import Id
from hopline.layers.transport.wireids import fresh_id


@dataclass(slots=True)
class Outstanding:
    owner: Hashable
    client_id: Id
    progress_token: Any = None


@dataclass
class IdMap:
    """Both directions of id translation for one shared backend connection."""

    _next: itertools.count = field(default_factory=lambda: itertools.count(1))  # our ids toward clients
    # client → backend requests
    by_backend_id: dict[int, Outstanding] = field(default_factory=dict)
    by_client: dict[tuple[Hashable, Id], int] = field(default_factory=dict)
    # progress tokens we minted → backend id of the request that carries it
    tokens: dict[str, int] = field(default_factory=dict)
    # backend → client requests: our id toward the client → (owner, backend id)
    inbound: dict[int, tuple[Hashable, Id]] = field(default_factory=dict)

    def outbound(self, owner: Hashable, client_id: Id, progress_token: Any = None) -> tuple[int, str | None]:
        """Register a client request; returns its backend id and rewritten token."""
        backend_id = fresh_id()
        while backend_id in self.by_backend_id:
            backend_id = fresh_id()
        self.by_backend_id[backend_id] = Outstanding(owner, client_id, progress_token)
        self.by_client[(owner, client_id)] = backend_id
        token = None
        if progress_token is not None:
            token = f"hl-{backend_id}"
            self.tokens[token] = backend_id
        return backend_id, token

    def answered(self, backend_id: Any) -> Outstanding | None:
        """The backend answered ``backend_id``: whose was it? (None: unknown or duplicate)."""
        if type(backend_id) is not int:
            return None
        entry = self.by_backend_id.pop(backend_id, None)
        if entry is not None:
            self.by_client.pop((entry.owner, entry.client_id), None)
            if entry.progress_token is not None:
                self.tokens.pop(f"hl-{backend_id}", None)
        return entry

    def backend_id_for(self, owner: Hashable, client_id: Any) -> int | None:
        try:
            return self.by_client.get((owner, client_id))
        except TypeError:  # unhashable id from a broken client
            return None

    def progress_owner(self, token: Any) -> Outstanding | None:
        backend_id = self.tokens.get(token) if isinstance(token, str) else None
        return None if backend_id is None else self.by_backend_id.get(backend_id)

    def owned_by(self, owner: Hashable) -> list[int]:
        return [bid for bid, entry in self.by_backend_id.items() if entry.owner == owner]

    def forget_owner(self, owner: Hashable) -> list[int]:
        """Drop everything an owner had outstanding; returns the backend ids."""
        ids = self.owned_by(owner)
        for bid in ids:
            self.answered(bid)
        for our_id in [k for k, (o, _) in self.inbound.items() if o == owner]:
            del self.inbound[our_id]
        return ids

    def server_request(self, owner: Hashable, backend_request_id: Id) -> int:
        our_id = next(self._next)
        self.inbound[our_id] = (owner, backend_request_id)
        return our_id

    def server_request_answered(self, owner: Hashable, our_id: Any) -> Id | None:
        entry = self.inbound.get(our_id) if type(our_id) is int else None
        if entry is None or entry[0] != owner:
            return None
        del self.inbound[our_id]
        return entry[1]
