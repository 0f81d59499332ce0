"""Sidecar mode (§5.5): Reverse mode next to one co-located backend, with every message
mediated: a method the gateway does not know is passed on to the backend through the
call layers (policy sees ``mcp.method``), and so are the client's notifications.
"""

from __future__ import annotations

from hopline.composition import GATEWAY_OPTIONAL, Composition, gateway_layers
from hopline.modes.forward import build

COMPOSITION = Composition(
    mode="sidecar",
    section="§5.5",
    handshake=(
        "dual-handshake (the co-located backend's own identity and surface; every message mediated, unknown methods "
        "forwarded)"
    ),
    layers=gateway_layers("layers.routing.uris"),
    optional=GATEWAY_OPTIONAL,
)

__all__ = ["COMPOSITION", "build"]
