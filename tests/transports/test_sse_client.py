"""SseUpstream (legacy 2024-11-05 HTTP+SSE) against the SDK's own SSE server app
(``MCPServer.sse_app()``), plus fake backends for the failure paths."""

from __future__ import annotations

import asyncio
import os
import sys

import httpx
import orjson
import pytest

from hopline import jsonrpc
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import Channel, ChannelClosed
from hopline.transports.sse_client import SseUpstream

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "servers"))
from mcp_harness import McpServerProcess  # noqa: E402
from tests.peers import free_port  # noqa: E402  (a port nothing listens on)

pytestmark = pytest.mark.timeout(20)

INIT = {"protocolVersion": "2024-11-05", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}


def msg(body: dict) -> Message:
    return jsonrpc.parse(orjson.dumps({"jsonrpc": "2.0", **body}))


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


@pytest.fixture
def sse_server():
    with McpServerProcess("--sse") as server:
        yield server


async def test_sse_session_tools_progress_and_sampling(sse_server):
    ch = await SseUpstream.connect(sse_server.sse_url, headers={"Authorization": "Bearer x", "Upgrade": "h2c"})
    assert isinstance(ch, Channel)
    try:
        assert ch.endpoint.startswith(f"http://127.0.0.1:{sse_server.port}/messages/?session_id=")
        await ch.send(msg({"id": 1, "method": "initialize", "params": INIT}))
        _, init = await until_response(ch, 1)
        assert init.body["result"]["protocolVersion"] == "2024-11-05"
        await ch.send(msg({"method": "notifications/initialized"}))
        await ch.send(msg({"id": 2, "method": "tools/list"}))
        _, tools = await until_response(ch, 2)
        assert "echo" in {t["name"] for t in tools.body["result"]["tools"]}
        await ch.send(msg({"id": 3, "method": "tools/call", "params": {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": 9}}}))
        notes, done = await until_response(ch, 3)
        assert [n.params["progress"] for n in notes] == [1, 2]
        assert done.body["result"]["content"][0]["text"] == "done 2"
        await ch.send(msg({"id": 4, "method": "tools/call", "params": {"name": "sample", "arguments": {"prompt": "hi"}}}))
        sampling = await recv(ch)
        assert sampling.method == "sampling/createMessage"
        await ch.send(jsonrpc.result(sampling.id, {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"}))
        _, sampled = await until_response(ch, 4)
        assert sampled.body["result"]["content"][0]["text"] == "model said: yo"
    finally:
        await ch.aclose()
    assert ch.is_closed()
    with pytest.raises(ChannelClosed, match="closed"):
        await recv(ch)
    with pytest.raises(ChannelClosed):
        await ch.send(msg({"id": 5, "method": "tools/list"}))


async def test_sse_stream_end_closes_the_channel(sse_server):
    ch = await SseUpstream.connect(sse_server.sse_url)
    try:
        sse_server.stop()
        with pytest.raises(ChannelClosed, match="SSE stream"):
            await recv(ch)
        assert ch.is_closed()
    finally:
        await ch.aclose()


async def test_sse_connection_refused():
    with pytest.raises(ChannelClosed, match="SSE stream failed"):
        await SseUpstream.connect(f"http://127.0.0.1:{free_port()}/sse", timeout=3)


def fake_backend(endpoint: str | None, post_status: int = 202, get_status: int = 200) -> httpx.AsyncClient:
    """An SSE backend in-process: GET sends ``endpoint`` then holds the stream open."""
    hold = asyncio.Event()

    async def events():
        if endpoint is not None:
            yield f"event: endpoint\ndata: {endpoint}\n\n".encode()
        yield b": keepalive\n\n"
        await hold.wait()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            if get_status != 200:
                return httpx.Response(get_status, text="nope")
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())
        return httpx.Response(post_status, text="")

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("endpoint", ["http://evil.test/messages", "https://backend.test/messages", "//other.test/m"])
async def test_sse_foreign_endpoint_is_refused(endpoint):
    client = fake_backend(endpoint)
    try:
        with pytest.raises(ChannelClosed, match="refused endpoint"):
            await SseUpstream.connect("http://backend.test/sse", client=client)
    finally:
        await client.aclose()


async def test_sse_relative_endpoint_and_post_failure_become_an_error_response():
    client = fake_backend("messages?session=1", post_status=500)
    try:
        ch = await SseUpstream.connect("http://backend.test/mcp/sse", client=client)
        assert ch.endpoint == "http://backend.test/mcp/messages?session=1"
        await ch.send(msg({"id": "r", "method": "tools/list"}))
        err = await recv(ch)
        assert err.id == "r" and err.body["error"]["data"]["reason"] == "http 500"
        await ch.send(msg({"method": "notifications/initialized"}))  # logged, not raised
        await ch.aclose()
    finally:
        await client.aclose()


async def test_sse_no_endpoint_or_refused_stream():
    client = fake_backend(None)
    try:
        with pytest.raises(ChannelClosed, match="no endpoint event"):
            await SseUpstream.connect("http://backend.test/sse", client=client, connect_timeout=0.3)
    finally:
        await client.aclose()
    client = fake_backend("/m", get_status=404)
    try:
        with pytest.raises(ChannelClosed, match="HTTP 404"):
            await SseUpstream.connect("http://backend.test/sse", client=client)
    finally:
        await client.aclose()
