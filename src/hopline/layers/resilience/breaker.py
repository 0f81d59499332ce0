"""Circuit breakers that withdraw capabilities (draft §11.1), one per backend.

The draft's three states, as a table (STYLE habit 2)::

    CLOSED    --trip-->     OPEN        N consecutive failures, or a failure rate
                                        over a window (with a minimum of calls)
    OPEN      --cooled-->   HALF_OPEN   the cool-down has passed (read lazily)
    HALF_OPEN --success-->  CLOSED      the one trial answered
    HALF_OPEN --failure-->  OPEN        the trial failed; the next cool-down doubles

A :class:`Breaker` is pure: it is told outcomes and reads an injected clock.
A call takes a *permit* (the breaker's epoch) before it runs and reports its
outcome with it; outcomes of permits from an earlier epoch (a call that started
before the circuit opened) are ignored, so a straggler can neither close nor
re-open a circuit. HALF_OPEN hands out exactly one permit: the trial.

:class:`Breakers` holds one breaker per backend, shared by every session, and is
both the :class:`~hopline.pipeline.BackendGate` (a backend is available
only while CLOSED; entering OPEN and returning to CLOSED call ``changed``, and
the gateway emits the CHANGE-SIGNAL) and a :class:`~hopline.pipeline.CallLayer`
that takes permits and records outcomes. Because an OPEN backend is withdrawn
from every surface, no client call can be the trial: :meth:`Breakers.supervise`
runs one *probe* (a callable the gateway supplies, e.g. ``ping``) per backend
whose cool-down has passed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from hopline.jsonrpc import Message, UnavailableError
from hopline.layers.resilience.outcome import Classifier, Outcome
from hopline.layers.resilience.window import Window
from hopline.pipeline import Call, Next

log = logging.getLogger("hopline.resilience")

Clock = Callable[[], float]
Probe = Callable[[str], Awaitable[Message]]
Listener = Callable[[str, "State", "State"], None]


class State(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Event(enum.Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    TRIP = "trip"
    COOLED = "cooled"


TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.CLOSED, Event.SUCCESS): State.CLOSED,
    (State.CLOSED, Event.FAILURE): State.CLOSED,  # counted; TRIP decides
    (State.CLOSED, Event.TRIP): State.OPEN,
    (State.OPEN, Event.COOLED): State.HALF_OPEN,
    (State.HALF_OPEN, Event.SUCCESS): State.CLOSED,
    (State.HALF_OPEN, Event.FAILURE): State.OPEN,
}


class IllegalTransition(RuntimeError):
    """A (state, event) pair the table does not allow: a bug in the caller, not a fault."""


class CircuitOpen(UnavailableError):
    """The backend's circuit is open: fail fast, say when to try again."""

    def __init__(self, backend: str, retry_after: float) -> None:
        ms = max(0, int(retry_after * 1000))
        super().__init__(
            f"backend {backend} is unavailable (circuit open; retry in {ms} ms)", backend=backend, reason="circuit_open"
        )
        self.data["retry_after_ms"] = ms


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    failures: int = 5  # consecutive failures that trip
    failure_rate: float = 0.5  # or this share of failures over the window...
    min_calls: int = 20  # ...once the window holds at least this many calls
    window: float = 30.0  # seconds
    cool_down: float = 5.0  # seconds OPEN before the trial
    max_cool_down: float = 60.0  # each failed trial doubles the cool-down up to this


