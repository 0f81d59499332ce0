"""Layer 4, resilience (draft §6.4, §11): timeouts, retries, circuit breakers, partial failure.

Pure parts, no I/O: the breaker is a transition table driven by outcomes and an
injectable clock; retries take their sleep and randomness as arguments; the
timeouts layer only sets ``call.timeout`` (the transport enforces it). What the
gateway calls is :func:`hopline.compose.resilience.build`.
"""

from hopline.layers.resilience.breaker import Breaker, BreakerSettings, Breakers, CircuitOpen, IllegalTransition, State
from hopline.layers.resilience.outcome import Classifier, Outcome
from hopline.layers.resilience.partial import FanOut, FailMode
from hopline.layers.resilience.retry import Backoff, Retry, RetryBudget, RetryPolicy
from hopline.layers.resilience.timeouts import Timeouts

__all__ = [
    "Backoff",
    "Breaker",
    "BreakerSettings",
    "Breakers",
    "CircuitOpen",
    "Classifier",
    "FailMode",
    "FanOut",
    "IllegalTransition",
    "Outcome",
    "Retry",
    "RetryBudget",
    "RetryPolicy",
    "State",
    "Timeouts",
]
