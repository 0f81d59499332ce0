"""Observability from configuration: ``gates, calls = build(config, gates=…)``.

The call layers come outermost first, so that what they measure includes everything
inside them (policy decisions, retries, the breaker's fast failures):
**request log** (one line per request), **metrics**, **propagation** (loop and depth
checks, trace context, hop entry, spans). Place them before the policy and
resilience layers: ``Pipeline(calls=[*obs.calls, *policy, *res.calls])``.
Observability has no gates; ``gates`` given here (the breakers) are watched for the
breaker-state metrics.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry

from hopline import __version__
from hopline.binding import MCP_HANDSHAKE, Binding
from hopline.config.schema import GatewayConfig
from hopline.observability.admin import AdminApp
from hopline.observability.hops import Hops
from hopline.observability.logs import RequestLog
from hopline.observability.metrics import Metrics
from hopline.observability.recent import Recent
from hopline.observability.trace_layer import Propagation
from hopline.observability.spans import NoSpans, Spans
from hopline.pipeline import BackendGate, CallLayer


class Observability:
    def __init__(
        self,
        *,
        calls: list[CallLayer],
        hops: Hops | None,
        spans: Spans,
        metrics: Metrics | None,
        admin: AdminApp | None,
        admin_host: str,
        admin_port: int | None,
    ) -> None:
        self.gates: list[BackendGate] = []
        self.calls = calls
        self.hops = hops
        self.spans = spans
        self.metrics = metrics
        self.admin_app = admin  # serve on (admin_host, admin_port) when not None
        self.admin_host = admin_host
        self.admin_port = admin_port
        self.declaration: Callable[[], dict[str, Any]] | None = (
            None  # the conformance declaration, if the command hands it in
        )

    def __iter__(self) -> Iterator[Any]:
        """``gates, calls = build(config)``."""
        return iter((self.gates, self.calls))

    def track_sessions(self, count: Callable[[], int]) -> None:
        if self.metrics is not None:
            self.metrics.track_sessions(count)

    def track_listener(self, counts: Callable[[], dict[str, int]]) -> None:
        if self.metrics is not None:
            self.metrics.track_listener(counts)

    def readiness(self, ready: Callable[[], bool]) -> None:
        """``/readyz`` answers 503 while ``ready()`` is false."""
        if self.admin_app is not None:
            self.admin_app.ready = ready

    def views(
        self,
        status: Callable[[], dict[str, Any]],
        config: Callable[[], dict[str, Any]],
        surface: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        """``/status``, ``/config``, ``/status/surface`` and the admin page at ``/`` show
        these (compose/status.py, compose/surface.py)."""
        if self.admin_app is not None:
            self.admin_app.status = status
            self.admin_app.config = config
            self.admin_app.surface = surface

    @property
    def audit_tap(self) -> Callable[[dict[str, Any]], Any] | None:
        """What the policy layer hands its audit records to for the admin page (None: no admin listener)."""
        recent = getattr(self.metrics, "recent", None)
        return recent.audit if recent is not None else None

    def declared(self, declaration: Callable[[], dict[str, Any]]) -> None:
        """What ``/status`` summarises as the declaration (the command knows the endpoints)."""
        self.declaration = declaration

    def list_fetch(self, backend: str, method: str, result: Any) -> None:
        if self.metrics is not None:
            self.metrics.list_fetch(backend, method, result)

    def listening(self, transport: str) -> None:
        """How clients reach this gateway (``tcp``, ``pipe``): the server spans' ``network.transport``."""
        self.spans.listening(transport)

    def session_ended(self, seconds: float, version: str | None) -> None:
        """A client session closed (``mcp.server.session.duration`` when OpenTelemetry is on)."""
        self.spans.session_ended(seconds, version)

    def close(self) -> None:
        """Flush and stop span export (blocking: run it in a thread at shutdown)."""
        self.spans.close()

    def __repr__(self) -> str:
        return (
            f"<Observability calls={[type(c).__name__ for c in self.calls]} admin={self.admin_host}:{self.admin_port}>"
        )


def build(
    config: GatewayConfig,
    *,
    gates: Iterable[BackendGate] = (),
    binding: Binding = MCP_HANDSHAKE,
    registry: CollectorRegistry | None = None,
    exporter: Any = None,
    metric_reader: Any = None,
) -> Observability:
    o = config.observability
    hops = None
    if o.hops.enabled:
        hops = Hops(
            key=o.hops.key or binding.hop_key,
            name=config.name,
            mode=config.mode,
            version=__version__,
            instance=o.hops.instance,
            max_depth=o.hops.max_depth,
        )
    spans: Spans = NoSpans()
    if o.otel.endpoint is not None or exporter is not None:
        from hopline.observability.otel import OtelSpans  # the SDK only when asked for

        spans = OtelSpans(
            service_name=o.otel.service_name or config.name,
            endpoint=o.otel.endpoint,
            headers=o.otel.headers,
            sample_ratio=o.otel.sample_ratio,
            instance=hops.instance if hops is not None else None,
            exporter=exporter,
            metric_reader=metric_reader,
            transports={name: "pipe" if b.command else "tcp" for name, b in config.backends.items()},
        )
    metrics = admin = None
    if o.metrics.port is not None or registry is not None:
        metrics = Metrics(registry)
        metrics.watch(gates)
        metrics.recent = Recent()  # the admin page's recent calls, p50 and last errors
        admin = AdminApp(metrics.registry, path=o.metrics.path, bound_host=o.metrics.host)
    calls: list[CallLayer] = []
    if o.logs.requests:
        calls.append(RequestLog())
    if metrics is not None:
        calls.append(metrics)
    if o.trace.enabled or hops is not None or not isinstance(spans, NoSpans):
        calls.append(Propagation(hops=hops, spans=spans, trace=o.trace.enabled, generate=o.trace.generate))
    return Observability(
        calls=calls,
        hops=hops,
        spans=spans,
        metrics=metrics,
        admin=admin,
        admin_host=o.metrics.host,
        admin_port=o.metrics.port,
    )