class Breaker:
    __slots__ = (
        "name",
        "settings",
        "state",
        "epoch",
        "_clock",
        "_window",
        "_consecutive",
        "_opened_at",
        "_cool",
        "_trial_out",
        "on_transition",
    )

    def __init__(self, name: str, settings: BreakerSettings = BreakerSettings(), clock: Clock = time.monotonic) -> None:
        self.name = name
        self.settings = settings
        self.state = State.CLOSED
        self.epoch = 0
        self._clock = clock
        self._window = Window(settings.window, clock)
        self._consecutive = 0
        self._opened_at = 0.0
        self._cool = settings.cool_down
        self._trial_out = False
        self.on_transition: Listener | None = None

    # -- the table ------------------------------------------------------------------
    def _apply(self, event: Event) -> State:
        old = self.state
        new = TRANSITIONS.get((old, event))
        if new is None:
            raise IllegalTransition(f"breaker {self.name}: {event.value} is not allowed in state {old.value}")
        if new is not old:
            self.state = new
            self.epoch += 1
            self._enter(old, new)
            if self.on_transition is not None:
                self.on_transition(self.name, old, new)
        return new

    def _enter(self, old: State, new: State) -> None:
        if new is State.OPEN:
            if old is State.HALF_OPEN:  # a failed trial: wait longer before the next one
                self._cool = min(self._cool * 2, self.settings.max_cool_down)
            self._opened_at = self._clock()
        elif new is State.HALF_OPEN:
            self._trial_out = False
        else:  # CLOSED: a fresh start
            self._cool = self.settings.cool_down
            self._consecutive = 0
            self._window.clear()

    # -- calls ------------------------------------------------------------------------
    def retry_after(self) -> float:
        """Seconds until a trial may run (0 when one may run now)."""
        if self.state is State.OPEN:
            return max(0.0, self._opened_at + self._cool - self._clock())
        return 0.0 if self.state is State.CLOSED else self._cool

    def cooled(self) -> bool:
        return self.state is State.OPEN and self._clock() >= self._opened_at + self._cool

    def acquire(self) -> int:
        """A permit for one call, or :class:`CircuitOpen`. In HALF_OPEN, the one trial."""
        if self.state is State.CLOSED:
            return self.epoch
        if self.cooled():
            self._apply(Event.COOLED)
        if self.state is State.HALF_OPEN and not self._trial_out:
            self._trial_out = True
            return self.epoch
        raise CircuitOpen(self.name, self.retry_after())

    def record(self, permit: int, outcome: Outcome) -> None:
        """The outcome of the call that took ``permit``."""
        if permit != self.epoch:
            return  # started under an earlier state: says nothing about this one
        if outcome.is_failure:
            self._failure()
        elif outcome in (Outcome.OK, Outcome.ANSWERED):
            self._success()
        elif self.state is State.HALF_OPEN:
            self._trial_out = False  # a neutral trial (refused locally): let another one try

    def closed_success(self) -> None:
        """``record(self.epoch, Outcome.OK)`` while CLOSED, which stays CLOSED: counted, with
        no walk through the table (a call layer's common case, bench/profile_call.py)."""
        self._consecutive = 0
        self._window.add(1, 0)

    def release(self, permit: int) -> None:
        """The call was cancelled before it had an outcome."""
        if permit == self.epoch and self.state is State.HALF_OPEN:
            self._trial_out = False

    def _success(self) -> None:
        if self.state is State.CLOSED:
            self._consecutive = 0
            self._window.add(1, 0)
        self._apply(Event.SUCCESS)

    def _failure(self) -> None:
        if self.state is State.CLOSED:
            self._consecutive += 1
            self._window.add(1, 1)
        self._apply(Event.FAILURE)
        if self.state is State.CLOSED and self._should_trip():
            self._apply(Event.TRIP)

    def _should_trip(self) -> bool:
        s = self.settings
        if self._consecutive >= s.failures:
            return True
        calls, failures = self._window.totals()
        return calls >= s.min_calls and failures >= s.failure_rate * calls

    def is_available(self) -> bool:
        return self.state is State.CLOSED

    def __repr__(self) -> str:
        return f"<Breaker {self.name} {self.state.value} epoch={self.epoch} consecutive={self._consecutive}>"


