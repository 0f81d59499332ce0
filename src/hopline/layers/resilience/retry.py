"""Retries only where they are safe, spaced with jitter, within a budget (draft §11.2).

When a retry is allowed (:meth:`RetryPolicy.may_retry`):

- the request provably never reached the backend (``Outcome.NEVER_SENT``): any method;
- the hop failed after sending (``FAILED``; ``TIMEOUT`` only if ``on_timeout``) and
  the call is safe to repeat: a read (``resources/read``, ``prompts/get``,
  ``completion/complete``, ``tasks/get``), or a ``tools/call`` whose tool is
  annotated ``readOnlyHint``/``idempotentHint`` (if annotations are trusted) or
  listed by the operator for that backend.

Never retried: a result (``isError`` included), a JSON-RPC error the backend chose to
send, a request hopline itself refused (circuit open, bad params). A tool with side
effects that failed after sending is *not* repeated: the client gets the error
(test-battery FAULT-16: duplicate side effects must be 0).

Spacing: exponential backoff with full jitter (``uniform(0, min(cap, base·2ⁿ))``),
because deterministic backoff synchronises retries (F11). Budget: per backend,
retries may not exceed ``ratio`` of the requests over a sliding window (with a
small floor so a quiet backend can retry at all), so retries cannot multiply load
when a backend is struggling (Envoy ``retry_budget``, Finagle ``RetryBudget``).
Clock, randomness and sleep are injected; nothing here reads the wall clock itself.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from hopline.jsonrpc import Message
from hopline.layers.resilience.outcome import Classifier, Outcome
from hopline.layers.resilience.window import Window
from hopline.pipeline import Call, Next

SAFE_METHODS = frozenset({"resources/read", "prompts/get", "completion/complete", "tasks/get"})
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Backoff:
    base: float = 0.05  # the first retry waits up to this long
    cap: float = 2.0

    def delay(self, retry: int, rng: random.Random) -> float:
        """Seconds before retry number ``retry`` (0-based), full jitter."""
        return rng.uniform(0.0, min(self.cap, self.base * (2**retry)))


class RetryBudget:
    """Retries ≤ ``ratio`` × requests over ``window`` seconds (at least ``floor`` retries)."""

    __slots__ = ("ratio", "floor", "_window")

    def __init__(
        self, ratio: float = 0.2, window: float = 10.0, floor: int = 3, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ratio = ratio
        self.floor = floor
        self._window = Window(window, clock)

    def request(self) -> None:
        self._window.add(1, 0)

    def spend(self) -> bool:
        """Take one retry from the budget; False if it is exhausted."""
        requests, retries = self._window.totals()
        if retries + 1 > max(self.floor, self.ratio * requests):
            return False
        self._window.add(0, 1)
        return True

    def __repr__(self) -> str:
        requests, retries = self._window.totals()
        return f"<RetryBudget {retries}/{requests} ratio={self.ratio}>"


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    trust_annotations: bool = True
    on_timeout: bool = False
    tools: Mapping[str, frozenset[str]] = field(default_factory=dict)  # backend → its own tool names

    def is_safe(self, call: Call) -> bool:
        """May this call run twice without harm?"""
        if call.method in SAFE_METHODS:
            return True
        if call.method != "tools/call":
            return False
        if call.target is not None and call.target in self.tools.get(call.backend, ()):
            return True
        if self.trust_annotations and isinstance(call.definition, dict):
            notes: Any = call.definition.get("annotations")
            if isinstance(notes, dict) and (notes.get("readOnlyHint") is True or notes.get("idempotentHint") is True):
                return True
        return False

    def may_retry(self, call: Call, outcome: Outcome) -> bool:
        if outcome is Outcome.NEVER_SENT:
            return True
        if outcome is Outcome.FAILED or (outcome is Outcome.TIMEOUT and self.on_timeout):
            return self.is_safe(call)
        return False


class Retry:
    """The retry call layer; one budget per backend, shared by every session."""

    def __init__(
        self,
        policy: RetryPolicy = RetryPolicy(),
        classifier: Classifier | None = None,
        *,
        backoff: Backoff = Backoff(),
        budget: Callable[[], RetryBudget] = RetryBudget,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.policy = policy
        self.classifier = classifier or Classifier()
        self.backoff = backoff
        self._new_budget = budget
        self._budgets: dict[str, RetryBudget] = {}
        self._rng = rng or random.Random()
        self._sleep = sleep

    def budget(self, backend: str) -> RetryBudget:
        found = self._budgets.get(backend)
        if found is None:
            found = self._budgets[backend] = self._new_budget()
        return found

    async def __call__(self, call: Call, next: Next) -> Message:
        if call.direction != "to_backend" or self.policy.max_attempts <= 1:
            return await next(call)
        budget = self.budget(call.backend)
        budget.request()
        retry = 0
        while True:
            try:
                answer = await next(call)
            except Exception as exc:
                if not self._again(call, self.classifier.error(exc), retry, budget):
                    raise
            else:
                if answer.body.get("error") is None:  # a result (Classifier.answer: OK) is never retried
                    return answer
                if not self._again(call, self.classifier.answer(call.backend, answer), retry, budget):
                    return answer
            delay = self.backoff.delay(retry, self._rng)
            retry += 1
            call.event("retry", backend=call.backend, attempt=retry + 1, delay_ms=round(delay * 1000, 1))
            await self._sleep(delay)

    def _again(self, call: Call, outcome: Outcome, retry: int, budget: RetryBudget) -> bool:
        if not outcome.is_failure or retry + 1 >= self.policy.max_attempts or not self.policy.may_retry(call, outcome):
            return False
        if not budget.spend():
            call.event("retry.budget_exhausted", backend=call.backend, outcome=outcome.value)
            return False
        return True
