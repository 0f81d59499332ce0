"""The factories the gateway modes' compositions name (``hopline/modes/*.py``), one per
layer that differs between modes; :class:`~hopline.compose.gateway.Gateway` builds a
gateway by calling them (:mod:`hopline.composition` says what each takes and returns).

Each imports its layer when called, so that reading the compositions (``hopline
declare``, the command line) does not load the layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hopline.config.schema import GatewayConfig


# -- Layer 3: routing ---------------------------------------------------------------------
def namespaced(config: GatewayConfig, cursors: Any, *, pass_on: bool = False) -> Any:
    """Every backend's names namespaced ``{backend}{delimiter}{name}``, URIs and task ids
    rewritten to name their backend (Forward, Federation)."""
    from hopline.layers.routing.tables import Routes

    r = config.routing
    return Routes.build(
        delimiter=r.delimiter,
        max_name_length=r.max_name_length,
        uri_scheme=r.uri_scheme,
        pass_on=pass_on,
        cursors=cursors,
    )


def single_backend(config: GatewayConfig, cursors: Any, *, pass_on: bool = False) -> Any:
    """Everything routed to the one enabled backend, its names unchanged (Reverse, Sidecar)."""
    from hopline.layers.routing.tables import Routes

    r = config.routing
    return Routes.build(
        delimiter=r.delimiter,
        max_name_length=r.max_name_length,
        uri_scheme=r.uri_scheme,
        single=next(b for b, spec in config.backends.items() if spec.enabled),
        pass_on=pass_on,
        cursors=cursors,
    )


# -- Layer 4: resilience (optional) ---------------------------------------------------------
def resilience(config: GatewayConfig) -> Any:
    """Breaker, retry and timeouts as configured (compose/resilience.py)."""
    from hopline.compose.resilience import build

    return build(config)


# -- Layer 5: policy (optional) -------------------------------------------------------------
def policy(config: GatewayConfig, *, tap: Any = None) -> tuple[list[Any], list[Any]]:
    """The surface and call layers of the configured policy (compose/policy.py)."""
    from hopline.compose.policy import build

    return build(config, tap=tap)


# -- Layer 6: session -----------------------------------------------------------------------
def shared_sessions(hub: Any) -> Any:
    """The store of backend sessions shared between client sessions (``share:``)."""
    from hopline.layers.session.sharing import Sharing

    return Sharing(hub)