class Breakers:
    """One breaker per backend: the gate, the call layer, and the trial supervisor."""

    def __init__(
        self,
        settings: BreakerSettings = BreakerSettings(),
        classifier: Classifier | None = None,
        *,
        clock: Clock = time.monotonic,
        per_backend: dict[str, BreakerSettings] | None = None,
        probe_timeout: float = 5.0,
    ) -> None:
        self.settings = settings
        self.classifier = classifier or Classifier()
        self.probe_timeout = probe_timeout
        self._clock = clock
        self._per_backend = per_backend or {}
        self._breakers: dict[str, Breaker] = {}
        self._changed: Callable[[str], None] | None = None
        self._listeners: list[Listener] = []
        self._losses: dict[str, dict] = {}  # backend → the error data of the last connection loss counted
        self._wake: asyncio.Event | None = None

    def breaker(self, backend: str) -> Breaker:
        found = self._breakers.get(backend)
        if found is None:
            found = Breaker(backend, self._per_backend.get(backend, self.settings), self._clock)
            found.on_transition = self._transition
            self._breakers[backend] = found
        return found

    # -- BackendGate ------------------------------------------------------------------
    def available(self, backend: str) -> bool:
        found = self._breakers.get(backend)
        return found is None or found.state is State.CLOSED

    def bind(self, changed: Callable[[str], None]) -> None:
        self._changed = changed

    def subscribe(self, listener: Listener) -> None:
        """``listener(backend, old, new)`` on every transition (metrics, logs)."""
        self._listeners.append(listener)

    def states(self) -> dict[str, State]:
        return {b: br.state for b, br in self._breakers.items()}

    def _transition(self, backend: str, old: State, new: State) -> None:
        level = logging.WARNING if new is State.OPEN else logging.INFO
        log.log(level, "backend %s: circuit %s -> %s", backend, old.value, new.value)
        for listener in self._listeners:
            listener(backend, old, new)
        if (old is State.CLOSED) != (new is State.CLOSED) and self._changed is not None:
            self._changed(backend)  # withdrawn on OPEN, restored on CLOSED (§11.1)
        if new is State.OPEN and self._wake is not None:
            self._wake.set()

    # -- CallLayer ---------------------------------------------------------------------
    async def __call__(self, call: Call, next: Next) -> Message:
        if call.direction != "to_backend":
            return await next(call)
        breaker = self.breaker(call.backend)
        try:
            permit = breaker.acquire()
        except UnavailableError:
            call.event("breaker.rejected", backend=call.backend, state=breaker.state.value)
            raise
        try:
            answer = await next(call)
        except asyncio.CancelledError:
            breaker.release(permit)
            raise
        except BaseException as exc:
            breaker.record(permit, self.classifier.error(exc))
            raise
        if answer.body.get("error") is None and permit == breaker.epoch and breaker.state is State.CLOSED:
            breaker.closed_success()  # a result (Classifier.answer: OK) on a closed circuit
            return answer
        outcome = self.classifier.answer(call.backend, answer)
        if outcome.is_failure and self._same_loss(call.backend, answer):
            outcome = Outcome.REJECTED  # another call lost with the same connection: counted once
        breaker.record(permit, outcome)
        return answer

    def _same_loss(self, backend: str, answer: Message) -> bool:
        """Whether this failed answer reports a connection loss already counted. A peer that
        loses its connection answers every waiting call with one error (``RpcPeer._fail``),
        so their ``data`` is one object: a shared child dying under 50 calls is one failure."""
        error = answer.body.get("error")
        data = error.get("data") if isinstance(error, dict) else None
        if not isinstance(data, dict):
            return False
        if self._losses.get(backend) is data:
            return True
        self._losses[backend] = data  # kept (not its id), so the identity cannot be reused
        return False

    def observe(self, backend: str, outcome: Outcome) -> None:
        """An outcome the gateway saw outside the call layers (a fan-out list fetch)."""
        breaker = self.breaker(backend)
        if breaker.state is State.CLOSED:
            breaker.record(breaker.epoch, outcome)

    # -- trials --------------------------------------------------------------------------
    def due(self) -> list[str]:
        """Backends whose cool-down has passed: each is owed one trial."""
        return [b for b, br in self._breakers.items() if br.cooled()]

    def next_due(self) -> float | None:
        """Seconds until the next cool-down ends (None: no circuit is open)."""
        waits = [br.retry_after() for br in self._breakers.values() if br.state is State.OPEN]
        return min(waits) if waits else None

    async def trial(self, backend: str, probe: Probe) -> State:
        """Run the one HALF_OPEN trial for ``backend`` through ``probe``; the new state."""
        breaker = self.breaker(backend)
        try:
            permit = breaker.acquire()
        except UnavailableError:
            return breaker.state  # not cooled yet, or a real call is the trial already
        try:
            async with asyncio.timeout(self.probe_timeout):
                answer = await probe(backend)
        except asyncio.CancelledError:
            breaker.release(permit)
            raise
        except TimeoutError:
            breaker.record(permit, Outcome.TIMEOUT)
        except Exception as exc:
            outcome = self.classifier.error(exc)
            breaker.record(
                permit, outcome if outcome.is_failure else Outcome.FAILED
            )  # a probe that cannot run is a failed trial
        else:
            breaker.record(permit, self.classifier.answer(backend, answer))
        return breaker.state

    async def supervise(self, probe: Probe, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Run trials as cool-downs end, forever (the gateway owns this task)."""
        self._wake = asyncio.Event()
        while True:
            self._wake.clear()
            due = self.due()
            if due:
                await asyncio.gather(*(self.trial(b, probe) for b in due))
                continue
            delay = self.next_due()
            if delay is None:
                await self._wake.wait()
                continue
            waker = asyncio.ensure_future(self._wake.wait())
            sleeper = asyncio.ensure_future(sleep(delay))
            try:
                await asyncio.wait((waker, sleeper), return_when=asyncio.FIRST_COMPLETED)
            finally:
                waker.cancel()
                sleeper.cancel()

    def __repr__(self) -> str:
        return f"<Breakers {', '.join(f'{b}={br.state.value}' for b, br in self._breakers.items()) or 'none'}>"
