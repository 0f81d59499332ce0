"""Resilience and observability through the public gateway (``hopline serve``).

- A breaker opening and closing is seen by a real SDK client as ``list_changed`` and a
  changed tool list (draft §11.1); readiness follows it (FAULT-13).
- A client's trace through two chained hoplines is one trace with both hops (§12).
- ``/metrics`` is scraped from the admin listener.
- Faults (test-battery FAULT-01..07, 09, 16): every request gets exactly one answer,
  promptly. The stdio tests read the gateway's raw output, so a duplicate or a missing
  answer cannot hide; the HTTP backend tests put tests/faults/tcp_proxy.py between the
  gateway and a ``hopline relay`` of fault_server.py.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import signal
import threading
from collections import defaultdict
from typing import Any

import httpx
import orjson
import psutil
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, SERVERS
from tests.faults.tcp_proxy import FaultProxy
from tests.peers import bounded, client, text_of
from tests.helpers import write_yaml as write

FAULT = [PY, str(SERVERS / "fault_server.py")]
DEMO = [PY, "-m", "hopline.demo"]
VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HOPS = "io.modelcontextprotocol/proxy-hops"
PROMPT = 5.0  # "promptly": seconds, generous for 2 shared cores
STARTED = 45.0  # a bound on a start that hangs (a start itself waits for its answer, however long the machine takes)


def stdio(argv: list[str], **extra: Any) -> dict[str, Any]:
    return {"command": argv[0], "args": argv[1:], **extra}


class Changes:
    """Counts ``notifications/tools/list_changed`` seen by an SDK client."""

    def __init__(self) -> None:
        self.count = 0
        self.event = asyncio.Event()

    async def __call__(self, message) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification) or getattr(root, "method", None) == "notifications/tools/list_changed":
            self.count += 1
            self.event.set()

    async def next(self, timeout: float = 10.0) -> None:
        await asyncio.wait_for(self.event.wait(), timeout)
        self.event.clear()


async def names(c) -> set[str]:
    return {t.name for t in (await bounded(c.list_tools())).tools}


# -- breakers seen by a real client -------------------------------------------------------------
@pytest.mark.req("BREAKER-WITHDRAW")
async def test_a_breaker_opening_and_closing_is_seen_by_an_sdk_client(tmp_path, hopline_serve):
    conf = {
        "routing": {"retry_after": 0.2},
        # required: its open breaker makes /readyz 503 (a backend not required leaves the replica ready)
        "backends": {"demo": stdio(DEMO), "fault": {**stdio(FAULT), "required": True}},
        "resilience": {"breaker": {"failures": 2, "cool_down": 1.5}, "timeouts": {"tools": {"fault": {"stall": 0.3}}}},
    }
    gw = hopline_serve(write(tmp_path, conf), "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    changes = Changes()
    async with client(gw.url, "legacy", message_handler=changes) as c, httpx.AsyncClient(timeout=10) as http:
        assert {"demo__echo", "fault__echo", "fault__stall"} <= await names(c)
        assert (await http.get(f"{admin}/readyz")).status_code == 200
        for _ in range(2):
            with pytest.raises(MCPError) as err:
                await bounded(c.call_tool("fault__stall", {}), PROMPT)
            assert err.value.code == -31002 and err.value.data == {"backend": "fault", "reason": "timeout"}
        await changes.next()  # OPEN: withdrawn, with the change signal
        withdrawn = await names(c)
        assert "demo__echo" in withdrawn and not any(n.startswith("fault__") for n in withdrawn)
        with pytest.raises(MCPError) as err:  # a client holding the old list fails fast, told why
            await bounded(c.call_tool("fault__echo", {"text": "x"}), PROMPT)
        assert err.value.code == -31001 and err.value.data["backend"] == "fault" and err.value.data["reason"] == "circuit_open"
        assert (await http.get(f"{admin}/readyz")).status_code == 503  # not ready (fault is required), liveness stays up
        assert (await http.get(f"{admin}/healthz")).status_code == 200
        await changes.next()  # the trial (a ping) succeeded: CLOSED, restored, signalled again
        assert "fault__echo" in await names(c)
        assert text_of(await bounded(c.call_tool("fault__echo", {"text": "back"}))) == "back"
        assert (await http.get(f"{admin}/readyz")).status_code == 200
        metrics = (await http.get(f"{admin}/metrics")).text
    assert 'hopline_breaker_transitions_total{backend="fault",state="open"} 1.0' in metrics
    assert 'hopline_breaker_transitions_total{backend="fault",state="closed"} 1.0' in metrics


# -- one trace through two hoplines ---------------------------------------------------------------
class Collector:
    """An OTLP/HTTP traces endpoint in this process: decodes what it receives."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.spans: list[tuple[str, Any]] = []  # (service.name, span)
        self.arrived = threading.Condition()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["content-length"]))
                request = ExportTraceServiceRequest.FromString(body)
                with collector.arrived:
                    for rs in request.resource_spans:
                        service = next(a.value.string_value for a in rs.resource.attributes if a.key == "service.name")
                        collector.spans.extend((service, s) for ss in rs.scope_spans for s in ss.spans)
                    collector.arrived.notify_all()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def wait_for(self, count: int, timeout: float = 15.0) -> list[tuple[str, Any]]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.spans) >= count, timeout)
            return list(self.spans)


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.server.shutdown()


