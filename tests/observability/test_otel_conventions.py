"""hopline's spans and metrics against OpenTelemetry's MCP semantic conventions
(open-telemetry/semantic-conventions-genai v0.1.0, docs/gen-ai/mcp.md): span names and
kinds, attribute names, metric names, units and buckets, in memory and over OTLP/HTTP
from two real ``hopline serve`` processes in a federation (one trace across both).

The lists below are written from the conventions' text, not imported from hopline."""

from __future__ import annotations

import http.server
import signal
import threading

import pytest
import yaml
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from hopline import jsonrpc as j
from hopline.compose.observability import build
from hopline.config.schema import GatewayConfig
from hopline.context import Context
from hopline.pipeline import Call, Pipeline
from tests.conftest import sdk_server_cmd
from tests.peers import bounded, client

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

# The attributes the conventions define for the mcp.client and mcp.server spans.
CONVENTION_ATTRIBUTES = {
    "mcp.method.name", "error.type", "gen_ai.prompt.name", "gen_ai.tool.name", "jsonrpc.request.id",
    "mcp.resource.uri", "rpc.response.status_code", "gen_ai.operation.name", "jsonrpc.protocol.version",
    "mcp.protocol.version", "mcp.session.id", "network.protocol.name", "network.protocol.version",
    "network.transport", "server.address", "server.port", "client.address", "client.port",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
}  # fmt: skip
# The metrics' attributes (no session id, no request id; the URI only opt-in).
METRIC_ATTRIBUTES = {
    "mcp.method.name", "error.type", "gen_ai.prompt.name", "gen_ai.tool.name", "rpc.response.status_code",
    "gen_ai.operation.name", "jsonrpc.protocol.version", "mcp.protocol.version", "network.protocol.name",
    "network.protocol.version", "network.transport", "server.address", "server.port",
}  # fmt: skip
OPERATION_METRICS = {"mcp.server.operation.duration", "mcp.client.operation.duration"}
SESSION_METRIC = "mcp.server.session.duration"  # histogram, s; attributes: mcp.protocol.version, error.type, network.*
SESSION_ATTRIBUTES = {"mcp.protocol.version", "error.type", "network.protocol.name", "network.protocol.version", "network.transport"}
BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


def ours(name: str) -> bool:
    return name.startswith("hopline.")


def config(**observability) -> GatewayConfig:
    return GatewayConfig.model_validate(
        {"name": "gw", "backends": {"b": {"command": "x"}, "r": {"url": "http://127.0.0.1:9/mcp"}}, "observability": observability}
    )


def call(method: str, target: str, exposed: str, *, backend: str = "b", meta: dict | None = None, session: str = "stateless") -> Call:
    key = {"tools/call": "name", "prompts/get": "name"}.get(method, "uri")
    params: dict = {key: target, "arguments": {"secret": "s3cr3t-arg"}}
    if meta is not None:
        params["_meta"] = meta
    return Call(method=method, backend=backend, params=params, target=target, exposed=exposed, session=session, meta=meta or {})


def answer(body: dict):
    async def last(c: Call) -> j.Message:
        return j.Message(body)

    return last


def observed():
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    return build(config(), exporter=exporter, metric_reader=reader), exporter, reader


def points(reader) -> dict[str, list]:
    out: dict[str, list] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend((m.unit, p) for p in m.data.data_points)
    return out


async def test_tool_call_spans_are_named_kinded_and_attributed_by_the_conventions():
    obs, exporter, reader = observed()
    pipe = Pipeline(calls=obs.calls)
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    await pipe.run(call("tools/call", "t", "b__t", meta={"traceparent": VALID}, session="binding-secret-1"), answer(ok))
    client_span, server_span = exporter.get_finished_spans()
    assert (server_span.name, server_span.kind) == ("tools/call b__t", SpanKind.SERVER)
    assert (client_span.name, client_span.kind) == ("tools/call t", SpanKind.CLIENT)
    assert client_span.parent.span_id == server_span.context.span_id
    for span, tool in ((server_span, "b__t"), (client_span, "t")):
        a = span.attributes
        assert a["mcp.method.name"] == "tools/call" and a["gen_ai.operation.name"] == "execute_tool"
        assert a["gen_ai.tool.name"] == tool and "error.type" not in a and span.status.is_ok
        assert {k for k in a if not ours(k)} <= CONVENTION_ATTRIBUTES, set(a) - CONVENTION_ATTRIBUTES
    assert client_span.attributes["network.transport"] == "pipe"  # a stdio backend
    session = server_span.attributes["mcp.session.id"]
    assert len(session) == 32 and "binding-secret-1" not in str(server_span.attributes)  # a digest, not the binding
    assert all("s3cr3t" not in str(s.attributes) for s in (client_span, server_span))
    seen = points(reader)
    assert OPERATION_METRICS <= set(seen)
    for name in OPERATION_METRICS:
        ((unit, point),) = seen[name]
        assert unit == "s" and point.count == 1 and tuple(point.explicit_bounds) == BUCKETS
        assert {k for k in point.attributes if not ours(k)} <= METRIC_ATTRIBUTES and point.attributes["gen_ai.tool.name"]
    assert seen["mcp.client.operation.duration"][0][1].attributes["hopline.backend"] == "b"  # as Prometheus' backend label
    obs.close()


