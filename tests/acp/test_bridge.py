"""hopline's MCP-over-ACP bridge alone (src/hopline/acp/bridge.py): the test plays the conductor
and the MCP provider; the official MCP SDK client talks to the loopback endpoint it gets.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from acp_harness import PY, ROOT, RawClient
from mcp import Client

KEY = "io.hopline/acp-session-id"


@pytest.fixture
async def bridge():
    started: list[RawClient] = []

    async def launch(*args: str) -> RawClient:
        c = await RawClient.start([PY, "-m", "hopline.acp.bridge", *args])
        started.append(c)
        return c

    yield launch
    for c in started:
        code = await c.close(kill_group=False)
        c.kill()
        assert code == 0, "".join(c.stderr[-20:])


async def handshake(b: RawClient, agent_caps: dict[str, Any]) -> dict[str, Any]:
    await b.send({"id": 1, "method": "proxy/initialize", "params": {"protocolVersion": 1}})
    env = await b.recv()
    assert env["method"] == "proxy/successor" and env["params"]["method"] == "initialize"
    await b.send({"id": env["id"], "result": {"protocolVersion": 1, "agentCapabilities": agent_caps}})
    return await b.recv()


async def new_session(b: RawClient, entry: dict[str, Any], sid: str) -> list[dict[str, Any]]:
    await b.send({"id": 2, "method": "session/new", "params": {"cwd": str(ROOT), "mcpServers": [entry, {"name": "plain", "command": "x", "args": [], "env": []}]}})
    env = await b.recv()
    assert env["method"] == "proxy/successor" and env["params"]["method"] == "session/new"
    await b.send({"id": env["id"], "result": {"sessionId": sid}})
    assert await b.recv() == {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": sid}}
    return env["params"]["params"]["mcpServers"]


async def provide(b: RawClient, seen: list[dict[str, Any]]) -> None:
    """Answer what the bridge relays, as a D4 provider with one tool."""
    while True:
        msg = await b.recv(timeout=30)
        seen.append(msg)
        p = msg.get("params") or {}
        if msg.get("method") == "mcp/connect":
            await b.send({"id": msg["id"], "result": {"connectionId": "c-1"}})
        elif msg.get("method") == "mcp/disconnect":
            await b.send({"id": msg["id"], "result": {}})
        elif msg.get("method") == "mcp/message" and "id" in msg:
            inner = p["method"]
            if inner == "initialize":
                result = {"protocolVersion": p["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}}
            elif inner == "tools/list":
                result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object", "properties": {}}}]}
            else:
                result = {"content": [{"type": "text", "text": json.dumps((p.get("params") or {}).get("_meta"))}], "isError": False}
            await b.send({"id": msg["id"], "result": result})


async def test_bridge_rewrites_acp_servers_and_relays_with_the_session_id(bridge):
    b = await bridge()
    answer = await handshake(b, {"mcpCapabilities": {"http": True}})
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": {"http": True, "acp": True}}}}
    servers = await new_session(b, {"type": "acp", "name": "tools", "serverId": "S"}, "sess-42")
    assert servers[1] == {"name": "plain", "command": "x", "args": [], "env": []}  # other servers untouched
    assert servers[0]["type"] == "http" and servers[0]["url"].startswith("http://127.0.0.1:") and servers[0]["name"] == "tools"
    seen: list[dict[str, Any]] = []
    provider = asyncio.create_task(provide(b, seen))
    try:
        async with Client(servers[0]["url"], mode="legacy") as client:
            result = await asyncio.wait_for(client.call_tool("whoami", {}), 10)
        assert json.loads(result.content[0].text)[KEY] == "sess-42"  # what the tool handler sees
    finally:
        provider.cancel()
    assert seen[0]["method"] == "mcp/connect" and seen[0]["params"] == {"serverId": "S", "_meta": {KEY: "sess-42"}}
    requests = [m for m in seen if m.get("method") == "mcp/message" and "id" in m]
    assert [m["params"]["method"] for m in requests][:1] == ["initialize"]
    assert all(m["params"]["params"]["_meta"][KEY] == "sess-42" for m in requests)  # every relayed request
    assert all(m["params"]["connectionId"] == "c-1" for m in requests)


async def test_bridge_speaks_d1_spelling_for_acp_urls_and_echoes_the_d1_role(bridge):
    b = await bridge("--transport", "stdio")
    await b.send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "_meta": {"proxy": True}}})
    env = await b.recv()
    assert env["method"] == "_proxy/successor/request" and "_meta" not in env["params"]["params"]
    await b.send({"id": env["id"], "result": {"protocolVersion": 1}})
    answer = await b.recv()
    assert answer["result"]["_meta"] == {"proxy": True} and answer["result"]["agentCapabilities"]["mcpCapabilities"]["acp"] is True  # stdio: always
    await b.send({"id": 2, "method": "session/load", "params": {"sessionId": "old", "cwd": str(ROOT), "mcpServers": [{"type": "http", "name": "t", "url": "acp:U", "headers": []}]}})
    env = await b.recv()
    (server,) = env["params"]["params"]["mcpServers"]
    assert server["command"] == PY and server["args"][:4] == ["-m", "hopline", "relay", "--stdio"]


async def test_bridge_refuses_to_run_as_a_terminal_agent(bridge):
    b = await bridge()
    answer, _ = await b.call("initialize", {"protocolVersion": 1})
    assert answer["error"]["code"] == -32600 and "only as a proxy" in answer["error"]["message"]


async def test_bridge_forwards_both_ways_and_translates_cancellation(bridge):
    b = await bridge()
    await handshake(b, {})
    await b.send({"id": "p", "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}})
    env = await b.recv()
    assert env["method"] == "proxy/successor" and env["params"]["method"] == "session/prompt"
    await b.send({"method": "$/cancel_request", "params": {"requestId": "p"}})
    assert await b.recv() == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": env["id"]}}
    # a request from the successor goes up plainly, its answer back in the envelope's id
    await b.send({"id": 77, "method": "proxy/successor", "params": {"method": "session/request_permission", "params": {"sessionId": "s"}}})
    up = await b.recv()
    assert up["method"] == "session/request_permission"
    await b.send({"id": up["id"], "result": {"outcome": {"outcome": "cancelled"}}})
    assert await b.recv() == {"jsonrpc": "2.0", "id": 77, "result": {"outcome": {"outcome": "cancelled"}}}
    await b.send({"id": env["id"], "result": {"stopReason": "cancelled"}})
    assert await b.recv() == {"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "cancelled"}}


class FakeBridge:
    """What :class:`AcpMcpChannel` asks of the bridge, recorded."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.thens: list[Any] = []
        self.channels: dict[Any, Any] = {}

    def request(self, method, params, then):
        self.sent.append((method, params))
        self.thens.append(then)
        return len(self.sent)

    def notify(self, method, params):
        self.sent.append((method, params))

    def consumer_dialect(self, server):
        return "d4"


async def test_a_tool_call_during_session_setup_waits_for_the_session_id():
    from hopline.acp.bridge import Served
    from hopline.acp.bridge.mcp import AcpMcpChannel
    from hopline.jsonrpc import Message

    fake = FakeBridge()
    served = Served("S", "S", "serverId", "tools", "/mcp/x", setting_up=1)  # its session/new is not answered yet
    channel = AcpMcpChannel(fake, served)
    await channel.send(Message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
    fake.thens[0]({"result": {"connectionId": "c"}})
    await channel.send(Message({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}}))
    assert [m for m, _ in fake.sent] == ["mcp/connect", "mcp/message"]  # initialize went; the call waits
    assert "_meta" not in fake.sent[1][1]["params"]
    served.setting_up, served.session = 0, "s-7"
    served.known()
    method, params = fake.sent[2]
    assert method == "mcp/message" and params["method"] == "tools/call" and params["params"]["_meta"] == {KEY: "s-7"}