@pytest.mark.req("HOPS-APPEND")
async def test_two_chained_hoplines_produce_one_trace_with_both_hops(tmp_path, hopline_serve, collector):
    env = {"OTEL_BSP_SCHEDULE_DELAY": "100"}  # export batches quickly
    inner_conf = {"name": "inner", "backends": {"fault": stdio(FAULT)}, "observability": {"hops": {"instance": "inner-1"}, "otel": {"endpoint": collector.url}}}
    inner = hopline_serve(write(tmp_path, inner_conf, "inner.yaml"), env=env)
    outer_conf = {"name": "outer", "backends": {"team": {"url": inner.url}}, "observability": {"hops": {"instance": "outer-1"}, "otel": {"endpoint": collector.url}}}
    outer = hopline_serve(write(tmp_path, outer_conf, "outer.yaml"), env=env)
    async with client(outer.url, "legacy") as c:
        assert "team__fault__meta" in await names(c)
        result = await bounded(c.call_tool("team__fault__meta", {}, meta={"traceparent": VALID, "tracestate": "vendor=opaque"}))
    seen = json.loads(text_of(result))
    assert seen["traceparent"] == VALID and seen["tracestate"] == "vendor=opaque"  # verbatim through both hops
    assert [(h["name"], h["instance"]) for h in seen[HOPS]] == [("outer", "outer-1"), ("inner", "inner-1")]
    trace_id = VALID.split("-")[1]
    assert seen["io.hopline/traceparent"].split("-")[1] == trace_id
    spans = collector.wait_for(4)
    by = {(service, s.kind): s for service, s in spans}
    assert {s.trace_id.hex() for _, s in spans} == {trace_id}  # one trace
    SERVER, CLIENT = 2, 3  # OTLP SpanKind
    assert by[("outer", SERVER)].parent_span_id.hex() == VALID.split("-")[2]
    assert by[("outer", CLIENT)].parent_span_id == by[("outer", SERVER)].span_id
    assert by[("inner", SERVER)].parent_span_id == by[("outer", CLIENT)].span_id  # the second hop hangs under the first
    assert by[("inner", CLIENT)].span_id.hex() == seen["io.hopline/traceparent"].split("-")[2]


async def test_a_request_looping_back_into_the_same_hopline_is_refused(tmp_path, hopline_serve):
    """A loop through the same instance: the hop entry names it, so the request is refused."""
    conf = {"backends": {"fault": stdio(FAULT)}, "observability": {"hops": {"instance": "gw-loop"}}}
    gw = hopline_serve(write(tmp_path, conf))
    forged = {HOPS: [{"name": "hopline", "mode": "forward", "version": "0", "timestamp": "t", "instance": "gw-loop"}]}
    async with client(gw.url, "legacy") as c:
        with pytest.raises(MCPError) as err:
            await bounded(c.call_tool("fault__echo", {"text": "x"}, meta=forged))
        assert err.value.code == -32600 and err.value.data["reason"] == "loop"


