"""Layer 4 from configuration: ``gates, calls = build(config)``.

The call layers come outermost first: **retry** (each attempt goes through the
breaker, so a circuit that opens stops the retries), **breaker** (takes a permit,
records the outcome), **timeouts** (sets ``call.timeout`` for the transport). The
gates are the breakers. :class:`Resilience` also carries what the gateway calls
outside the call layers: :attr:`fan_out` in ``fan_out``, :meth:`observe` for list
outcomes, and :meth:`run` (the trial supervisor) as a task it owns.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, Awaitable, Callable, Iterator

from hopline.config.schema import GatewayConfig
from hopline.layers.resilience.breaker import Breakers, BreakerSettings, Probe
from hopline.layers.resilience.outcome import Classifier, Outcome
from hopline.layers.resilience.partial import FailMode, FanOut
from hopline.layers.resilience.retry import Backoff, Retry, RetryBudget, RetryPolicy
from hopline.layers.resilience.timeouts import Timeouts
from hopline.pipeline import BackendGate, CallLayer


class Resilience:
    def __init__(
        self,
        *,
        breakers: Breakers | None,
        retry: Retry | None,
        timeouts: Timeouts,
        fan_out: FanOut,
        classifier: Classifier,
    ) -> None:
        self.breakers = breakers
        self.retry = retry
        self.timeouts = timeouts
        self.fan_out = fan_out
        self.classifier = classifier
        self.gates: list[BackendGate] = [breakers] if breakers is not None else []
        self.calls: list[CallLayer] = [layer for layer in (retry, breakers, timeouts) if layer is not None]

    def __iter__(self) -> Iterator[Any]:
        """``gates, calls = build(config)``."""
        return iter((self.gates, self.calls))

    def observe(self, backend: str, result: Any) -> None:
        """A fan-out list fetch's result (its items, or the exception it failed with)."""
        if self.breakers is None:
            return
        outcome = self.classifier.error(result) if isinstance(result, BaseException) else Outcome.OK
        self.breakers.observe(backend, outcome)

    async def run(self, probe: Probe) -> None:
        """The breaker trial supervisor; returns at once when breakers are off."""
        if self.breakers is not None:
            await self.breakers.supervise(probe)

    def __repr__(self) -> str:
        return f"<Resilience calls={[type(c).__name__ for c in self.calls]} {self.fan_out!r}>"


def build(
    config: GatewayConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Resilience:
    r = config.resilience
    # The names a transport may use for a backend in its own errors (outcome.py).
    classifier = Classifier({b: [spec.url] if spec.url else [] for b, spec in config.backends.items()})
    breakers = None
    if r.breaker.enabled:
        b = r.breaker
        settings = BreakerSettings(b.failures, b.failure_rate, b.min_calls, b.window, b.cool_down, b.max_cool_down)
        breakers = Breakers(settings, classifier, clock=clock, probe_timeout=b.probe_timeout)
    retry = None
    if r.retry.enabled and r.retry.max_attempts > 1:
        t = r.retry
        policy = RetryPolicy(
            t.max_attempts, t.trust_annotations, t.on_timeout, {b: frozenset(names) for b, names in t.tools.items()}
        )
        retry = Retry(
            policy,
            classifier,
            backoff=Backoff(t.backoff, t.max_backoff),
            budget=lambda: RetryBudget(t.budget, t.budget_window, t.min_retries, clock),
            rng=rng,
            sleep=sleep,
        )
    timeouts = Timeouts(
        default=config.listen.request_timeout,
        backends={b: spec.timeout for b, spec in config.backends.items() if spec.timeout is not None},
        methods=r.timeouts.methods,
        tools=r.timeouts.tools,
    )
    return Resilience(
        breakers=breakers,
        retry=retry,
        timeouts=timeouts,
        fan_out=FanOut(FailMode(r.partial_failure)),
        classifier=classifier,
    )


def bounded(config: GatewayConfig) -> Resilience:
    """Layer 4 absent (a mode that does not admit it): no breaker, no retry, no timeouts of
    its own; every call still bounded by the request timeout (a backend's own, if set)."""
    return Resilience(
        breakers=None,
        retry=None,
        timeouts=Timeouts(
            default=config.listen.request_timeout,
            backends={b: spec.timeout for b, spec in config.backends.items() if spec.timeout is not None},
        ),
        fan_out=FanOut(FailMode(config.resilience.partial_failure)),
        classifier=Classifier({b: [spec.url] if spec.url else [] for b, spec in config.backends.items()}),
    )
