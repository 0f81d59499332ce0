"""Prometheus metrics, on a registry of their own (served by :mod:`.admin`).

========================================  =========  =================================
metric                                    type       labels
========================================  =========  =================================
hopline_requests_total                    counter    backend, method, tool
hopline_request_errors_total              counter    backend, method, tool, kind
hopline_request_duration_seconds          histogram  backend, method
hopline_retries_total                     counter    backend, method
hopline_retry_budget_exhausted_total      counter    backend
hopline_breaker_state                     enum       backend, hopline_breaker_state
hopline_breaker_transitions_total         counter    backend, state
hopline_sessions_open                     gauge      —
hopline_list_fetches_total                counter    backend, method, kind
hopline_session_creations_pending         gauge      —
hopline_session_creations_refused_total   counter    limit (max_pending_sessions, max_sessions, session_store…)
hopline_session_creations_failed_total    counter    why (timeout, client_left)
hopline_stream_overflows_total            counter    —
hopline_buffer_drops_total                counter    —
hopline_shared_messages_forged_total      counter    —
hopline_shared_session_events_total       counter    backend, event
========================================  =========  =================================

Labels are bounded and never carry secrets: ``backend`` is an operator-assigned id;
``method`` is a known MCP method (anything else counts as ``other``); ``tool`` is
the backend's own tool or prompt name *as the gateway resolved it from the
catalogue* (``call.target``; never text the client typed), capped per backend;
``kind`` is from the closed set in :mod:`.kinds`. No URL, argument, token or
session id is ever a label.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from hopline.jsonrpc import Message
from hopline.observability.kinds import error_code, kind_of
from hopline.observability.recent import DECIDED
from hopline.pipeline import Call, Next

METHODS = frozenset({
    "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe",
    "completion/complete", "tasks/get", "tasks/update", "tasks/cancel", "tools/list", "prompts/list",
    "resources/list", "resources/templates/list", "logging/setLevel", "ping",
    "sampling/createMessage", "elicitation/create", "roots/list",
})  # fmt: skip
NAMED = frozenset({"tools/call", "prompts/get"})
MAX_TOOLS = 500  # distinct tool labels per backend before the rest count as "other"
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BREAKER_STATES = ["closed", "half_open", "open"]


class Metrics:
    """The metric families, and the call layer that feeds them."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "hopline_requests",
            "Requests routed to a backend (and server→client requests from it).",
            ["backend", "method", "tool"],
            registry=r,
        )
        self.errors = Counter(
            "hopline_request_errors",
            "Requests that did not end in a plain result, by kind.",
            ["backend", "method", "tool", "kind"],
            registry=r,
        )
        self.latency = Histogram(
            "hopline_request_duration_seconds",
            "Time from routing to answer.",
            ["backend", "method"],
            buckets=BUCKETS,
            registry=r,
        )
        self.retries = Counter(
            "hopline_retries", "Retries made (attempts after the first).", ["backend", "method"], registry=r
        )
        self.budget_exhausted = Counter(
            "hopline_retry_budget_exhausted",
            "Retries refused because the backend's retry budget was spent.",
            ["backend"],
            registry=r,
        )
        self.breaker_state = Enum(
            "hopline_breaker_state",
            "Circuit breaker state per backend.",
            ["backend"],
            states=BREAKER_STATES,
            registry=r,
        )
        self.breaker_transitions = Counter(
            "hopline_breaker_transitions",
            "Circuit breaker transitions, by the state entered.",
            ["backend", "state"],
            registry=r,
        )
        self.sessions = Gauge("hopline_sessions_open", "Open client sessions.", registry=r)
        self.list_fetches = Counter(
            "hopline_list_fetches",
            "Backend list fetches made for fan-out lists, by outcome kind.",
            ["backend", "method", "kind"],
            registry=r,
        )
        self.shared_events = Counter(
            "hopline_shared_session_events",
            "What a shared backend session could not route to one client "
            "(request_refused, log_dropped, notification_dropped), "
            "capability_fallback, session_lost.",
            ["backend", "event"],
            registry=r,
        )
        self._clock = clock
        self._children: dict[tuple, Any] = {}
        self._series: dict[tuple, tuple] = {}  # (backend, method, target) → (requests, latency, labels)
        self._tools: dict[str, set[str]] = {}
        self.recent: Any = None  # a recent.Recent the admin page reads, fed here from the calls measured

    # -- labels ------------------------------------------------------------------------
    def _tool(self, call: Call) -> str:
        if call.method not in NAMED or not isinstance(call.target, str):
            return ""
        known = self._tools.setdefault(call.backend, set())
        if call.target in known:
            return call.target
        if len(known) >= MAX_TOOLS:
            return "other"
        known.add(call.target)
        return call.target

    def _child(self, family: Any, *labels: str) -> Any:
        key = (id(family), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*labels)
        return child

    # -- the call layer ------------------------------------------------------------------
    async def __call__(self, call: Call, next: Next) -> Message:
        started = self._clock()
        # Where the admin page lists recent calls, the audit record the policy layer writes
        # inside this call is collected for it (recent.py).
        token = DECIDED.set([]) if self.recent is not None else None
        try:
            try:
                answer = await next(call)
            except BaseException as exc:
                self.record(call, None, exc, self._clock() - started)
                raise
            self.record(call, answer, None, self._clock() - started)
            return answer
        finally:
            if token is not None:
                DECIDED.reset(token)

    def record(self, call: Call, answer: Message | None, error: BaseException | None, seconds: float) -> None:
        backend = call.backend
        key = (backend, call.method, call.target)
        series = self._series.get(key)
        if series is None:  # first time for this (backend, method, target): resolve the labels once
            method = call.method if call.method in METHODS else "other"
            tool = self._tool(call)
            series = (
                self._child(self.requests, backend, method, tool),
                self._child(self.latency, backend, method),
                (backend, method, tool),
            )
            if len(self._series) < 100_000:  # bounded like the labels themselves (targets may be URIs)
                self._series[key] = series
        requests, latency, labels = series
        requests.inc()
        latency.observe(seconds)
        kind = kind_of(answer, error)
        if kind != "ok":
            self._child(self.errors, *labels, kind).inc()
        if self.recent is not None:
            self.recent.add(
                backend,
                labels[1],
                labels[2],
                kind,
                error_code(answer, error) if kind != "ok" else None,
                seconds,
                call.principal.subject,
            )
        if call.events:
            for name, _attributes in call.events:
                if name == "retry":
                    self._child(self.retries, labels[0], labels[1]).inc()
                elif name == "retry.budget_exhausted":
                    self._child(self.budget_exhausted, labels[0]).inc()

    # -- what the gateway reports outside the call layers ---------------------------------
    def list_fetch(self, backend: str, method: str, result: Any) -> None:
        """One backend's answer to a fan-out list: its items, or the exception."""
        kind = kind_of(None, result) if isinstance(result, BaseException) else "ok"
        self._child(self.list_fetches, backend, method if method in METHODS else "other", kind).inc()

    def shared_event(self, backend: str, event: str) -> None:
        """A shared backend session's event (``event`` from the closed set above)."""
        self._child(self.shared_events, backend, event).inc()

    def track_sessions(self, count: Callable[[], int]) -> None:
        """``hopline_sessions_open`` reads ``count()`` at every scrape."""
        self.sessions.set_function(lambda: float(count()))

    def track_listener(self, counts: Callable[[], dict[str, int]]) -> None:
        """The HTTP listener's admission and buffer counters (transports/admission.py), read at every scrape."""
        self.registry.register(_ListenerCounters(counts))

    def watch(self, gates: Iterable[Any]) -> None:
        """Follow every gate that reports transitions (the breakers)."""
        for gate in gates:
            subscribe = getattr(gate, "subscribe", None)
            if subscribe is not None:
                subscribe(self._breaker_moved)

    def _breaker_moved(self, backend: str, old: Any, new: Any) -> None:
        state = getattr(new, "value", str(new))
        self.breaker_state.labels(backend).state(state)
        self.breaker_transitions.labels(backend, state).inc()

    def __repr__(self) -> str:
        return f"<Metrics series={len(self._children)}>"


