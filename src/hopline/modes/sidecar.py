"""Sidecar mode (§5.5): Reverse mode next to one co-located backend, with every message
mediated: a method the gateway does not know is passed on to the backend through the
call layers (policy sees ``mcp.method``), and so are the client's notifications.
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
    mode="sidecar",
    section="§5.5",
    handshake=(
        "dual-handshake (the co-located backend's own identity and surface; every message mediated, unknown methods "
        "forwarded)"
    ),
    layers=gateway_layers(parts.single_backend, "layers.routing.uris"),
    optional=GATEWAY_OPTIONAL,
    unknown="pass on",
)


def build(config: GatewayConfig, **kw: Any) -> Gateway:
    return forward.build(config, COMPOSITION, **kw)


__all__ = ["COMPOSITION", "build"]