# -- metrics ----------------------------------------------------------------------------------------
async def test_metrics_are_scraped_from_the_admin_listener(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"backends": {"demo": stdio(DEMO)}}), "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)").group(1)
    async with client(gw.url, "legacy") as c:
        await bounded(c.call_tool("demo__echo", {"text": "Bearer secret-token-123"}))
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.get(admin)
            mcp_port = await http.get(gw.url.replace("/mcp", "/metrics"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert 'hopline_requests_total{backend="demo",method="tools/call",tool="echo"} 1.0' in r.text
    assert "hopline_sessions_open 1.0" in r.text
    assert "secret-token-123" not in r.text
    assert mcp_port.status_code != 200  # metrics are never on the client-facing listener


# -- faults on a stdio backend, read off the gateway's raw stdout ------------------------------------
class Wire:
    """``hopline serve --stdio`` with a raw line client: every answer is seen."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.answers: dict[Any, list[dict]] = defaultdict(list)
        self.notifications: list[dict] = []
        self._arrived = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self._ids = 100
        self.ended = False  # its stdout closed

    @classmethod
    async def start(cls, config_path: str) -> Wire:
        proc = await asyncio.create_subprocess_exec(PY, "-m", "hopline", "serve", "--stdio", config_path, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wire = cls(proc)
        await wire.started(wire.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "wire", "version": "1"}}))
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await wire.started(wire.request("tools/list"))
        return wire

    async def started(self, msg_id: int) -> dict:
        """The answer to a request made while hopline and its backends start: it takes what the machine
        gives it (a loaded one takes more than PROMPT), so this waits for the answer or for the process's
        end, whichever comes first; STARTED only bounds a hang, below pytest's own timeout."""
        await self.until(lambda: bool(self.answers.get(msg_id)) or self.ended, STARTED)
        assert self.answers.get(msg_id), f"hopline serve --stdio ended (status {self.proc.returncode}) before answering"
        return self.answers[msg_id][0]

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = orjson.loads(line)
            if "method" in message:
                self.notifications.append(message)
            else:
                self.answers[message.get("id")].append(message)
            self._arrived.set()
        self.ended = True
        self._arrived.set()

    async def until(self, predicate, timeout: float = PROMPT) -> None:
        """Wait (bounded) until ``predicate()`` holds, re-checking as messages arrive."""

        async def wait() -> None:
            while not predicate():
                self._arrived.clear()
                await self._arrived.wait()

        await asyncio.wait_for(wait(), timeout)

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(message) + b"\n")

    def request(self, method: str, params: dict | None = None) -> int:
        self._ids += 1
        self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params or {}})
        return self._ids

    def tool(self, name: str, arguments: dict | None = None) -> int:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}})

    async def answer(self, msg_id: int, timeout: float = PROMPT) -> dict:
        await self.until(lambda: bool(self.answers.get(msg_id)), timeout)
        return self.answers[msg_id][0]

    def changes(self) -> int:
        return sum(1 for n in self.notifications if n["method"] == "notifications/tools/list_changed")

    async def call(self, method: str, params: dict | None = None, timeout: float = PROMPT) -> dict:
        return await self.answer(self.request(method, params), timeout)

    async def aclose(self) -> None:
        children = psutil.Process(self.proc.pid).children(recursive=True)
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()
        _gone, alive = psutil.wait_procs(children, timeout=5)
        for p in alive:
            p.kill()
        assert not alive, f"children left behind: {alive}"

    def assert_exactly_one_answer_each(self) -> None:
        twice = {i: a for i, a in self.answers.items() if len(a) != 1}
        assert not twice, f"answered more than once: {twice}"


