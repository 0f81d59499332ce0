"""Transparent mode (draft §5.4): an HTTP intermediary that the client does not know
about, as a composition. Interception is the surrounding network's job (see
``config/transparent.py``): a request reaches hopline addressed to its original
destination.

Level 1 (transport-aware, bodies streamed unread):
  Layer 1  ``transports/transparent.py``: :class:`TransparentProxy`, the byte-for-byte
           HTTP forwarder, with hopline's own declaration and ``/healthz``
  Layer 5  ``layers/policy/transparent.py``: the header policy (CEL over ``http``),
           handed to the proxy as ``compose.transparent.Rules``

Level 2 (protocol-aware, every layer): the same front, and behind it
:class:`~hopline.transports.transparent.Endpoints`, a Reverse-mode ``Gateway`` per
destination and MCP endpoint path, each with its session table and Streamable HTTP
listener, the client's own credential passed through and the caller told apart by it
(``compose/transparent.py``).

Its process (``hopline serve`` with ``mode: transparent``) is commands/serve_transparent.py.
"""

from __future__ import annotations

from hopline.composition import Composition, layer

# Level 1; level 2 runs a Reverse-mode stack per destination behind the same front.
COMPOSITION = Composition(
    mode="transparent",
    section="§5.4",
    handshake="level 1: single-handshake passthrough (MUST NOT dual-handshake)",
    layers=(layer(1, "transports.transparent"),),
    optional=(layer(5, "layers.policy.transparent", "compose.transparent"),),
)
