"""Layer 5's visibility decision, as the gateway's lists and invokes consult it.

The surface layers (CEL rules, tool pinning) decide per caller whether an item is part
of that caller's surface; :func:`surface_key` is what their decisions depend on for a
caller now (the claims they read), so a filtered list can be cached per key. An invoke
of a hidden item is refused exactly as an unknown one, and :func:`refused` has the
audit interceptor record it.
"""

from __future__ import annotations

from typing import Hashable, Sequence

from hopline.context import Principal
from hopline.jsonrpc import HoplineError
from hopline.layers.policy.chain import InterceptorChain
from hopline.pipeline import Call, CallLayer, SurfaceLayer


def refused(calls: Sequence[CallLayer], call: Call, error: HoplineError) -> None:
    """Audit an invoke refused by the gateway's own visibility check (no-op without audit)."""
    for layer in calls:
        if isinstance(layer, InterceptorChain):
            layer.refused(call, error)


def surface_key(surface: Sequence[SurfaceLayer], principal: Principal) -> tuple[Hashable, ...]:
    """Everything the policy surface layers' decisions depend on for ``principal`` now."""
    return tuple(layer.decision_key(principal) for layer in surface if hasattr(layer, "decision_key"))