@pytest.fixture
async def wire(tmp_path):
    started: list[Wire] = []

    async def launch(conf: dict) -> Wire:
        w = await Wire.start(write(tmp_path, conf))
        started.append(w)
        return w

    yield launch
    for w in started:
        try:
            # A last request proves the gateway still answers; then no duplicates may have come.
            await w.call("ping")
            w.assert_exactly_one_answer_each()
        finally:
            await w.aclose()


def code(answer: dict) -> int | None:
    return answer.get("error", {}).get("code")


async def test_fault_01_a_crash_mid_call_answers_every_caller_once_and_the_backend_comes_back(tmp_path, wire):
    w = await wire({"routing": {"retry_after": 0.2}, "backends": {"fault": stdio(FAULT)}, "resilience": {"breaker": {"failures": 10}}})
    stalled = [w.tool("fault__stall") for _ in range(3)]
    crash = w.tool("fault__crash")
    loop = asyncio.get_running_loop()
    started = loop.time()
    answers = [await w.answer(i) for i in (*stalled, crash)]
    assert loop.time() - started < PROMPT
    for a in answers:  # an error naming the backend: never a hang (F5), never an empty isError (F4)
        assert code(a) == -31001 and a["error"]["data"]["backend"] == "fault" and "result" not in a
    # restarted per policy: withdrawn (one change signal), then back (another), then it answers
    await w.until(lambda: w.changes() >= 2, 10)
    again = await w.call("tools/call", {"name": "fault__echo", "arguments": {"text": "again"}})
    assert again["result"]["content"][0]["text"] == "again"


async def test_fault_02_a_hang_times_out_at_the_deadline_and_the_backend_is_told(tmp_path, wire):
    events = tmp_path / "events"
    w = await wire({"backends": {"fault": stdio([*FAULT, "--events", str(events)])}, "resilience": {"timeouts": {"tools": {"fault": {"stall": 0.5}}}}})
    loop = asyncio.get_running_loop()
    started = loop.time()
    a = await w.answer(w.tool("fault__stall"))
    elapsed = loop.time() - started
    assert code(a) == -31002 and a["error"]["data"] == {"backend": "fault", "reason": "timeout"}
    assert 0.5 <= elapsed < 0.5 + 1.5  # deadline accuracy
    echo = await w.call("tools/call", {"name": "fault__echo", "arguments": {"text": "after"}})  # in order: the cancel came first
    assert echo["result"]["content"][0]["text"] == "after"
    assert [line.split()[:2] for line in events.read_text().splitlines() if line.startswith("cancelled")] == [["cancelled", "stall"]]


async def test_fault_03_slow_calls_succeed_under_the_deadline_and_time_out_over_it(tmp_path, wire):
    w = await wire({"backends": {"fault": stdio(FAULT)}, "resilience": {"timeouts": {"methods": {"tools/call": 1.0}}}})
    fast, slow = w.tool("fault__slow", {"ms": 100}), w.tool("fault__slow", {"ms": 3000})
    other = w.tool("fault__echo", {"text": "not blocked"})  # a slow call does not block another
    assert (await w.answer(other, 1.0))["result"]["content"][0]["text"] == "not blocked"
    assert (await w.answer(fast))["result"]["content"][0]["text"] == "slept 100 ms"
    assert code(await w.answer(slow, 2.5)) == -31002


async def test_fault_04_garbage_from_the_backend_still_gives_one_correct_answer(tmp_path, wire):
    w = await wire({"backends": {"fault": stdio([*FAULT, "--garbage-first"])}})
    ids = [w.tool("fault__garbage") for _ in range(3)]
    for i in ids:
        assert "real answer" in (await w.answer(i))["result"]["content"][0]["text"]
    assert "fault-unknown-1" not in w.answers  # the stray response reached no one


