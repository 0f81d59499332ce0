"""MCP-over-ACP end to end: a proxy of the test suite declares an ACP-transport MCP server
whose tool ``whoami`` reports the ACP session id it finds in ``_meta``; an agent uses it,
natively in every dialect pairing, or through hopline's bridge with the official MCP SDK client.
"""

from __future__ import annotations

import json
import shlex

import pytest
from acp_harness import PY, peer, proxy

KEY = "io.hopline/acp-session-id"


def mcp_proxy(dialect: str, mcp: str, *extra: str) -> str:
    return peer("mcp_proxy.py", "--dialect", dialect, "--mcp", mcp, *extra)


async def said(c, sid: str, text: str) -> dict:
    answer, before = await c.prompt(sid, text)
    assert answer["result"] == {"stopReason": "end_turn"}, answer
    return json.loads(before[-1]["params"]["update"]["content"]["text"].removeprefix("[T] "))


# (proxy handshake dialect, its MCP-over-ACP dialect, the agent's MCP-over-ACP dialect)
PAIRS = [
    ("d4", "d4", "d4"),  # the Rust conductor's world
    ("d5", "d5", "d5"),  # the newest schema: connectionless
    ("d5", "d5", "d4"),  # connectionless provider, connection consumer
    ("d4", "d4", "d5"),  # connection provider, connectionless consumer
    ("d1", "d1", "d4"),  # Thinkwell-style acp: URL provider, serverId consumer
    ("d4", "d3", "d1"),  # sacp-style provider (snake_case), Thinkwell-style consumer
    ("d5", "d2", "d3"),  # RFD-text provider (acpId), sacp-style consumer
]


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
async def test_native_consumer_in_every_dialect_pairing(conductor, pair, tmp_path):
    dialect, provider, consumer = pair
    between = tmp_path / "between.jsonl"
    c = await conductor(mcp_proxy(dialect, provider), proxy("d1", "T", "--log", str(between)), peer("mcp_agent.py", "--mcp", consumer))
    await c.initialize()
    sid = await c.new_session()
    whoami = (await said(c, sid, "call whoami"))["results"]
    assert len(whoami) == 1 and whoami[0]["session"] == sid and whoami[0]["declaredIn"] == sid
    if provider != "d5":  # connectionless providers have no connect
        assert whoami[0]["connectMeta"] == sid
    progress = await said(c, sid, 'call progress {"steps": 2}')
    assert progress["results"] == ["done"]
    assert [n["params"]["progress"] for n in progress["notes"]] == [1, 2]
    spelled = {"d5": {"serverId", "requestId"}, "d1": {"connectionId"}}.get(consumer, {"connectionId"})
    assert all(spelled <= n.keys() for n in progress["notes"])
    failed = await said(c, sid, "call fail")
    assert failed["results"] == [{"error": {"code": -32000, "message": "tool failed"}}]  # an inner MCP error, in any spelling
    # the proxy in between never saw MCP traffic: it goes straight to the declarer
    seen = [json.loads(line) for line in between.read_text().splitlines()]
    assert not any("mcp/" in json.dumps(m.get("params", {}).get("method", "")) or "mcp/" in str(m.get("method")) for m in seen)


async def test_sessions_get_their_own_servers(conductor):
    c = await conductor(mcp_proxy("d5", "d5"), peer("mcp_agent.py", "--mcp", "d4"))
    await c.initialize()
    sids = [await c.new_session(), await c.new_session()]
    for sid in reversed(sids):
        (who,) = (await said(c, sid, "call whoami"))["results"]
        assert who["session"] == sid == who["declaredIn"]


async def test_unknown_server_and_connection_are_errors(conductor):
    c = await conductor(mcp_proxy("d4", "d4"), peer("mcp_agent.py", "--mcp", "d4"))
    await c.initialize()
    sid = await c.new_session()
    for method, params, code in (
        ("mcp/connect", {"serverId": "srv-nobody"}, -32602),
        ("mcp/message", {"connectionId": "hopline-mcp-999", "method": "ping"}, -32602),
        ("mcp/message", {"serverId": "srv-nobody", "requestId": "r", "method": "ping"}, -33001),
    ):
        answer = await said(c, sid, f"raw {method} {json.dumps(params)}")
        assert answer["error"]["code"] == code, answer


@pytest.mark.parametrize(
    ("transport", "mode", "provider"),
    [("http", "legacy", "d4"), ("http", "auto", "d5"), ("http", "2026-07-28", "d5"), ("http", "legacy", "d1"), ("stdio", "legacy", "d4")],
)
async def test_bridge_serves_an_http_only_agent_through_the_official_sdk_client(conductor, transport, mode, provider):
    c = await conductor(mcp_proxy(provider, provider), peer("http_mcp_agent.py"), options=("--mcp-bridge", transport))
    init = await c.initialize()
    assert init["result"]["agentCapabilities"]["mcpCapabilities"]["acp"] is True  # the bridge makes the chain able to take them
    sid = await c.new_session()
    for _ in range(2):  # a second MCP client session over the same server
        out = await said(c, sid, f"call whoami {mode}")
        assert out["kinds"] == [transport]
        (who,) = out["results"]
        assert who["session"] == sid and who["declaredIn"] == sid


@pytest.mark.parametrize("outer_dialect", ["auto", "d1"])
async def test_through_a_nested_conductor(conductor, outer_dialect):
    """The inner conductor is the declarer as far as the outer one knows; it routes on to its own proxy."""
    inner = shlex.join([PY, "-m", "hopline.acp", "--proxy", "--", mcp_proxy("d4", "d4"), proxy("d5", "T")])
    c = await conductor(inner, peer("mcp_agent.py", "--mcp", "d4"), options=("--dialect", f"1={outer_dialect}"))
    await c.initialize()
    sid = await c.new_session()
    (who,) = (await said(c, sid, "call whoami"))["results"]
    assert who["session"] == who["declaredIn"] == who["connectMeta"] == sid
    progress = await said(c, sid, 'call progress {"steps": 3}')
    assert progress["results"] == ["done"] and [n["params"]["progress"] for n in progress["notes"]] == [1, 2, 3]
