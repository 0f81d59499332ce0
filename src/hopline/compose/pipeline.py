"""The call pipeline of the gateway modes: build the :class:`Pipeline` a gateway runs
from its configuration (DESIGN §1: a mode is a fold of layers).

Order of call layers, outermost first: visibility (Layer 5: an invoke of an item the
caller's surface hides is refused exactly as an unknown name, before anything else, as
the lists left it out; only where the policy has surface layers), observability (trace
context and hops are stamped before anything else can reject, so a rejection is traced
too), policy (the interceptor chain: DLP, visibility guard, rate limits, operator interceptors, audit),
resilience (breaker, retry, timeouts: closest to the backend, so a retry re-runs only
the transport). A layer the configuration does not use is absent, not disabled, and
the declaration lists only the layers present.
"""

from __future__ import annotations

from typing import Any, Callable

from hopline.compose import policy, toolmodes
from hopline.compose.observability import Observability
from hopline.compose.resilience import Resilience
from hopline.config.schema import GatewayConfig
from hopline.layers.policy.visibility import Visibility
from hopline.pipeline import Pipeline


def build_pipeline(
    config: GatewayConfig,
    *,
    resilience: Resilience | None = None,
    observability: Observability | None = None,
    policy: Callable[..., tuple[list[Any], list[Any]]] | None = policy.build,
) -> Pipeline:
    """``resilience`` and ``observability`` are built once per gateway (breaker state and
    metrics outlive a reload); the policy layers are rebuilt with every configuration, by
    ``policy`` (the mode's Layer 5 factory; None: a mode without Layer 5)."""
    tap = observability.audit_tap if observability is not None else None  # the admin page's recent decisions
    surface, policy_calls = policy(config, tap=tap) if policy is not None else ([], [])
    calls = [
        *((Visibility(surface, audit=policy_calls),) if surface else ()),
        *(observability.calls if observability is not None else ()),
        *policy_calls,
        *(resilience.calls if resilience is not None else ()),
    ]
    gates = list(resilience.gates) if resilience is not None else []
    main, endpoints = toolmodes.plans(config)
    return Pipeline(calls=calls, surface=surface, gates=gates, tools=main, endpoints=endpoints)


async def prime(pipeline: Pipeline) -> None:
    """What the surface layers read before the first list (pins shared by replicas)."""
    for layer in pipeline.surface:
        ready = getattr(layer, "prime", None)
        if ready is not None:
            await ready()


async def release(pipeline: Pipeline, *, grace: float | None = None) -> None:
    """What a replaced pipeline holds (Redis connections, Code mode's sandbox workers) is
    let go on reload and at shutdown; Code runs in flight get ``grace`` seconds (``None``:
    their own time limit)."""
    await policy.aclose(pipeline.calls)
    for layer in pipeline.surface:
        close = getattr(layer, "aclose", None)
        if close is not None:
            await close()
    await toolmodes.aclose(pipeline.tools, *pipeline.endpoints.values(), grace=grace)
