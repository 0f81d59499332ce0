"""OpenTelemetry spans and metrics by the MCP semantic conventions (optional extra ``otel``).

The names follow OpenTelemetry's *Semantic conventions for Model Context Protocol*
(open-telemetry/semantic-conventions-genai v0.1.0, ``docs/gen-ai/mcp.md``); the list of
names hopline emits is :data:`SPAN_ATTRIBUTES` and :data:`METRICS`, and
docs/operations/observability.md maps them to the Prometheus names.

For each routed request two spans: an ``mcp.server`` span (kind SERVER) for the
client's request, whose parent is the incoming trace context, and an ``mcp.client``
span (kind CLIENT) for the backend call, its child; the client span's context is what
the next hop sees as parent (:mod:`.trace`), so client → hopline → backend (and a chain
of hoplines) is one trace. Span names are ``{mcp.method.name} {target}`` with the tool
or prompt name as target (the name the client used on the server span, the backend's
own name on the client span), else ``{mcp.method.name}``; a resource URI is never part
of a name. The layers' events (retries, breaker rejections, policy decisions, timeouts)
become span events on the client span. ``error.type`` is the JSON-RPC error code the
client gets (the backend's, or hopline's own such as -31002 for a timeout), else
``tool_error`` for a tool result with ``isError``, else hopline's outcome kind
(``cancelled``, ``internal``…); when it is set both spans have status ERROR, described by
the outcome kind (``hopline.outcome``), not the peer's message, which may echo input.

The histograms ``mcp.server.operation.duration`` and ``mcp.client.operation.duration``
(seconds, the conventions' bucket boundaries) and ``mcp.server.session.duration`` (a
client session, from its creation to its end) are recorded with the low-cardinality
attributes only (no session id, no URI, no request id), plus ``hopline.backend`` on the
client side.

Never recorded: arguments, results, tokens. ``mcp.session.id`` is a digest of hopline's
session binding, never the ``Mcp-Session-Id`` a client holds (that is a credential).
``mcp.resource.uri`` loses any user info, query and fragment. The SDK is imported only
when this module builds spans, so hopline runs without ``opentelemetry-sdk`` installed as
long as OTLP is not configured. The providers are hopline's own (not the global ones) and
are shut down by :meth:`close`, which flushes what is batched.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Mapping
from urllib.parse import urlsplit, urlunsplit

from hopline import NAME, __version__
from hopline.binding import HANDSHAKE_VERSIONS, META_PROTOCOL_VERSION, MODERN_VERSIONS
from hopline.jsonrpc import Message
from hopline.observability.kinds import error_code, kind_of
from hopline.observability.trace import SpanContext
from hopline.pipeline import Call

TOOLS_CALL = "tools/call"
PROMPTS_GET = "prompts/get"
VERSIONS = frozenset((*HANDSHAKE_VERSIONS, *MODERN_VERSIONS))
URI_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
OK_KINDS = frozenset({"ok"})  # any other outcome sets error.type
# The conventions' ExplicitBucketBoundaries for both operation-duration histograms.
BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
# The conventions give the session histograms no boundaries: these reach listen.session_ttl's scale.
SESSION_BUCKETS = (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)

# What hopline emits, by the conventions' names (tests check against these lists).
SPAN_ATTRIBUTES = (
    "mcp.method.name",
    "mcp.session.id",
    "mcp.protocol.version",
    "mcp.resource.uri",
    "jsonrpc.request.id",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "error.type",
    "rpc.response.status_code",
    "network.transport",
)
METRICS = ("mcp.server.operation.duration", "mcp.client.operation.duration", "mcp.server.session.duration")
METRIC_ATTRIBUTES = (
    "mcp.method.name",
    "mcp.protocol.version",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "error.type",
    "rpc.response.status_code",
    "network.transport",
    "hopline.backend",  # hopline's own: the operator-assigned backend id (client side only)
)


def metrics_url(traces: str) -> str:
    """The OTLP/HTTP metrics URL beside a traces URL (``…/v1/traces`` → ``…/v1/metrics``)."""
    parts = urlsplit(traces)
    path = parts.path
    path = (
        path[: -len("/v1/traces")] + "/v1/metrics" if path.endswith("/v1/traces") else path.rstrip("/") + "/v1/metrics"
    )
    return urlunsplit(parts._replace(path=path))


class OtelSpans:
    def __init__(
        self,
        *,
        service_name: str = NAME,
        endpoint: str | None = None,
        headers: Mapping[str, str] | None = None,
        sample_ratio: float = 1.0,
        instance: str | None = None,
        exporter: Any = None,
        metric_reader: Any = None,
        transports: Mapping[str, str] | None = None,
    ) -> None:
        """Export to ``endpoint`` (an OTLP/HTTP traces URL; metrics go to its ``/v1/metrics``
        sibling) in batches, or synchronously to ``exporter`` (any SDK ``SpanExporter``) and
        ``metric_reader`` (any SDK ``MetricReader``; tests pass in-memory ones).
        ``transports``: backend name → ``network.transport`` (``pipe`` for stdio, ``tcp`` for HTTP)."""
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        readers: list[Any] = []
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            processor: Any = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {})))
        else:
            processor = SimpleSpanProcessor(exporter)
        if metric_reader is not None:
            readers.append(metric_reader)
        elif endpoint is not None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            readers.append(
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(endpoint=metrics_url(endpoint), headers=dict(headers or {}))
                )
            )
        attributes = {"service.name": service_name, "service.version": __version__}
        if instance:
            attributes["service.instance.id"] = instance
        resource = Resource.create(attributes)
        self.provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(sample_ratio)), resource=resource, shutdown_on_exit=False
        )
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer(NAME, __version__)
        self.meters = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
        meter = self.meters.get_meter(NAME, __version__)
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request or notification duration as observed on the receiver from the time it was "
            "received until the result or ack is sent.",
            explicit_bucket_boundaries_advisory=list(BUCKETS),
        )
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="The duration of the MCP request or notification as observed on the sender from the time it "
            "was sent until the response or ack is received.",
            explicit_bucket_boundaries_advisory=list(BUCKETS),
        )
        self.session_duration = meter.create_histogram(
            "mcp.server.session.duration",
            unit="s",
            description="The duration of the MCP session as observed on the MCP server.",
            explicit_bucket_boundaries_advisory=list(SESSION_BUCKETS),
        )
        self.transports = dict(transports or {})
        self.server_transport: str | None = None  # how clients reach hopline (the command says: listening)

    def listening(self, transport: str) -> None:
        self.server_transport = transport

    def session_ended(self, seconds: float, version: str | None) -> None:
        """A client's (stateful) session closed after ``seconds``; ``version``: what it negotiated."""
        self.session_duration.record(seconds, {"mcp.protocol.version": version} if version in VERSIONS else {})

    def start(self, call: Call, parent: SpanContext | None) -> _OtelSpan:
        from opentelemetry import trace as api

        began = time.perf_counter()  # the spans may be unsampled (no times of their own): metrics time it here
        context = None
        if parent is not None:
            remote = api.SpanContext(
                int(parent.trace_id, 16),
                int(parent.span_id, 16),
                is_remote=True,
                trace_flags=api.TraceFlags(parent.flags),
            )
            context = api.set_span_in_context(api.NonRecordingSpan(remote))
        method = call.method
        common: dict[str, Any] = {"mcp.method.name": method}
        if method == TOOLS_CALL:
            common["gen_ai.operation.name"] = "execute_tool"
        ctx = call.context
        version = ctx.protocol_version if ctx is not None else call.meta.get(META_PROTOCOL_VERSION)
        if version in VERSIONS:  # only a known value (it is the client's input)
            common["mcp.protocol.version"] = version
        server_attrs, server_name = _target(common, method, call.exposed)
        client_attrs, client_name = _target(common, method, call.target)
        if call.session != "stateless":
            server_attrs["mcp.session.id"] = _session_id(call.session)
        if self.server_transport is not None:
            server_attrs["network.transport"] = self.server_transport
        if ctx is not None and ctx.request_id is not None:  # the client's id (the backend's is chosen below)
            server_attrs["jsonrpc.request.id"] = str(ctx.request_id)[:128]
        transport = self.transports.get(call.backend)
        if transport is not None:
            client_attrs["network.transport"] = transport
        client_attrs["hopline.backend"] = call.backend
        server = self.tracer.start_span(server_name, context=context, kind=api.SpanKind.SERVER, attributes=server_attrs)
        client = self.tracer.start_span(
            client_name, context=api.set_span_in_context(server), kind=api.SpanKind.CLIENT, attributes=client_attrs
        )
        sc = client.get_span_context()
        return _OtelSpan(
            self,
            server,
            client,
            SpanContext(f"{sc.trace_id:032x}", f"{sc.span_id:016x}", int(sc.trace_flags)),
            _metric(server_attrs),
            _metric(client_attrs),
            began,
        )

    def close(self) -> None:
        self.provider.shutdown()
        self.meters.shutdown()

    def __repr__(self) -> str:
        return f"<OtelSpans {self.provider.resource.attributes.get('service.name')}>"


