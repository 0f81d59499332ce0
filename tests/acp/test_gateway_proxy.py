"""The gateway component alone (src/hopline/acp/gateway/): the test plays the conductor on an
in-memory channel, in the raw wire spellings; the gateway behind it is real (the MCP SDK server
of the test suite as its one backend)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml
from acp_harness import PY, ROOT

from hopline.acp.gateway import serve
from hopline.config.load import parse_config
from hopline.jsonrpc import Message
from hopline.modes import build
from hopline.transports.memory import memory_pair

KEY = "io.hopline/acp-session-id"
SDK_SERVER = ROOT / "tests" / "servers" / "sdk_server.py"
WAIT = 20.0


class Conductor:
    """The conductor's side of one gateway component."""

    def __init__(self, channel) -> None:
        self.channel = channel

    async def send(self, body: dict[str, Any]) -> None:
        await self.channel.send(Message({"jsonrpc": "2.0", **body}))

    async def recv(self) -> dict[str, Any]:
        return (await asyncio.wait_for(self.channel.receive(), WAIT)).body

    async def call(self, body: dict[str, Any]) -> dict[str, Any]:
        await self.send(body)
        return await self.recv()


@pytest.fixture
async def gateway():
    config = parse_config(yaml.safe_dump({"name": "tools", "backends": {"sdk": {"command": PY, "args": [str(SDK_SERVER), "stdio"]}}}))
    ours, theirs = memory_pair("gateway")
    gw = build(config)
    task = asyncio.create_task(serve(theirs, theirs, gw, name="tools"))
    try:
        yield Conductor(ours)
    finally:
        await ours.aclose()
        await asyncio.wait_for(task, WAIT)  # it stops on EOF, closing its sessions
        await gw.aclose()


async def handshake(c: Conductor, method: str = "_proxy/initialize", envelope: str = "_proxy/successor") -> None:
    await c.send({"id": 1, "method": method, "params": {"protocolVersion": 1}})
    forwarded = await c.recv()
    assert forwarded["method"] == envelope and forwarded["params"]["method"] == "initialize"
    answer = await c.call({"id": forwarded["id"], "result": {"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": {"acp": True}}}})
    assert answer["id"] == 1 and answer["result"]["agentCapabilities"]["mcpCapabilities"] == {"acp": True}


async def new_session(c: Conductor, sid: str, envelope: str = "_proxy/successor") -> dict[str, Any]:
    await c.send({"id": 2, "method": "session/new", "params": {"cwd": str(ROOT), "mcpServers": []}})
    forwarded = await c.recv()
    assert forwarded["method"] == envelope
    (server,) = forwarded["params"]["params"]["mcpServers"]
    assert await c.call({"id": forwarded["id"], "result": {"sessionId": sid}}) == {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": sid}}
    return server


def mcp(msg_id: int, connection: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    inner: dict[str, Any] = {"connectionId": connection, "method": method}
    if params is not None:
        inner["params"] = params
    return {"id": msg_id, "method": "_proxy/successor", "params": {"method": "mcp/message", "params": inner}}


async def test_a_d4_connection_is_a_gateway_session_and_cancel_gets_one_answer(gateway):
    c = gateway
    await handshake(c)
    server = await new_session(c, "sess-1")
    assert server["type"] == "acp" and server["name"] == "tools" and server["serverId"].startswith("hopline-gateway-")
    connected = await c.call({"id": 10, "method": "_proxy/successor", "params": {"method": "mcp/connect", "params": {"serverId": server["serverId"]}}})
    cid = connected["result"]["connectionId"]
    init = await c.call(mcp(11, cid, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    assert init["result"]["serverInfo"]["name"] == "tools"
    await c.send({"method": "_proxy/successor", "params": {"method": "mcp/message", "params": {"connectionId": cid, "method": "notifications/initialized"}}})
    meta = await c.call(mcp(12, cid, "tools/call", {"name": "sdk__meta", "arguments": {}}))
    assert KEY in meta["result"]["content"][0]["text"] and "sess-1" in meta["result"]["content"][0]["text"]  # added from the session it serves
    await c.send(mcp(13, cid, "tools/call", {"name": "sdk__slow", "arguments": {"ms": 60000}}))
    await c.send({"method": "$/cancel_request", "params": {"requestId": 13}})
    assert await c.recv() == {"jsonrpc": "2.0", "id": 13, "error": {"code": -32800, "message": "Request cancelled"}}
    echo = await c.call(mcp(14, cid, "tools/call", {"name": "sdk__echo", "arguments": {"text": "after"}}))
    assert echo["id"] == 14 and echo["result"]["content"][0]["text"] == "after"  # nothing else arrived for 13
    assert await c.call({"id": 15, "method": "_proxy/successor", "params": {"method": "mcp/disconnect", "params": {"connectionId": cid}}}) == {"jsonrpc": "2.0", "id": 15, "result": {}}
    stale = await c.call(mcp(16, cid, "tools/list"))
    assert stale["error"]["code"] == -32602 and "unknown MCP-over-ACP connection" in stale["error"]["message"]


async def test_the_d5_binding_without_connections(gateway):
    c = gateway
    await handshake(c, "proxy/initialize", "proxy/successor")
    server = await new_session(c, "sess-5", "proxy/successor")

    def message(msg_id: int, rid: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        inner = {"serverId": server["serverId"], "requestId": rid, "method": method, "params": params}
        return {"id": msg_id, "method": "proxy/successor", "params": {"method": "mcp/message", "params": inner}}

    echo = await c.call(message(20, "r-1", "tools/call", {"name": "sdk__echo", "arguments": {"text": "d5"}}))
    assert echo["result"]["result"]["content"][0]["text"] == "d5"  # the inner outcome in its carrier
    missing = await c.call(message(21, "r-2", "tools/call", {"name": "nope", "arguments": {}}))
    assert missing["result"]["error"]["code"] == -32602  # an inner MCP error is an outcome, not an outer error
    unknown = await c.call({"id": 22, "method": "proxy/successor", "params": {"method": "mcp/message", "params": {"serverId": "srv-x", "requestId": "r", "method": "ping"}}})
    assert unknown["error"]["code"] == -33001  # stale or unknown: answered, never sent back up


async def test_session_close_releases_the_server_and_plain_initialize_is_refused(gateway):
    c = gateway
    refused = await c.call({"id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    assert refused["error"]["code"] == -32600 and "only as a proxy" in refused["error"]["message"]
    await handshake(c)
    server = await new_session(c, "sess-c")
    await c.send({"id": 30, "method": "session/close", "params": {"sessionId": "sess-c"}})
    forwarded = await c.recv()
    assert forwarded["params"]["method"] == "session/close"
    assert await c.call({"id": forwarded["id"], "result": {}}) == {"jsonrpc": "2.0", "id": 30, "result": {}}
    gone = await c.call({"id": 31, "method": "_proxy/successor", "params": {"method": "mcp/connect", "params": {"serverId": server["serverId"]}}})
    assert gone["error"]["code"] == -32602 and "any more" in gone["error"]["message"]
