"""Forward/Reverse mode as a composition of layers: build the :class:`Pipeline` a
gateway runs from its configuration (DESIGN §1: a mode is a fold of layers).

Order of call layers, outermost first: observability (trace context and hops are
stamped before anything can reject, so a rejection is traced too), policy (the
interceptor chain: authorization, rate limits, DLP, audit), resilience (breaker,
retry, timeouts: closest to the backend, so a retry re-runs only the transport).
"""

from __future__ import annotations

from hopline.config.schema import GatewayConfig
from hopline.layers.pipeline import Pipeline

FORWARD_LAYERS = {1, 2, 3, 6, 7}  # transport, discovery, routing, session, capability


def build_pipeline(config: GatewayConfig) -> Pipeline:
    return Pipeline(layers=set(FORWARD_LAYERS))
