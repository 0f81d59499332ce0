"""The client-facing session table a ``listen:`` section describes.

One place turns ``ListenConfig``'s bounds into the table's plain arguments, so the
modes that serve HTTP clients (gateway, transparent level 2) build it alike; the relay
builds its own from its flags. Further tables of the same listener are
``table.sibling()``: they share its admission slots and counters.
"""

from __future__ import annotations

from typing import Any

from hopline.config.schema import ListenConfig
from hopline.config.state import StateConfig
from hopline.transports.admission import StreamLimits
from hopline.transports.session_table import SessionTable


def session_table(listen: ListenConfig, state: StateConfig | None = None) -> SessionTable:
    """The table; with ``state``, its ids sealed and its mutable part shared (Redis, or
    this process without ``redis_url``)."""
    return SessionTable(
        max_sessions=listen.max_sessions,
        idle_ttl=listen.session_ttl,
        max_pending=listen.max_pending_sessions,
        handshake_timeout=listen.handshake_timeout,
        stream_limits=StreamLimits(listen.stream_buffer_messages, listen.stream_buffer_bytes),
        endpoint=listen.path,
        **replicas(state),
    )


def replicas(state: StateConfig | None) -> dict[str, Any]:
    """A session table's arguments for ``state`` (none without it): the seal, the shared store."""
    if state is None:
        return {}
    from hopline.transports.session_seal import SessionSeal
    from hopline.transports.shared_sessions import RedisSessions

    shared = None
    if state.redis_url is not None:
        shared = RedisSessions.from_url(state.redis_url, keys=state.keys(), prefix=state.prefix, timeout=state.timeout)
    return dict(seal=SessionSeal(state.keys()), shared=shared, max_age=state.max_age, on_store_down=state.on_store_down)
