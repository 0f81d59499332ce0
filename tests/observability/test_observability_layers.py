"""The observability call layers: propagation to a real backend, metrics scraped over HTTP,
one structured log line per request, OpenTelemetry spans (in memory and over OTLP/HTTP)."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import threading

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from hopline import jsonrpc as j
from hopline.binding import Era
from hopline.config.schema import GatewayConfig
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.resilience.breaker import Breakers, BreakerSettings
from hopline.compose.observability import build
from hopline.observability.hops import Hops, LoopDetected
from hopline.observability.logs import BatchedStream, ConsoleFormatter, JsonFormatter, RequestLog
from hopline.observability.metrics import Metrics
from hopline.observability.trace_layer import Propagation
from hopline.observability.trace import HOP_PARENT, parse
from hopline.pipeline import Call, Pipeline
from hopline.transports.stdio import StdioChild
from tests.conftest import PY, SERVERS

KEY = "io.modelcontextprotocol/proxy-hops"
VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OK = j.result(1, {"content": []})


def config(**observability) -> GatewayConfig:
    return GatewayConfig.model_validate({"name": "gw", "backends": {"b": {"command": "x"}}, "observability": observability})


def tool_call(meta: dict | None = None, target: str = "t") -> Call:
    params: dict = {"name": target, "arguments": {"secret": "s3cr3t-arg"}}
    if meta is not None:
        params["_meta"] = meta
    return Call(method="tools/call", backend="b", params=params, target=target, exposed=f"b__{target}")


async def answering(call: Call) -> j.Message:
    return OK


# -- propagation to a real backend ---------------------------------------------------------------
@pytest.fixture
async def fault_session():
    child = await StdioChild.spawn([PY, str(SERVERS / "fault_server.py")], name="b")
    session = await BackendSession.open("b", child, prefer=Era.HANDSHAKE, timeout=10)
    yield session
    await session.aclose()


@pytest.mark.req("TRACE-VERBATIM")
async def test_the_backend_receives_the_trace_verbatim_this_hops_span_and_the_hop_appended(fault_session):
    hops = Hops(key=KEY, name="gw", mode="forward", version="0.1.0", instance="gw-1")
    pipe = Pipeline(calls=[Propagation(hops=hops)])
    upstream_hop = {"name": "edge", "mode": "forward", "version": "2", "timestamp": "2026-01-01T00:00:00.000Z", "instance": "edge-1"}
    client_meta = {"traceparent": VALID, "tracestate": "a=1,b=2", KEY: [upstream_hop], "x-vendor/key": [1]}
    call = Call(method="tools/call", backend="b", params={"name": "meta", "arguments": {}, "_meta": client_meta}, target="meta")

    async def last(c: Call) -> j.Message:
        return await fault_session.call(c.method, c.params, timeout=10)

    answer = await asyncio.wait_for(pipe.run(call, last), 10)
    seen = json.loads(answer.body["result"]["content"][0]["text"])
    assert seen["traceparent"] == VALID and seen["tracestate"] == "a=1,b=2" and seen["x-vendor/key"] == [1]
    mine = parse(seen[HOP_PARENT])
    assert mine.trace_id == parse(VALID).trace_id and mine.span_id != parse(VALID).span_id
    assert seen[KEY][0] == upstream_hop and seen[KEY][1]["instance"] == "gw-1" and len(seen[KEY]) == 2
    assert client_meta[KEY] == [upstream_hop]  # the client's own _meta was not touched
    assert ("trace", {"trace_id": mine.trace_id, "span_id": mine.span_id, "parent_id": parse(VALID).span_id}) in call.events


async def test_a_loop_is_refused_before_anything_is_sent():
    sent = []

    async def last(c: Call) -> j.Message:
        sent.append(c)
        return OK

    pipe = Pipeline(calls=[Propagation(hops=Hops(key=KEY, name="gw", mode="forward", version="1", instance="me"))])
    with pytest.raises(LoopDetected):
        await pipe.run(tool_call({KEY: [{"instance": "me"}]}), last)
    assert sent == []


async def test_a_request_without_trace_context_gets_one():
    seen = []

    async def last(c: Call) -> j.Message:
        seen.append(c.params["_meta"])
        return OK

    await Pipeline(calls=[Propagation()]).run(tool_call(), last)
    assert parse(seen[0]["traceparent"]) == parse(seen[0][HOP_PARENT])


async def test_server_to_client_requests_are_not_stamped():
    seen = []

    async def last(c: Call) -> j.Message:
        seen.append(c.params)
        return OK

    params = {"messages": [], "_meta": {"k": 1}}
    await Pipeline(calls=[Propagation(hops=Hops(key=KEY, name="g", mode="forward", version="1"))]).run(Call(method="sampling/createMessage", backend="b", params=params, direction="to_client"), last)
    assert seen == [params]


# -- metrics, scraped from the admin app ------------------------------------------------------------
async def scrape(obs, path: str = "/metrics", host: str = "127.0.0.1:9") -> httpx.Response:
    transport = httpx.ASGITransport(app=obs.admin_app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as http:
        return await http.get(path)


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one series in an exposition (labels in any order)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return None


async def test_metrics_count_requests_errors_latency_retries_breakers_and_sessions():
    breakers = Breakers(BreakerSettings(failures=1))
    obs = build(config(metrics={"port": 0}), gates=[breakers], registry=CollectorRegistry())
    obs.track_sessions(lambda: 3)
    pipe = Pipeline(calls=[*obs.calls, breakers], gates=[breakers])

    async def flaky(c: Call) -> j.Message:
        c.event("retry", backend="b", attempt=2, delay_ms=1.0)
        return j.result(1, {"content": [], "isError": True})

    await pipe.run(tool_call(), answering)
    await pipe.run(tool_call(target="u"), flaky)

    async def broken(c: Call) -> j.Message:
        raise j.PeerError("garbage")

    with pytest.raises(j.PeerError):
        await pipe.run(tool_call(), broken)
    obs.list_fetch("b", "tools/list", asyncio.TimeoutError())
    r = await scrape(obs)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert sample(text, "hopline_requests_total", backend="b", method="tools/call", tool="t") == 2
    assert sample(text, "hopline_request_errors_total", backend="b", method="tools/call", tool="u", kind="tool_error") == 1
    assert sample(text, "hopline_request_errors_total", backend="b", method="tools/call", tool="t", kind="peer") == 1
    assert sample(text, "hopline_request_duration_seconds_count", backend="b", method="tools/call") == 3
    assert sample(text, "hopline_retries_total", backend="b", method="tools/call") == 1
    assert sample(text, "hopline_breaker_state", backend="b", hopline_breaker_state="open") == 1
    assert sample(text, "hopline_breaker_transitions_total", backend="b", state="open") == 1
    assert sample(text, "hopline_sessions_open") == 3
    assert sample(text, "hopline_list_fetches_total", backend="b", method="tools/list", kind="timeout") == 1
    assert "s3cr3t-arg" not in text


def test_metric_labels_are_bounded():
    m = Metrics(CollectorRegistry())
    for i in range(600):
        m.record(Call(method="tools/call", backend="b", params={}, target=f"tool{i}"), OK, None, 0.001)
    m.record(Call(method="x/client-chosen-method", backend="b", params={}, target="y"), OK, None, 0.001)
    m.record(Call(method="resources/read", backend="b", params={}, target="file:///home/secret.txt"), OK, None, 0.001)
    from prometheus_client import generate_latest

    obs_text = generate_latest(m.registry).decode()
    tools = {line.split('tool="')[1].split('"')[0] for line in obs_text.splitlines() if line.startswith("hopline_requests_total{")}
    assert len(tools - {""}) == 501 and "other" in tools  # 500 distinct, then "other"; "" for unnamed methods
    assert 'method="other"' in obs_text and "secret.txt" not in obs_text and "client-chosen" not in obs_text


@pytest.mark.parametrize("path,host,status", [("/healthz", "127.0.0.1:9", 200), ("/nope", "localhost:9", 404), ("/metrics", "evil.example", 403), ("/metrics", "[::1]:9", 200)])
async def test_the_admin_app_answers_only_what_it_serves_to_loopback_hosts(path, host, status):
    obs = build(config(metrics={"port": 0}), registry=CollectorRegistry())
    assert (await scrape(obs, path, host)).status_code == status


@pytest.mark.parametrize("origin,status", [("http://evil.example", 403), ("null", 403), ("http://127.evil.example", 403), ("http://localhost:3000", 200),
                                           ("http://[::1]:8", 200), (None, 200)])
async def test_the_admin_app_refuses_a_foreign_origin(origin, status):
    obs = build(config(metrics={"port": 0}), registry=CollectorRegistry())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=obs.admin_app), base_url="http://127.0.0.1:9") as http:
        r = await http.get("/metrics", headers={} if origin is None else {"origin": origin})
    assert r.status_code == status


async def test_the_admin_app_refuses_duplicated_origins_and_a_host_that_only_starts_with_127():
    obs = build(config(metrics={"port": 0}), registry=CollectorRegistry())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=obs.admin_app), base_url="http://127.0.0.1:9") as http:
        twice = await http.get("/metrics", headers=[("origin", "http://localhost"), ("origin", "http://localhost")])
        rebound = await http.get("/metrics", headers={"host": "127.evil.example"})
    assert twice.status_code == 403 and rebound.status_code == 403


async def test_readiness_follows_the_gateway_while_liveness_stays_up():
    obs = build(config(metrics={"port": 0}), registry=CollectorRegistry())
    assert (await scrape(obs, "/readyz")).status_code == 200
    ready = [False]
    obs.readiness(lambda: ready[0])
    r = await scrape(obs, "/readyz")
    assert r.status_code == 503 and r.text == "not ready\n"
    assert (await scrape(obs, "/healthz")).status_code == 200
    ready[0] = True
    assert (await scrape(obs, "/readyz")).status_code == 200


def test_metrics_are_off_without_an_admin_port():
    obs = build(config())
    assert obs.metrics is None and obs.admin_app is None
    assert [type(c).__name__ for c in obs.calls] == ["RequestLog", "Propagation"]


# -- logs --------------------------------------------------------------------------------------
class Capture(logging.Handler):
    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(formatter)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def request_log():
    logger = logging.getLogger("hopline.requests.test")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    capture = Capture(JsonFormatter())
    logger.addHandler(capture)
    yield logger, capture
    logger.removeHandler(capture)


async def test_one_json_line_per_request_with_the_trace_id_and_no_secrets(request_log):
    logger, capture = request_log
    pipe = Pipeline(calls=[RequestLog(logger), Propagation()])
    await pipe.run(tool_call({"traceparent": VALID, "authorization": "Bearer tok-123"}), answering)

    async def timing_out(c: Call) -> j.Message:
        raise j.BackendTimeout("backend at http://user:pw@b.example did not answer", backend="http://user:pw@b.example")

    with pytest.raises(j.BackendTimeout):
        await pipe.run(tool_call(), timing_out)
    assert len(capture.lines) == 2
    first, second = (json.loads(line) for line in capture.lines)
    assert first["msg"] == "request" and first["level"] == "info" and first["method"] == "tools/call"
    assert first["backend"] == "b" and first["tool"] == "t" and first["kind"] == "ok" and first["trace_id"] == parse(VALID).trace_id
    assert second["kind"] == "timeout" and second["code"] == -31002 and len(second["trace_id"]) == 32
    joined = "\n".join(capture.lines)
    assert "tok-123" not in joined and "s3cr3t-arg" not in joined and "pw@" not in joined


async def test_no_line_when_info_is_off(request_log):
    logger, capture = request_log
    logger.setLevel(logging.WARNING)
    await Pipeline(calls=[RequestLog(logger)]).run(tool_call(), answering)
    assert capture.lines == []


async def test_request_lines_honour_an_installed_record_factory(request_log):
    logger, capture = request_log
    made = []
    default = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = default(*args, **kwargs)
        made.append(record)
        return record

    logging.setLogRecordFactory(factory)
    try:
        await Pipeline(calls=[RequestLog(logger)]).run(tool_call(), answering)
    finally:
        logging.setLogRecordFactory(default)
    assert len(made) == 1 and json.loads(capture.lines[0])["kind"] == "ok"


class Writes:
    """A stream that keeps each write apart."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


