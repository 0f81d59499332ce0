"""OpenTelemetry spans, exported over OTLP/HTTP when configured (optional extra ``otel``).

For each routed request two spans: a SERVER span for the client's request (its
parent is the incoming trace context) and a CLIENT span for the backend call (its
context is what the next hop sees as parent, :mod:`.trace`). The layers' events
(``call.events``: retries, breaker rejections, policy decisions, timeouts) become
span events on the backend span; the outcome kind and error code become
attributes; any kind but ``ok``/``tool_error``/``error`` marks the span as an error.

Span names and attributes never carry arguments, results, URIs, tokens or session
ids. The SDK is imported only when this module builds spans, so hopline runs
without ``opentelemetry-sdk`` installed as long as OTLP is not configured. The
provider is hopline's own (not the global one) and is shut down by :meth:`close`,
which flushes what is batched.
"""

from __future__ import annotations

from typing import Any, Mapping

from hopline import NAME, __version__
from hopline.jsonrpc import Message
from hopline.observability.kinds import error_code, kind_of
from hopline.observability.trace import SpanContext
from hopline.pipeline import Call

NAMED = frozenset({"tools/call", "prompts/get"})
QUIET = frozenset({"ok", "tool_error", "error"})  # the hop worked; the answer is the backend's business


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
    ) -> None:
        """Export to ``endpoint`` (an OTLP/HTTP traces URL) in batches, or synchronously
        to ``exporter`` (any SDK ``SpanExporter``; tests pass an in-memory one)."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            processor: Any = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {})))
        else:
            processor = SimpleSpanProcessor(exporter)
        attributes = {"service.name": service_name, "service.version": __version__}
        if instance:
            attributes["service.instance.id"] = instance
        self.provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(sample_ratio)),
            resource=Resource.create(attributes),
            shutdown_on_exit=False,
        )
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer(NAME, __version__)

    def start(self, call: Call, parent: SpanContext | None) -> _OtelSpan:
        from opentelemetry import trace as api

        context = None
        if parent is not None:
            remote = api.SpanContext(
                int(parent.trace_id, 16),
                int(parent.span_id, 16),
                is_remote=True,
                trace_flags=api.TraceFlags(parent.flags),
            )
            context = api.set_span_in_context(api.NonRecordingSpan(remote))
        named = call.method in NAMED
        attributes: dict[str, Any] = {
            "rpc.system": "jsonrpc",
            "rpc.method": call.method,
            "mcp.method.name": call.method,
            "hopline.backend": call.backend,
        }
        server_name = f"{call.method} {call.exposed}" if named and call.exposed else call.method
        server = self.tracer.start_span(server_name, context=context, kind=api.SpanKind.SERVER, attributes=attributes)
        if named and call.target:
            attributes = {
                **attributes,
                "gen_ai.tool.name" if call.method == "tools/call" else "mcp.prompt.name": call.target,
            }
        client_name = f"{call.method} {call.target}" if named and call.target else call.method
        client = self.tracer.start_span(
            client_name, context=api.set_span_in_context(server), kind=api.SpanKind.CLIENT, attributes=attributes
        )
        sc = client.get_span_context()
        return _OtelSpan(server, client, SpanContext(f"{sc.trace_id:032x}", f"{sc.span_id:016x}", int(sc.trace_flags)))

    def close(self) -> None:
        self.provider.shutdown()

    def __repr__(self) -> str:
        return f"<OtelSpans {self.provider.resource.attributes.get('service.name')}>"


class _OtelSpan:
    __slots__ = ("server", "client", "context")

    def __init__(self, server: Any, client: Any, context: SpanContext) -> None:
        self.server = server
        self.client = client
        self.context = context

    def end(self, call: Call, answer: Message | None, error: BaseException | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        for name, attributes in call.events:
            if name != "trace":
                self.client.add_event(name, {k: _attribute(v) for k, v in attributes.items() if v is not None})
        kind = kind_of(answer, error)
        self.client.set_attribute("hopline.outcome", kind)
        code = error_code(answer, error)
        if code is not None:
            self.client.set_attribute("rpc.jsonrpc.error_code", code)
        if kind not in QUIET:
            for span in (self.client, self.server):
                span.set_status(Status(StatusCode.ERROR, kind))
        self.client.end()
        self.server.end()


def _attribute(value: Any) -> Any:
    return value if isinstance(value, (str, bool, int, float)) else str(value)
