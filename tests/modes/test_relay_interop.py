"""Relay mode with real peers: the official MCP SDK as client and as server, both eras.

Directions covered: stdio server → relay → HTTP client (Streamable HTTP and legacy
SSE); HTTP server → ``relay --stdio`` → stdio client; HTTP server → relay → HTTP
client. In each, what the client sees through the relay equals what it sees
directly (draft §5.1: the relay does not change content).
"""

from __future__ import annotations

import subprocess

import httpx
import orjson
import pytest
from mcp import StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client

from tests.conftest import PY, SERVERS, _launcher, _stop_all, sdk_server_cmd
from tests.peers import MODES, bounded, client, exercise, start_sdk_http, stop, text_of


@pytest.fixture(scope="module")
def sdk_http_server():
    """The official SDK's Streamable HTTP server, one per set of flags for the module: each test
    talks to it through sessions of its own (or none, ``--stateless``)."""
    procs: list[subprocess.Popen] = []
    urls: dict[tuple[str, ...], str] = {}

    def launch(*flags: str) -> str:
        if flags not in urls:
            proc, urls[flags] = start_sdk_http(*flags)
            procs.append(proc)
        return urls[flags]

    yield launch
    for proc in procs:
        stop(proc)


@pytest.fixture(scope="module")
def sdk_relay():
    """``hopline relay -- sdk_server.py stdio``, one for the module: each client session gets a
    backend child of its own, so the tests that only talk through it share the process."""
    launch, started = _launcher("relay")
    yield launch("--", *sdk_server_cmd())
    _stop_all(started)


@pytest.fixture(scope="module")
def http_relay(sdk_http_server):
    """``hopline relay URL`` in front of the module's SDK HTTP server: (relay, backend URL)."""
    launch, started = _launcher("relay")
    url = sdk_http_server()
    yield launch(url), url
    _stop_all(started)


async def direct_baseline(mode: str) -> dict:
    async with client(StdioServerParameters(command=PY, args=[str(SERVERS / "sdk_server.py"), "stdio"]), mode) as c:
        return await exercise(c)


@pytest.mark.req("L1-MUST")
@pytest.mark.req("RELAY-NO-INSPECT")
@pytest.mark.parametrize("mode", MODES)
async def test_stdio_server_to_http_client_equals_direct(sdk_relay, mode):
    relay = sdk_relay
    async with client(relay.url, mode) as c:
        through = await bounded(exercise(c))
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert through == await bounded(direct_baseline(mode))


@pytest.mark.parametrize("mode", MODES)
async def test_sampling_elicitation_roots_progress_pass_through(sdk_relay, mode):
    relay = sdk_relay
    seen: list[float] = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with client(relay.url, mode) as c:
        assert text_of(await bounded(c.call_tool("sample", {"prompt": "ping"}))).endswith("sampled:ping")
        assert "yes" in text_of(await bounded(c.call_tool("elicit", {"message": "ok?"})))
        assert "file:///tmp/project" in text_of(await bounded(c.call_tool("roots", {})))
        await bounded(c.call_tool("progress", {"steps": 3}, progress_callback=on_progress))
    assert seen == [1, 2, 3]


async def test_legacy_direct_server_requests_pass_through(sdk_relay):
    """sample_direct/elicit_direct send real server→client requests (handshake era)."""
    relay = sdk_relay
    async with client(relay.url, "legacy") as c:
        assert "sampled:" in text_of(await bounded(c.call_tool("sample_direct", {"prompt": "hi"})))
        assert "yes" in text_of(await bounded(c.call_tool("elicit_direct", {"message": "sure?"})))


async def test_legacy_sse_client(sdk_relay):
    relay = sdk_relay
    async with sse_client(relay.base + "/sse") as (read, write):
        async with ClientSession(read, write) as session:
            await bounded(session.initialize())
            tools = await bounded(session.list_tools())
            assert "echo" in [t.name for t in tools.tools]
            result = await bounded(session.call_tool("echo", {"text": "over sse"}))
            assert text_of(result) == "over sse"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("flags", [(), ("--stateless",)])
async def test_stdio_client_to_remote_http_server(sdk_http_server, mode, flags):
    url = sdk_http_server(*flags)
    params = StdioServerParameters(command=PY, args=["-m", "hopline", "relay", "--stdio", url])
    async with client(params, mode) as c:
        result = await bounded(exercise(c))
    assert result["echo"] == "héllo" and result["add"] == {"result": 5}


@pytest.mark.parametrize("mode", MODES)
async def test_http_to_http_relay(http_relay, mode):
    relay, _ = http_relay
    async with client(relay.url, mode) as c:
        result = await bounded(exercise(c))
        assert text_of(await bounded(c.call_tool("sample", {"prompt": "x"}))).endswith("sampled:x")
    assert result["echo"] == "héllo"


@pytest.mark.req("RELAY-NO-DUAL-HANDSHAKE")
def test_initialize_flows_through_unchanged(sdk_relay):
    """The client's initialize reaches the backend and the backend's own result comes back
    byte-for-byte in content: the relay neither answers nor composes the handshake."""
    init = {"jsonrpc": "2.0", "id": "init-1", "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}, "clientInfo": {"name": "probe", "version": "9"}}}
    direct = subprocess.run(sdk_server_cmd(), input=orjson.dumps(init) + b"\n", capture_output=True, timeout=20)
    direct_result = orjson.loads(direct.stdout.splitlines()[0])
    relay = sdk_relay
    r = httpx.post(relay.url, content=orjson.dumps(init), headers={"content-type": "application/json", "accept": "application/json, text/event-stream"}, timeout=20)
    body = r.json() if r.headers["content-type"].startswith("application/json") else orjson.loads(r.text.split("data: ", 1)[1].split("\n", 1)[0])
    assert body == direct_result
    assert body["id"] == "init-1" and body["result"]["protocolVersion"] == "2025-06-18"


@pytest.mark.req("SESSION-NO-BACKEND-IDS")
def test_backend_session_id_never_reaches_the_client(http_relay):
    relay, url = http_relay
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    r = httpx.post(relay.url, content=orjson.dumps(init), headers=headers, timeout=20)
    client_sid = r.headers["mcp-session-id"]
    # the id the client holds means nothing to the backend: it is hopline's, not the backend's
    probe = httpx.post(url, content=orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), headers={**headers, "mcp-session-id": client_sid, "mcp-protocol-version": "2025-11-25"}, timeout=20)
    assert probe.status_code == 404
    assert client_sid not in r.text