@pytest.mark.parametrize(
    ("method", "body", "error_type", "status_code"),
    [
        ("tools/call", {"result": {"content": [], "isError": True}}, "tool_error", None),
        ("tools/call", {"error": {"code": -32602, "message": "bad s3cr3t-arg"}}, "-32602", "-32602"),
        ("prompts/get", {"error": {"code": -32603, "message": "boom"}}, "-32603", "-32603"),
    ],
)
async def test_errors_set_error_type_and_the_error_status(method, body, error_type, status_code):
    obs, exporter, reader = observed()
    await Pipeline(calls=obs.calls).run(call(method, "p", "b__p"), answer({"jsonrpc": "2.0", "id": 1, **body}))
    spans = exporter.get_finished_spans()
    for span in spans:
        assert span.attributes["error.type"] == error_type and not span.status.is_ok
        assert span.attributes.get("rpc.response.status_code") == status_code
        assert "s3cr3t" not in str(span.status.description)
    if method == "prompts/get":
        assert [s.name for s in spans] == ["prompts/get p", "prompts/get b__p"]
        assert spans[0].attributes["gen_ai.prompt.name"] == "p" and "gen_ai.operation.name" not in spans[0].attributes
    for name in OPERATION_METRICS:
        ((_, point),) = points(reader)[name]
        assert point.attributes["error.type"] == error_type
    obs.close()


async def test_the_server_span_names_the_clients_request_id_and_the_negotiated_version():
    obs, exporter, reader = observed()
    obs.listening("pipe")  # hopline serve --stdio
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    c = call("tools/call", "t", "b__t")
    c.context = Context(request_id=7, protocol_version="2025-06-18")
    await Pipeline(calls=obs.calls).run(c, answer(ok))
    client_span, server_span = exporter.get_finished_spans()
    assert server_span.attributes["jsonrpc.request.id"] == "7" and "jsonrpc.request.id" not in client_span.attributes
    assert server_span.attributes["network.transport"] == "pipe"
    assert server_span.attributes["mcp.protocol.version"] == client_span.attributes["mcp.protocol.version"] == "2025-06-18"
    c = call("tools/call", "t", "b__t")
    c.context = Context(request_id="r-1", protocol_version="1999-01-01")  # not a version: not an attribute
    await Pipeline(calls=obs.calls).run(c, answer(ok))
    assert all("mcp.protocol.version" not in s.attributes for s in exporter.get_finished_spans()[2:])
    for name in OPERATION_METRICS:
        assert all("jsonrpc.request.id" not in p.attributes for _, p in points(reader)[name])
    obs.close()


async def test_unsampled_traces_record_no_spans_but_still_the_metrics():
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    obs = build(config(otel={"sample_ratio": 0}), exporter=exporter, metric_reader=reader)
    unsampled = VALID[:-2] + "00"
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    await Pipeline(calls=obs.calls).run(call("tools/call", "t", "b__t", meta={"traceparent": unsampled}), answer(ok))
    assert exporter.get_finished_spans() == ()
    for name in OPERATION_METRICS:
        ((_, point),) = points(reader)[name]
        assert point.count == 1 and point.attributes["mcp.method.name"] == "tools/call"
    obs.close()


async def test_a_backend_that_is_down_gives_hoplines_error_code_as_error_type():
    obs, exporter, _ = observed()

    async def gone(c: Call) -> j.Message:
        raise j.UnavailableError("gone", backend="r", reason="backend_closed")

    with pytest.raises(j.UnavailableError):
        await Pipeline(calls=obs.calls).run(call("tools/call", "t", "r__t", backend="r"), gone)
    client_span, server_span = exporter.get_finished_spans()
    assert client_span.attributes["error.type"] == "-31001" and client_span.attributes["hopline.outcome"] == "unavailable"
    assert client_span.attributes["network.transport"] == "tcp"  # an HTTP backend
    obs.close()


async def test_a_resource_uri_is_an_attribute_without_its_secrets_and_never_the_span_name():
    obs, exporter, reader = observed()
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"contents": []}}
    uri = "https://user:pw@example.com/doc?token=s3cr3t#frag"
    await Pipeline(calls=obs.calls).run(call("resources/read", uri, uri), answer(ok))
    for span in exporter.get_finished_spans():
        assert span.name == "resources/read"
        assert span.attributes["mcp.resource.uri"] == "https://example.com/doc"
        assert "gen_ai.operation.name" not in span.attributes
    for name in OPERATION_METRICS:
        ((_, point),) = points(reader)[name]
        assert "mcp.resource.uri" not in point.attributes  # opt-in only: unbounded values
    obs.close()


