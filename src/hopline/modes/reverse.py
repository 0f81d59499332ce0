"""Reverse mode (draft §5.3): one backend behind the gateway, its names, URIs, task ids
and identity unchanged (Layer 3 routes everything to it, namespacing nothing), with the
gateway's policy, resilience and observability in front of it.
"""

from __future__ import annotations

from hopline.composition import GATEWAY_OPTIONAL, Composition, gateway_layers
from hopline.modes.forward import build

COMPOSITION = Composition(
    mode="reverse",
    section="§5.3",
    handshake="dual-handshake (the single backend's surface, unprefixed)",
    layers=gateway_layers("layers.routing.uris"),
    optional=GATEWAY_OPTIONAL,
)

__all__ = ["COMPOSITION", "build"]
