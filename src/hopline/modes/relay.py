"""Relay mode (draft §5.1): transport adaptation, protocol-unaware.

It composes Layer 1 only (``hopline.transports``: the HTTP and SSE listeners, hopline's
own stdio, the child pool, the upstream clients), plus, for the connections it shares,
Layer 6's id-remapping multiplexer (``layers/session/mux.py``, inside the connectors of
compose/connectors.py). A relay forwards envelopes and never inspects content: it reads
what it must to move a message (``method``, ``id``, the era, the mirror headers) and
nothing else; it never answers ``initialize`` itself (§7.1: no dual handshake).

Its process (a listener in front of one backend, or our stdio in front of a remote
server) is commands/serve_relay.py; the command line is commands/relay.py.
"""

from __future__ import annotations

from hopline.composition import Composition, layer

COMPOSITION = Composition(
    mode="relay",
    section="§5.1",
    handshake="single-handshake passthrough (MUST NOT dual-handshake)",
    layers=(
        layer(
            1,
            "transports.streamable_http_server",
            "transports.sse_server",
            "transports.stdio",
            "transports.child_pool",
            "compose.connectors",
        ),
    ),
)