async def test_fault_16_a_lost_response_is_retried_only_for_idempotent_tools(tmp_path, wire):
    events = tmp_path / "events"
    w = await wire({"routing": {"retry_after": 0.1}, "backends": {"fault": stdio([*FAULT, "--events", str(events)])}, "resilience": {"retry": {"max_attempts": 3, "backoff": 0.3}, "breaker": {"enabled": False}}})
    a = await w.answer(w.tool("fault__effect"))
    assert code(a) == -31001 and a["error"]["data"]["backend"] == "fault"
    assert [line for line in events.read_text().splitlines() if line.startswith("effect")] == ["effect effect"]  # executed once


async def test_partial_lists_fail_open_by_default_and_closed_when_configured(tmp_path, wire):
    down = stdio([PY, "-c", "raise SystemExit(1)"])
    w = await wire({"routing": {"retry_after": 30}, "backends": {"fault": stdio(FAULT), "down": down}})
    listed = await w.call("tools/list")
    assert listed["result"]["_meta"]["io.hopline/missing-backends"] == ["down"] and listed["result"]["tools"]
    closed = await wire({"routing": {"retry_after": 30}, "backends": {"fault": stdio(FAULT), "down": down}, "resilience": {"partial_failure": "fail-closed"}})
    refused = await closed.call("tools/list")
    assert code(refused) == -31001 and refused["error"]["data"] == {"backend": "down", "reason": "partial_failure"}
    assert (await closed.call("tools/call", {"name": "fault__echo", "arguments": {"text": "calls still work"}}))["result"]


# -- faults on the network path to an HTTP backend -----------------------------------------------------
@pytest.fixture
async def proxied(tmp_path, hopline_relay, hopline_serve):
    """fault_server behind ``hopline relay`` (HTTP), behind the fault proxy, behind the gateway."""
    relay = hopline_relay("--", *FAULT, "--events", str(tmp_path / "events"))
    port = int(relay.url.split(":")[2].split("/")[0])
    proxy = await FaultProxy.start(port)

    def gateway(**resilience: Any):
        conf = {"routing": {"retry_after": 0.2}, "backends": {"remote": {"url": proxy.url("/mcp")}}, "resilience": resilience}
        return hopline_serve(write(tmp_path, conf))

    yield proxy, gateway, relay
    await proxy.aclose()


async def raw(http: httpx.AsyncClient, url: str, sid: str | None, msg_id: int, method: str, params: dict) -> dict:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if sid:
        headers["mcp-session-id"] = sid
    r = await http.post(url, content=orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}), headers=headers)
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        answers = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        answers = [a for a in answers if a.get("id") == msg_id]
        assert len(answers) == 1, answers
        return answers[0]
    return r.json()


async def session(http: httpx.AsyncClient, url: str) -> str:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    r = await http.post(url, content=orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}), headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    return r.headers["mcp-session-id"]


async def until_file_has(path, line: str, timeout: float = PROMPT) -> None:
    """Another process writes ``path``: re-read it (bounded) until ``line`` is there."""

    async def wait() -> None:
        while not (path.exists() and line in path.read_text().splitlines()):
            await asyncio.sleep(0.02)

    await asyncio.wait_for(wait(), timeout)


async def test_fault_01_http_a_reset_mid_call_answers_once_promptly(tmp_path, proxied):
    proxy, gateway, _ = proxied
    gw = gateway(breaker={"failures": 10})
    async with httpx.AsyncClient(timeout=20) as http:
        sid = await session(http, gw.url)
        assert "result" in await raw(http, gw.url, sid, 1, "tools/call", {"name": "remote__echo", "arguments": {"text": "a"}})
        pending = asyncio.ensure_future(raw(http, gw.url, sid, 2, "tools/call", {"name": "remote__slow", "arguments": {"ms": 1500}}))
        await until_file_has(tmp_path / "events", "call slow")  # the call reached the backend
        proxy.cut()
        answer = await asyncio.wait_for(pending, PROMPT)
        # exactly one answer (raw() checks), promptly: resumed to its result, or a clear error
        assert answer.get("result", {}).get("content", [{}])[0].get("text") == "slept 1500 ms" or code(answer) in (-31001, -31003)
        assert "result" in await raw(http, gw.url, sid, 3, "tools/call", {"name": "remote__echo", "arguments": {"text": "b"}})


