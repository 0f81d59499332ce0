"""Federation mode (draft §5.6): a gateway whose backends are intermediaries themselves.

Composition, routing and policy are Forward mode's; what federation adds:

- **Membership.** Each member's conformance declaration (``/.well-known/agent-tool-proxy``
  at its origin, draft §4.2, read by transports/declarations.py) is fetched at start and
  again every ``routing.health_interval``; this gateway's own declaration lists, per
  member, its name, version, tier, modes and layers, or why none could be read (a stdio
  member, a backend that publishes none: it is likely a server, not an intermediary, and
  a warning says so). Credentials configured for a member are not sent with this request.
- **Loops across the hierarchy.** The hop sequence travels with every request the gateway
  makes for a client, not only with calls: backend handshakes and list fetches carry the
  sequence the client's first request came with plus this hop, and every request that
  arrives is checked, so a member that (directly or further down) leads back here is
  refused on its first handshake and left out of the surface instead of recursing.

Reading the members' declarations is compose/federation.py's; ``hopline serve`` keeps them
current with Layer 2's factory (``watch_members``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hopline.compose import parts
from hopline.compose.federation import watch_members
from hopline.composition import Composition
from hopline.modes import forward
from hopline.modes.forward import GATEWAY_OPTIONAL, gateway_layers

if TYPE_CHECKING:
    from hopline.compose.gateway import Gateway
    from hopline.config.schema import GatewayConfig

COMPOSITION = Composition(
    mode="federation",
    section="§5.6",
    handshake=(
        "dual-handshake (composed capabilities of member intermediaries; the hop sequence travels with handshakes, "
        "list fetches and calls)"
    ),
    layers=gateway_layers(
        parts.namespaced,
        "layers.routing.namespace",
        discovery=("compose.federation", "transports.declarations"),
        watch=watch_members,
    ),
    optional=GATEWAY_OPTIONAL,
)


def build(config: GatewayConfig, **kw: Any) -> Gateway:
    return forward.build(config, COMPOSITION, **kw)


__all__ = ["COMPOSITION", "build"]
