"""StreamableHttpUpstream against the official SDK server (mcp 2.3.0) run with uvicorn.

Covers both eras: the handshake era on a stateful and a stateless server
(session id, GET stream, SSE progress, server→client sampling, DELETE, POST
stream resumption, session loss on 404 and re-initialisation) and the modern
era (routing headers, -32022 / -32601 bodies, cancellation by closing the
stream), plus an unreachable backend.
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx
import orjson
import pytest

from hopline import jsonrpc
from hopline.binding import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from hopline.header_codec import clean_headers, encode_header_value
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import Channel, ChannelClosed
from hopline.transports.streamable_http_client import StreamableHttpUpstream

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "servers"))
from mcp_harness import McpServerProcess  # noqa: E402
from tests.peers import free_port  # noqa: E402  (a port nothing listens on)

pytestmark = pytest.mark.timeout(20)

INIT = {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}


def msg(body: dict) -> Message:
    return jsonrpc.parse(orjson.dumps({"jsonrpc": "2.0", **body}))


def modern(msg_id, method: str, params: dict | None = None, version: str = "2026-07-28", **more_meta) -> Message:
    meta = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: {"name": "t", "version": "1"}, **more_meta}
    return msg({"id": msg_id, "method": method, "params": {**(params or {}), "_meta": meta}})


async def recv(ch: Channel, timeout: float = 5.0) -> Message:
    async with asyncio.timeout(timeout):
        return await ch.receive()


async def until_response(ch: Channel, msg_id, timeout: float = 5.0) -> tuple[list[Message], Message]:
    others = []
    async with asyncio.timeout(timeout):
        while True:
            m = await ch.receive()
            if m.is_response() and m.id == msg_id:
                return others, m
            others.append(m)


async def handshake(ch: Channel) -> Message:
    await ch.send(msg({"id": 1, "method": "initialize", "params": INIT}))
    _, resp = await until_response(ch, 1)
    await ch.send(msg({"method": "notifications/initialized"}))
    return resp


def text_of(resp: Message) -> str:
    return resp.body["result"]["content"][0]["text"]


class Recorder:
    """An httpx client that records (method, headers) of every request it sends."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, httpx.Headers]] = []
        self.bodies: list[bytes] = []
        self.client = httpx.AsyncClient(event_hooks={"request": [self.hook]})

    async def hook(self, request: httpx.Request) -> None:
        self.seen.append((request.method, request.headers))
        self.bodies.append(request.content)


@pytest.fixture(scope="module")
def stateful():
    with McpServerProcess() as server:
        yield server


@pytest.fixture(scope="module")
def stateless():
    with McpServerProcess("--stateless") as server:
        yield server


@pytest.fixture(scope="module")
def stateless_json():
    with McpServerProcess("--stateless", "--json") as server:
        yield server