# -- two real `hopline serve` processes exporting over OTLP/HTTP to a loopback receiver -------------
class Receiver:
    """An OTLP/HTTP receiver on loopback: keeps each protobuf post by path."""

    def __init__(self) -> None:
        self.posts: dict[str, list[bytes]] = {}
        lock = threading.Lock()
        posts = self.posts

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["content-length"]))
                with lock:
                    posts.setdefault(self.path, []).append(body)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[str, object]]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for body in self.posts.get("/v1/traces", []):
            for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                service = next(a.value.string_value for a in rs.resource.attributes if a.key == "service.name")
                out += [(service, s) for ss in rs.scope_spans for s in ss.spans]
        return out

    def metrics(self) -> list[tuple[str, object]]:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        out = []
        for body in self.posts.get("/v1/metrics", []):
            for rm in ExportMetricsServiceRequest.FromString(body).resource_metrics:
                service = next(a.value.string_value for a in rm.resource.attributes if a.key == "service.name")
                out += [(service, m) for sm in rm.scope_metrics for m in sm.metrics]
        return out


def gateway(tmp_path, name: str, backends: dict, otlp: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "backends": backends, "observability": {"otel": {"endpoint": otlp}}}))
    return str(path)


async def test_a_federation_of_two_real_gateways_exports_one_trace_and_the_operation_metrics(tmp_path, hopline_serve):
    from mcp.client.streamable_http import streamable_http_client

    receiver = Receiver()
    try:
        cmd = sdk_server_cmd()
        inner = hopline_serve(gateway(tmp_path, "inner", {"demo": {"command": cmd[0], "args": cmd[1:]}}, receiver.url))
        outer = hopline_serve(gateway(tmp_path, "outer", {"in": {"url": inner.url, "transport": "streamable-http"}}, receiver.url))
        async with client(streamable_http_client(outer.url), "legacy") as c:
            (echo,) = [t.name for t in (await bounded(c.list_tools())).tools if t.name.endswith("echo")]
            await bounded(c.call_tool(echo, {"text": "s3cr3t-arg"}))
        # Both flush their spans and metrics on the way out (before: uvicorn re-raised SIGTERM
        # before hopline's shutdown ran, and what was batched was lost); the status still says SIGTERM.
        assert outer.stop() == inner.stop() == -signal.SIGTERM
    finally:
        receiver.server.shutdown()
    calls = [(svc, s) for svc, s in receiver.spans() if s.name.startswith("tools/call")]
    by = {(svc, s.kind): s for svc, s in calls}
    assert len(calls) == 4 and len(by) == 4, [(svc, s.name, s.kind) for svc, s in calls]
    server_kind, client_kind = 2, 3  # the OTLP protobuf's SPAN_KIND_SERVER, SPAN_KIND_CLIENT
    o_server, o_client = by["outer", server_kind], by["outer", client_kind]
    i_server, i_client = by["inner", server_kind], by["inner", client_kind]
    assert o_server.name == f"tools/call {echo}" and i_client.name == "tools/call echo"
    assert len({s.trace_id for _, s in calls}) == 1  # client → outer → inner → backend: one trace
    assert o_client.parent_span_id == o_server.span_id and i_server.parent_span_id == o_client.span_id
    assert i_client.parent_span_id == i_server.span_id
    for _, span in calls:
        names = {a.key for a in span.attributes}
        assert {k for k in names if not ours(k)} <= CONVENTION_ATTRIBUTES
        assert {"mcp.method.name", "gen_ai.operation.name", "gen_ai.tool.name"} <= names
        assert "s3cr3t" not in str(span.attributes)
    for server in (o_server, i_server):
        attributes = {a.key: a.value.string_value for a in server.attributes}
        assert attributes["mcp.protocol.version"] and attributes["jsonrpc.request.id"] and attributes["mcp.session.id"]
        assert attributes["network.transport"] == "tcp"  # clients reach hopline serve over HTTP
    assert {a.value.string_value for a in i_client.attributes if a.key == "network.transport"} == {"pipe"}
    assert {a.value.string_value for a in o_client.attributes if a.key == "network.transport"} == {"tcp"}
    metrics = receiver.metrics()
    for service in ("outer", "inner"):
        mine = {m.name: m for svc, m in metrics if svc == service}
        assert OPERATION_METRICS <= set(mine), sorted(mine)
        for name in OPERATION_METRICS:
            assert mine[name].unit == "s" and mine[name].HasField("histogram")
            for point in mine[name].histogram.data_points:
                assert {a.key for a in point.attributes if not ours(a.key)} <= METRIC_ATTRIBUTES
        # the client's session with outer, outer's session with inner: each ended and was measured
        session = mine[SESSION_METRIC]
        assert session.unit == "s" and sum(p.count for p in session.histogram.data_points) >= 1
        for point in session.histogram.data_points:
            assert {a.key for a in point.attributes} <= SESSION_ATTRIBUTES
            assert {a.key for a in point.attributes} == {"mcp.protocol.version"}
