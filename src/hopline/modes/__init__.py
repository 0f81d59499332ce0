"""The modes, each a composition of layers (:class:`~hopline.composition.Composition`):
what each module declares is what ``hopline declare`` reports and what is built."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from hopline.composition import Composition
from hopline.modes import conversion, federation, forward, relay, reverse, sidecar, transparent

if TYPE_CHECKING:
    from hopline.compose.gateway import Gateway
    from hopline.config.schema import GatewayConfig

COMPOSITIONS: dict[str, Composition] = {
    m.COMPOSITION.mode: m.COMPOSITION for m in (relay, forward, reverse, transparent, sidecar, federation, conversion)
}
# The modes whose process is a gateway (``hopline serve`` builds one of these from its configuration).
GATEWAYS: dict[str, Callable[..., Gateway]] = {
    m.COMPOSITION.mode: m.build for m in (forward, reverse, sidecar, federation)
}


def build(config: GatewayConfig, **kw: Any) -> Gateway:
    """The gateway ``config.mode`` names, built from that mode's composition."""
    if config.mode not in GATEWAYS:
        raise ValueError(f"mode {config.mode} is not a gateway mode ({', '.join(sorted(GATEWAYS))})")
    return GATEWAYS[config.mode](config, **kw)