async def test_fault_04_http_corrupted_bytes_give_an_error_not_a_hang(proxied):
    proxy, gateway, _ = proxied
    gw = gateway(breaker={"failures": 10}, timeouts={"methods": {"tools/call": 2}})
    async with httpx.AsyncClient(timeout=20) as http:
        sid = await session(http, gw.url)
        assert "result" in await raw(http, gw.url, sid, 1, "tools/call", {"name": "remote__echo", "arguments": {"text": "a"}})
        proxy.corrupt()
        proxy.cut()  # new connections carry the corrupted bytes
        answer = await asyncio.wait_for(raw(http, gw.url, sid, 2, "tools/call", {"name": "remote__echo", "arguments": {"text": "b"}}), PROMPT)
        assert code(answer) in (-31001, -31002, -31003)
        proxy.heal()


async def test_fault_05_a_restarted_http_backend_is_reinitialized_transparently(proxied, hopline_relay):
    proxy, gateway, relay = proxied
    gw = gateway()
    async with httpx.AsyncClient(timeout=20) as http:
        sid = await session(http, gw.url)
        assert "result" in await raw(http, gw.url, sid, 1, "tools/call", {"name": "remote__echo", "arguments": {"text": "before"}})
        relay.stop()  # same URL (the proxy's), new process: the old backend session is now 404
        again = hopline_relay("--", *FAULT)
        proxy.target = ("127.0.0.1", int(again.url.split(":")[2].split("/")[0]))
        proxy.cut()
        answer = await asyncio.wait_for(raw(http, gw.url, sid, 2, "tools/call", {"name": "remote__echo", "arguments": {"text": "after"}}), PROMPT)
    assert answer["result"]["content"][0]["text"] == "after"


async def test_fault_07_a_silent_partition_opens_the_breaker_and_healing_closes_it(proxied):
    proxy, gateway, _ = proxied
    gw = gateway(breaker={"failures": 2, "cool_down": 1.0, "probe_timeout": 0.5}, timeouts={"methods": {"tools/call": 0.5}})
    changes = Changes()
    async with client(gw.url, "legacy", message_handler=changes) as c:
        assert "remote__echo" in await names(c)
        proxy.drop()  # half-open: no FIN, no RST, just silence
        loop = asyncio.get_running_loop()
        started = loop.time()
        for i in range(2):
            with pytest.raises(MCPError) as err:
                await bounded(c.call_tool("remote__echo", {"text": str(i)}), PROMPT)
            assert err.value.code == -31002
        await changes.next()  # OPEN: detected by the deadline, not by the kernel
        assert loop.time() - started < 2 * 0.5 + 2.0
        assert not any(n.startswith("remote__") for n in await names(c))
        proxy.heal()
        await changes.next(15)  # a trial after the cool-down succeeded: CLOSED
        assert text_of(await bounded(c.call_tool("remote__echo", {"text": "healed"}))) == "healed"


async def test_fault_09_stateless_clients_survive_a_gateway_restart(tmp_path, hopline_serve):
    path = write(tmp_path, {"backends": {"fault": stdio(FAULT)}})
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "fault__echo"}

    async def echo(http: httpx.AsyncClient, url: str, text: str) -> dict:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fault__echo", "arguments": {"text": text}, "_meta": meta}}
        return (await http.post(url, content=orjson.dumps(body), headers=headers)).json()

    first = hopline_serve(path)  # on port 0; the restart takes the port it got
    port = httpx.URL(first.url).port
    async with httpx.AsyncClient(timeout=20) as http:
        assert (await echo(http, first.url, "one"))["result"]["content"][0]["text"] == "one"
        first.stop(signal.SIGTERM)
        second = hopline_serve(path, "--port", str(port))
        assert second.url == first.url
        assert (await echo(http, second.url, "two"))["result"]["content"][0]["text"] == "two"