async def test_lines_logged_in_one_loop_iteration_leave_in_one_write_in_order():
    target = Writes()
    handler = logging.StreamHandler(BatchedStream(target))
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("hopline.test.batched")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.warning("one")
        logger.warning("two")
        assert target.writes == []  # held until the end of this iteration
        await asyncio.sleep(0)
        assert target.writes == ["one\ntwo\n"]
    finally:
        logger.removeHandler(handler)


def test_outside_the_loop_a_batched_stream_writes_at_once():
    target = Writes()
    stream = BatchedStream(target)
    stream.write("line\n")
    stream.flush()
    assert target.writes == ["line\n"]


def test_the_console_format_appends_the_fields():
    record = logging.LogRecord("hopline.requests", logging.INFO, __file__, 1, "request", None, None)
    record.hopline = {"method": "tools/call", "trace_id": "abc", "code": None}
    line = ConsoleFormatter().format(record)
    assert line.endswith("request method=tools/call trace_id=abc")


# -- OpenTelemetry -------------------------------------------------------------------------------
async def test_spans_for_the_request_and_the_backend_call_with_layer_events():
    exporter = InMemorySpanExporter()
    obs = build(config(), exporter=exporter)
    breakers = Breakers(BreakerSettings(failures=1, cool_down=60))
    pipe = Pipeline(calls=[*obs.calls, breakers])
    seen = []

    async def last(c: Call) -> j.Message:
        seen.append(c.params["_meta"])
        raise j.UnavailableError("gone", backend="b", reason="backend_closed")

    with pytest.raises(j.UnavailableError):
        await pipe.run(tool_call({"traceparent": VALID}), last)
    with pytest.raises(j.UnavailableError):  # fails fast: circuit open
        await pipe.run(tool_call({"traceparent": VALID}), last)
    spans = exporter.get_finished_spans()
    assert len(spans) == 4
    client, server = spans[0], spans[1]
    assert server.name == "tools/call b__t" and client.name == "tools/call t"
    assert server.parent.span_id == int(parse(VALID).span_id, 16) and server.context.trace_id == int(parse(VALID).trace_id, 16)
    assert client.parent.span_id == server.context.span_id
    assert parse(seen[0][HOP_PARENT]).span_id == f"{client.context.span_id:016x}"  # the next hop's parent is the backend span
    assert client.attributes["hopline.outcome"] == "unavailable" and client.attributes["gen_ai.tool.name"] == "t"
    assert client.attributes["error.type"] == "-31001" and server.attributes["gen_ai.tool.name"] == "b__t"
    assert not client.status.is_ok
    assert [e.name for e in spans[2].events] == ["breaker.rejected"] and spans[2].attributes["hopline.outcome"] == "circuit_open"
    assert all("s3cr3t" not in str(s.attributes) for s in spans)
    obs.close()


