"""The client-facing session table a ``listen:`` section describes.

One place turns ``ListenConfig``'s bounds into the table's plain arguments, so the
modes that serve HTTP clients (gateway, transparent level 2) build it alike; the relay
builds its own from its flags. Further tables of the same listener are
``table.sibling()``: they share its admission slots and counters.
"""

from __future__ import annotations

from hopline.config.schema import ListenConfig
from hopline.transports.admission import StreamLimits
from hopline.transports.http_session import SessionTable


def session_table(listen: ListenConfig) -> SessionTable:
    return SessionTable(
        max_sessions=listen.max_sessions,
        idle_ttl=listen.session_ttl,
        max_pending=listen.max_pending_sessions,
        handshake_timeout=listen.handshake_timeout,
        stream_limits=StreamLimits(listen.stream_buffer_messages, listen.stream_buffer_bytes),
    )