# -- handshake era ------------------------------------------------------------------
async def test_legacy_stateful_session_tools_sse_progress_and_delete(stateful):
    rec = Recorder()
    ch = await StreamableHttpUpstream.connect(stateful.url, client=rec.client, headers={"Authorization": "Bearer t0k", "Connection": "close"})
    assert isinstance(ch, Channel)
    try:
        init = await handshake(ch)
        assert init.body["result"]["protocolVersion"] == "2025-11-25"
        assert ch.session_id and ch.protocol_version == "2025-11-25"
        await ch.send(msg({"id": 2, "method": "tools/list"}))
        _, tools = await until_response(ch, 2)
        assert {"echo", "progress", "sample"} <= {t["name"] for t in tools.body["result"]["tools"]}
        await ch.send(msg({"id": "p", "method": "tools/call", "params": {"name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "tok"}}}))
        notes, result = await until_response(ch, "p")
        assert [n.params["progress"] for n in notes if n.method == "notifications/progress"] == [1, 2, 3]
        assert text_of(result) == "done 3"
        session = ch.session_id
    finally:
        await ch.aclose()
    assert ch.is_closed()
    with pytest.raises(ChannelClosed):
        await recv(ch)
    methods = [m for m, _ in rec.seen]
    assert methods[0] == "POST" and "GET" in methods and methods[-1] == "DELETE"
    for method, headers in rec.seen:
        assert headers["authorization"] == "Bearer t0k"
        assert headers.get("connection") != "close"
        if method != "POST" or headers.get("mcp-session-id"):
            assert headers["mcp-session-id"] == session and headers["mcp-protocol-version"] == "2025-11-25"
    # DELETE ended the session on the server.
    r = await rec.client.post(stateful.url, content=b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}', headers={"accept": "application/json, text/event-stream", "content-type": "application/json", "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert r.status_code == 404
    await rec.client.aclose()


async def test_legacy_pipelined_handshake_waits_for_the_session(stateful):
    """A stdio client may send initialize, initialized and a call back to back."""
    ch = StreamableHttpUpstream(stateful.url)
    try:
        await ch.send(msg({"id": 1, "method": "initialize", "params": INIT}))
        await ch.send(msg({"method": "notifications/initialized"}))
        await ch.send(msg({"id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "piped"}}}))
        _, result = await until_response(ch, 2)
        assert text_of(result) == "piped"
    finally:
        await ch.aclose()


async def test_legacy_sampling_request_answered_through_the_channel(stateful):
    async with asyncio.timeout(15):
        ch = StreamableHttpUpstream(stateful.url)
        try:
            await handshake(ch)
            await ch.send(msg({"id": 7, "method": "tools/call", "params": {"name": "sample", "arguments": {"prompt": "6*7?"}}}))
            request = await recv(ch)
            assert request.is_request() and request.method == "sampling/createMessage"
            assert request.params["messages"][0]["content"]["text"] == "6*7?"
            answer = {"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "m", "stopReason": "endTurn"}
            await ch.send(jsonrpc.result(request.id, answer))
            _, result = await until_response(ch, 7)
            assert text_of(result) == "model said: 42"
        finally:
            await ch.aclose()


async def test_legacy_get_stream_delivers_unrelated_notifications(stateful):
    ch = StreamableHttpUpstream(stateful.url)
    try:
        await handshake(ch)
        for attempt in range(20):  # the GET stream opens in the background; retry until it carries one
            await ch.send(msg({"id": attempt, "method": "tools/call", "params": {"name": "announce", "arguments": {}}}))
            seen = []
            with pytest.raises(TimeoutError):
                while True:  # the response, and whatever follows it shortly
                    seen.append((await recv(ch, 0.3)).method)
            if "notifications/tools/list_changed" in seen:
                break
        else:
            pytest.fail("no notification on the GET stream")
    finally:
        await ch.aclose()


@pytest.mark.parametrize("server", ["stateless", "stateless_json"])
async def test_legacy_stateless(server, request):
    url = request.getfixturevalue(server).url
    ch = StreamableHttpUpstream(url)
    try:
        await handshake(ch)
        assert ch.session_id is None and ch.protocol_version == "2025-11-25"
        await ch.send(msg({"id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "héllo"}}}))
        await ch.send(msg({"id": 3, "method": "resources/read", "params": {"uri": "demo://greeting"}}))
        await ch.send(msg({"id": 4, "method": "prompts/get", "params": {"name": "greet", "arguments": {"name": "Ada"}}}))
        got = {}
        for _ in range(3):
            m = await recv(ch)
            got[m.id] = m.body["result"]
        assert got[2]["content"][0]["text"] == "héllo"
        assert got[3]["contents"][0]["text"] == "hello from a resource"
        assert "Ada" in got[4]["messages"][0]["content"]["text"]
    finally:
        await ch.aclose()


async def test_legacy_post_stream_resumed_with_last_event_id():
    with McpServerProcess("--event-store", "--retry-ms", "50") as server:
        rec = Recorder()
        ch = StreamableHttpUpstream(server.url, client=rec.client, get_stream=False)
        try:
            await handshake(ch)
            await ch.send(msg({"id": 5, "method": "tools/call", "params": {"name": "poll", "arguments": {}, "_meta": {"progressToken": 1}}}))
            notes, result = await until_response(ch, 5, timeout=8)
            assert text_of(result) == "polled"
            assert "after close" in [n.params.get("message") for n in notes]
            resumes = [h for m, h in rec.seen if m == "GET"]
            assert len(resumes) == 1 and resumes[0]["last-event-id"] and resumes[0]["mcp-session-id"] == ch.session_id
        finally:
            await ch.aclose()
            await rec.client.aclose()


async def test_session_404_fails_in_flight_and_closes():
    with McpServerProcess() as server:
        ch = StreamableHttpUpstream(server.url, get_stream=False)
        try:
            await handshake(ch)
            await ch.send(msg({"id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a"}}}))
            assert text_of((await until_response(ch, 2))[1]) == "a"
            server.stop()
            server.start()  # same port, new process: our session is unknown there
            await ch.send(msg({"id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "b"}}}))
            failed = await recv(ch)
            assert failed.id == 3 and failed.body["error"]["data"]["reason"] == "session lost"
            with pytest.raises(ChannelClosed, match=r"session lost \(HTTP 404\)"):
                await recv(ch)
            with pytest.raises(ChannelClosed):
                await ch.send(msg({"id": 4, "method": "tools/list"}))
        finally:
            await ch.aclose()


async def test_session_404_closes_channel_via_get_stream():
    with McpServerProcess() as server:
        ch = StreamableHttpUpstream(server.url)
        try:
            await handshake(ch)
            server.stop()
            server.start()
            with pytest.raises(ChannelClosed, match="session lost"):
                await recv(ch, 8)
        finally:
            await ch.aclose()


async def test_reinitialize_on_404_retries_once():
    with McpServerProcess() as server:
        ch = StreamableHttpUpstream(server.url, reinitialize_on_404=True)
        try:
            await handshake(ch)
            first = ch.session_id
            server.stop()
            server.start()
            await ch.send(msg({"id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "again"}}}))
            _, result = await until_response(ch, 3, timeout=8)
            assert text_of(result) == "again"
            assert ch.session_id not in (None, first) and not ch.is_closed()
        finally:
            await ch.aclose()


# -- modern era -------------------------------------------------------------------
async def test_modern_call_sends_routing_headers_and_no_session(stateful):
    rec = Recorder()
    ch = StreamableHttpUpstream(stateful.url, client=rec.client)
    try:
        await ch.send(modern(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
        await ch.send(modern(2, "resources/read", {"uri": "demo://greeting"}))
        await ch.send(modern(3, "tools/list"))
        got = {}
        for _ in range(3):
            m = await recv(ch)
            got[m.id] = m
        assert got[1].body["result"]["resultType"] == "complete" and text_of(got[1]) == "hi"
        assert got[2].body["result"]["contents"][0]["text"] == "hello from a resource"
        assert "tools" in got[3].body["result"]
        heads = {h["mcp-method"]: h for _, h in rec.seen}
        assert heads["tools/call"]["mcp-name"] == "echo" and heads["resources/read"]["mcp-name"] == "demo://greeting"
        assert "mcp-name" not in heads["tools/list"]
        assert all(h["mcp-protocol-version"] == "2026-07-28" and "mcp-session-id" not in h for h in heads.values())
        assert [m for m, _ in rec.seen] == ["POST"] * 3
    finally:
        await ch.aclose()
        await rec.client.aclose()


async def test_modern_error_bodies_are_delivered(stateful):
    ch = StreamableHttpUpstream(stateful.url)
    try:
        await ch.send(modern("v", "tools/call", {"name": "echo", "arguments": {"text": "x"}}, version="2099-01-01"))
        bad = await recv(ch)
        assert bad.id == "v" and bad.body["error"]["code"] == -32022
        assert bad.body["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
        await ch.send(modern(8, "no/such/method"))
        missing = await recv(ch)
        assert missing.id == 8 and missing.body["error"]["code"] == -32601
    finally:
        await ch.aclose()


async def test_modern_progress_on_an_sse_response(stateful):
    ch = StreamableHttpUpstream(stateful.url)
    try:
        await ch.send(modern("m", "tools/call", {"name": "progress", "arguments": {"steps": 2}}, progressToken="pt"))
        notes, result = await until_response(ch, "m")
        assert [(n.method, n.params["progressToken"], n.params["progress"]) for n in notes] == [
            ("notifications/progress", "pt", 1),
            ("notifications/progress", "pt", 2),
        ]
        assert text_of(result) == "done 2" and result.body["result"]["resultType"] == "complete"
    finally:
        await ch.aclose()


async def poll_counters(ch: Channel, key: str, above: int) -> None:
    """Poll the server's ``counters`` tool until ``key`` exceeds ``above`` (bounded: 5 s)."""
    async with asyncio.timeout(5):
        while True:
            await ch.send(modern("c", "tools/call", {"name": "counters", "arguments": {}}))
            m = await ch.receive()
            assert m.id == "c", "nothing may arrive for the cancelled request"
            if orjson.loads(text_of(m))[key] > above:
                return
            await asyncio.sleep(0.02)


async def test_legacy_error_body_with_null_id_gets_the_request_id(stateful):
    ch = StreamableHttpUpstream(stateful.url)
    try:
        await ch.send(msg({"id": "early", "method": "tools/list"}))  # no session yet: 400 -32600, id null
        m = await recv(ch)
        assert m.id == "early" and m.body["error"]["code"] == -32600
    finally:
        await ch.aclose()


async def test_modern_cancel_closes_the_stream(stateful):
    rec = Recorder()
    ch = StreamableHttpUpstream(stateful.url, client=rec.client)
    try:
        await ch.send(modern("c0", "tools/call", {"name": "counters", "arguments": {}}))
        before = orjson.loads(text_of(await recv(ch)))
        await ch.send(modern("slow", "tools/call", {"name": "slow", "arguments": {"seconds": 30}}))
        await poll_counters(ch, "started", before["started"])  # the server runs the tool
        await ch.send(msg({"method": "notifications/cancelled", "params": {"requestId": "slow", "reason": "user"}}))
        await poll_counters(ch, "cancelled", before["cancelled"])  # the disconnect cancelled it
        with pytest.raises(TimeoutError):
            await recv(ch, 0.3)
        assert not any(b"notifications/cancelled" in body for body in rec.bodies)
    finally:
        await ch.aclose()
        await rec.client.aclose()


# -- failures and helpers -------------------------------------------------------------
async def test_connection_refused_answers_with_an_error():
    ch = StreamableHttpUpstream(f"http://127.0.0.1:{free_port()}/mcp", timeout=3)
    try:
        await ch.send(msg({"id": 1, "method": "initialize", "params": INIT}))
        await ch.send(modern(2, "tools/list"))
        got = {m.id: m for m in [await recv(ch), await recv(ch)]}
        for m in got.values():
            assert m.body["error"]["code"] == jsonrpc.UnavailableError.code
            assert m.body["error"]["data"]["reason"] == "connect_failed"  # nothing was sent: safe to retry
        await ch.send(msg({"method": "notifications/initialized"}))  # dropped, never raises
    finally:
        await ch.aclose()


async def test_non_jsonrpc_error_status_becomes_an_error_response():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="down for maintenance")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    ch = StreamableHttpUpstream("http://backend.test/mcp", client=client)
    try:
        await ch.send(modern(1, "tools/list"))
        m = await recv(ch)
        assert m.id == 1 and "503" in m.body["error"]["message"]
        assert m.body["error"]["data"]["reason"] == "http 503"
    finally:
        await ch.aclose()
        await client.aclose()


@pytest.mark.parametrize(
    "reply, code",
    [
        (httpx.Response(202), jsonrpc.PeerError.code),
        (httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b": ping\n\n"), jsonrpc.UnavailableError.code),
        (httpx.Response(200, json={"jsonrpc": "2.0", "id": 999, "result": {}}), jsonrpc.UnavailableError.code),
        (httpx.Response(200, headers={"content-type": "application/json"}, content=b"not json"), jsonrpc.PeerError.code),
    ],
    ids=["202", "sse-ends-without-answer", "json-for-another-id", "garbage"],
)
async def test_an_exchange_without_an_answer_still_answers(reply, code):
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: reply))
    ch = StreamableHttpUpstream("http://backend.test/mcp", client=client)
    try:
        await ch.send(modern(1, "tools/list"))
        m = await recv(ch)
        if m.id == 999:  # the stray body is delivered as it came
            m = await recv(ch)
        assert m.id == 1 and m.body["error"]["code"] == code
    finally:
        await ch.aclose()
        await client.aclose()


@pytest.mark.parametrize("value", ["echo", "héllo", " lead", "tab\there", "=?base64?abc?=", "", "a b", "日本"])
def test_header_encoding_matches_the_sdk(value):
    from mcp.shared.inbound import decode_header_value
    from mcp.shared.inbound import encode_header_value as sdk_encode

    assert encode_header_value(value) == sdk_encode(value)
    assert decode_header_value(encode_header_value(value)) == value


def test_hop_by_hop_headers_are_dropped():
    kept = clean_headers({"Authorization": "x", "Connection": "close", "TE": "trailers", "Mcp-Session-Id": "s", "X-Trace": "1"})
    assert kept == {"authorization": "x", "x-trace": "1"}
