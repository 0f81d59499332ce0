"""Forward mode (draft §5.2): many backends behind one endpoint.

Every backend's tools and prompts are namespaced ``{backend}__{name}``, resources and
task ids rewritten to name their backend; lists fan out to every backend and invokes
go to exactly one. The gateway answers the handshake itself (dual handshake, §7.1).

The gateway modes share one stack (:func:`gateway_layers`); they differ in their Layer 3
factory (namespaced or one backend), in what a method the gateway does not know gets
(refused, or passed on: Sidecar) and in what Layer 2 watches (Federation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from hopline.compose import parts
from hopline.composition import Composition, Layer, layer

if TYPE_CHECKING:
    from hopline.compose.gateway import Gateway
    from hopline.config.schema import GatewayConfig

# Present when the configuration uses them; a mode that leaves one out refuses its settings.
GATEWAY_OPTIONAL = (
    layer(4, "layers.resilience", "compose.resilience", build=parts.resilience),
    layer(5, "layers.policy", "compose.policy", build=parts.policy),
)


def gateway_layers(
    routing: Callable[..., Any],
    *modules: str,
    discovery: tuple[str, ...] = (),
    watch: Callable[..., Any] | None = None,
) -> tuple[Layer, ...]:
    """Forward's stack with ``routing`` as Layer 3's factory; ``discovery``: more Layer 2 modules,
    ``watch``: what Layer 2 keeps watching while serving (``watch(config, into)``, Federation)."""
    return (
        layer(
            1, "compose.connectors", "transports.streamable_http_server", "transports.sse_server", "transports.stdio"
        ),
        layer(2, "layers.discovery.registry", "layers.discovery.backend", *discovery, build=watch),
        layer(3, "layers.routing.tables", *modules, build=routing),
        layer(
            6,
            "layers.session.gateway_session",
            "layers.session.links",
            "layers.session.sharing",
            build=parts.shared_sessions,
        ),
        layer(7, "layers.capability.lists", "layers.capability.compose", "compose.toolmodes"),
    )


COMPOSITION = Composition(
    mode="forward",
    section="§5.2",
    handshake="dual-handshake (composed capabilities)",
    layers=gateway_layers(parts.namespaced, "layers.routing.namespace"),
    optional=GATEWAY_OPTIONAL,
)


def build(config: GatewayConfig, composition: Composition = COMPOSITION, **kw: Any) -> Gateway:
    """A gateway of ``composition`` (this mode's unless given) serving ``config``."""
    from hopline.compose.gateway import Gateway

    return Gateway(config, composition, **kw)