class _OtelSpan:
    __slots__ = ("spans", "server", "client", "context", "server_metric", "client_metric", "began")

    def __init__(
        self,
        spans: OtelSpans,
        server: Any,
        client: Any,
        context: SpanContext,
        server_metric: dict[str, Any],
        client_metric: dict[str, Any],
        began: float,
    ) -> None:
        self.spans = spans
        self.server = server
        self.client = client
        self.context = context
        self.server_metric = server_metric
        self.client_metric = client_metric
        self.began = began

    def end(self, call: Call, answer: Message | None, error: BaseException | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        for name, attributes in call.events:
            if name != "trace":
                self.client.add_event(name, {k: _attribute(v) for k, v in attributes.items() if v is not None})
        kind = kind_of(answer, error)
        self.client.set_attribute("hopline.outcome", kind)
        outcome: dict[str, Any] = {}
        code = error_code(answer, error)
        if code is not None:
            outcome["rpc.response.status_code"] = str(code)
        if kind not in OK_KINDS:
            outcome["error.type"] = str(code) if code is not None else kind
        for span in (self.client, self.server):
            if outcome:
                span.set_attributes(outcome)
            if "error.type" in outcome:
                span.set_status(Status(StatusCode.ERROR, kind))  # not the peer's message: it may echo input
        took = time.perf_counter() - self.began
        self.client.end()
        self.server.end()
        spans = self.spans
        spans.client_duration.record(took, {**self.client_metric, **outcome})
        spans.server_duration.record(took, {**self.server_metric, **outcome})


def _target(common: dict[str, Any], method: str, name: str | None) -> tuple[dict[str, Any], str]:
    attributes = dict(common)
    if name:
        if method == TOOLS_CALL:
            attributes["gen_ai.tool.name"] = name
            return attributes, f"{method} {name}"
        if method == PROMPTS_GET:
            attributes["gen_ai.prompt.name"] = name
            return attributes, f"{method} {name}"
        if method in URI_METHODS:
            attributes["mcp.resource.uri"] = _uri(name)
    return attributes, method


def _metric(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k in METRIC_ATTRIBUTES}


def _session_id(binding: str) -> str:
    """A stable name for the session that reveals nothing usable (a digest of hopline's binding)."""
    return hashlib.sha256(binding.encode()).hexdigest()[:32]


def _uri(uri: str) -> str:
    """The URI without user info, query or fragment (where tokens travel)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri.split("?", 1)[0].split("#", 1)[0]
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _attribute(value: Any) -> Any:
    return value if isinstance(value, (str, bool, int, float)) else str(value)