async def test_spans_are_exported_over_otlp_http_when_an_endpoint_is_configured():
    received: list[bytes] = []
    arrived = threading.Event()

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["content-length"]))
            if self.path == "/v1/traces":  # metrics go to /v1/metrics (tests/observability/test_otel_conventions.py)
                received.append(body)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.end_headers()
            arrived.set()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        obs = build(config(otel={"endpoint": endpoint, "service_name": "gw-test"}))
        await Pipeline(calls=obs.calls).run(tool_call({"traceparent": VALID}), answering)
        await asyncio.to_thread(obs.close)  # flushes the batch
        assert await asyncio.to_thread(arrived.wait, 10)
    finally:
        server.shutdown()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(b"".join(received))
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    service = {a.value.string_value for rs in request.resource_spans for a in rs.resource.attributes if a.key == "service.name"}
    assert service == {"gw-test"} and sorted(s.name for s in spans) == ["tools/call b__t", "tools/call t"]
    assert {s.trace_id.hex() for s in spans} == {parse(VALID).trace_id}


def test_otel_endpoint_must_be_http():
    with pytest.raises(ValidationError, match="endpoint"):
        config(otel={"endpoint": "file:///tmp/x"})


def test_the_hop_key_and_identity_are_configurable():
    obs = build(config(hops={"key": "io.example/hops", "instance": "edge-7", "max_depth": 3}))
    assert obs.hops.key == "io.example/hops" and obs.hops.instance == "edge-7" and obs.hops.max_depth == 3
    assert build(config(hops={"enabled": False}, trace={"enabled": False}, logs={"requests": False})).calls == []
