"""Forward mode (draft §5.2): many backends behind one endpoint.

Every backend's tools and prompts are namespaced ``{backend}__{name}``, resources and
task ids rewritten to name their backend; lists fan out to every backend and invokes
go to exactly one. The gateway answers the handshake itself (dual handshake, §7.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hopline.composition import GATEWAY_OPTIONAL, Composition, gateway_layers

if TYPE_CHECKING:
    from hopline.compose.gateway import Gateway
    from hopline.config.schema import GatewayConfig

COMPOSITION = Composition(
    mode="forward",
    section="§5.2",
    handshake="dual-handshake (composed capabilities)",
    layers=gateway_layers("layers.routing.namespace"),
    optional=GATEWAY_OPTIONAL,
)


def build(config: GatewayConfig) -> Gateway:
    from hopline.compose.gateway import Gateway

    return Gateway(config)