@pytest.mark.req("STATELESS-META-FORWARD")
@pytest.mark.req("TRACE-VERBATIM")
def test_modern_meta_and_trace_context_reach_the_backend_verbatim(sdk_relay):
    """whoami on sdk_server.py reports the _meta it received; the relay forwards it untouched."""
    relay = sdk_relay
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "meta-probe", "version": "3"},
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=opaque,other=1",
        "com.example/custom": {"keep": [1, 2, 3]},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "meta", "arguments": {}, "_meta": meta}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "meta"}
    r = httpx.post(relay.url, content=orjson.dumps(body), headers=headers, timeout=20)
    assert r.status_code == 200, r.text
    seen = orjson.loads(r.json()["result"]["content"][0]["text"])
    assert seen == meta


def _relay_stdio(url: str, payload: bytes, tmp_path, stdin_kind: str) -> subprocess.CompletedProcess:
    """``hopline relay --stdio URL`` fed ``payload`` on stdin, a pipe or a regular file, to its end."""
    argv = [PY, "-m", "hopline", "relay", "--stdio", url]
    if stdin_kind == "pipe":
        return subprocess.run(argv, input=payload, capture_output=True, timeout=30)
    (tmp_path / "in.jsonl").write_bytes(payload)
    with open(tmp_path / "in.jsonl", "rb") as f:
        return subprocess.run(argv, stdin=f, capture_output=True, timeout=30)


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_stdio_client_that_closes_stdin_still_gets_every_answer(sdk_http_server, tmp_path, stdin_kind):
    url = sdk_http_server()
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"ms": 300}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "last"}}},
    ]
    payload = b"".join(orjson.dumps(f) + b"\n" for f in frames)
    out = _relay_stdio(url, payload, tmp_path, stdin_kind)
    answers = {m["id"]: m for m in map(orjson.loads, out.stdout.splitlines())}
    assert set(answers) == {1, 2, 3}, out.stderr.decode()[-2000:]
    assert answers[3]["result"]["content"][0]["text"] == "last"
    assert b"\n\n" not in out.stdout  # one frame per line, no blank lines


@pytest.mark.parametrize("stdin_kind", ["pipe", "file"])
def test_a_stdio_clients_malformed_request_is_answered_not_left_waiting(sdk_http_server, tmp_path, stdin_kind):
    # JSON that is no valid JSON-RPC request but whose id can be read: its sender gets the error
    # (it was dropped with a log line, and the client waited for ever); unreadable frames stay dropped.
    url = sdk_http_server()
    payload = (
        orjson.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bad", "version": "1"}}}
        )
        + b"\n"
        + b'{"jsonrpc":"2.0","id":2,"method":7}\n'
        + b'{"jsonrpc":"2.0","id":"three","method":"tools/list","params":[1]}\n'
        + b"{not json at all\n"
        + b'{"jsonrpc":"2.0","id":4,"method":"ping"}\n'
    )
    out = _relay_stdio(url, payload, tmp_path, stdin_kind)
    answers = {m["id"]: m for m in map(orjson.loads, out.stdout.splitlines())}
    assert set(answers) == {1, 2, "three", 4}, out.stderr.decode()[-2000:]
    assert answers[2]["error"] == {"code": -32600, "message": '"method" must be a string'}
    assert answers["three"]["error"] == {"code": -32600, "message": '"params" must be an object'}
    assert "result" in answers[4]


@pytest.mark.parametrize("mode", MODES)
async def test_log_messages_reach_the_client(sdk_relay, mode):
    relay = sdk_relay
    seen: list = []

    async def on_log(params):
        seen.append(params.data)

    async with client(relay.url, mode, logging_callback=on_log, **({"log_level": "info"} if mode != "legacy" else {})) as c:
        assert text_of(await bounded(c.call_tool("log", {"message": "hello log"}))) == "logged"
    assert "hello log" in seen


async def test_shared_relay_routes_sampling_to_the_caller(hopline_relay):
    relay = hopline_relay("--shared", "--", *sdk_server_cmd())
    async with client(relay.url, "legacy") as a, client(relay.url, "legacy") as b:
        assert text_of(await bounded(a.call_tool("sample_direct", {"prompt": "from-a"}))).endswith("sampled:from-a")
        assert text_of(await bounded(b.call_tool("sample_direct", {"prompt": "from-b"}))).endswith("sampled:from-b")


async def test_relay_stdio_to_a_legacy_sse_server(sdk_relay):
    """hopline's own /sse endpoint as the remote: SSE listener and SSE upstream end to end."""
    inner = sdk_relay
    params = StdioServerParameters(command=PY, args=["-m", "hopline", "relay", "--stdio", inner.base + "/sse"])
    async with client(params, "legacy") as c:
        result = await bounded(exercise(c))
        assert text_of(await bounded(c.call_tool("sample_direct", {"prompt": "via sse"}))).endswith("sampled:via sse")
    assert result["echo"] == "héllo"