class _ListenerCounters:
    """A collector over ``Admission.counts()``: plain integers kept by the listener."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterable[Any]:
        c = self.counts()
        yield GaugeMetricFamily(
            "hopline_session_creations_pending",
            "Session creations in flight (handshakes not yet answered).",
            value=c["pending"],
        )
        refused = CounterMetricFamily(
            "hopline_session_creations_refused",
            "Session creations refused with 503, by the limit reached.",
            labels=["limit"],
        )
        refused.add_metric(["max_pending_sessions"], c["shed_busy"])
        refused.add_metric(["max_sessions"], c["shed_full"])
        refused.add_metric(["session_store"], c["store_unavailable"])
        refused.add_metric(["session_store_answer"], c["store_invalid"])
        yield refused
        yield CounterMetricFamily(
            "hopline_shared_messages_forged",
            "Messages read from the shared store (Redis) and dropped: not signed with the session key, or replayed.",
            value=c["forged"],
        )
        yield CounterMetricFamily(
            "hopline_sessions_resumed",
            "Sessions made by another replica (or before a restart) and resumed by this one.",
            value=c["resumed"],
        )
        failed = CounterMetricFamily(
            "hopline_session_creations_failed", "Session creations that ended without a session.", labels=["why"]
        )
        failed.add_metric(["timeout"], c["handshake_timeouts"])
        failed.add_metric(["client_left"], c["abandoned"])
        yield failed
        yield CounterMetricFamily(
            "hopline_stream_overflows",
            "Response streams cut off because their client did not read them.",
            value=c["overflows"],
        )
        yield CounterMetricFamily(
            "hopline_buffer_drops", "Backlog and resumability-log entries dropped at their bound.", value=c["dropped"]
        )
