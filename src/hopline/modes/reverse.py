"""Reverse mode (draft §5.3): one backend behind the gateway, its names, URIs, task ids
and identity unchanged (Layer 3 routes everything to it, namespacing nothing), with the
gateway's policy, resilience and observability in front of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hopline.compose import parts
from hopline.composition import Composition
from hopline.modes import forward
from hopline.modes.forward import GATEWAY_OPTIONAL, gateway_layers

if TYPE_CHECKING:
    from hopline.compose.gateway import Gateway
    from hopline.config.schema import GatewayConfig

COMPOSITION = Composition(
    mode="reverse",
    section="§5.3",
    handshake="dual-handshake (the single backend's surface, unprefixed)",
    layers=gateway_layers(parts.single_backend, "layers.routing.uris"),
    optional=GATEWAY_OPTIONAL,
)


def build(config: GatewayConfig, **kw: Any) -> Gateway:
    return forward.build(config, COMPOSITION, **kw)


__all__ = ["COMPOSITION", "build"]
