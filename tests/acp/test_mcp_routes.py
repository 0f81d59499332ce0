"""MCP-over-ACP routing in the sans-io core (src/hopline/acp/mcp_routes.py, mcp_wire.py).

Chains here are ``[p1, agent]`` (agent = 2) or ``[p1, p2, agent]`` (agent = 3);
``declare`` makes p1 add one ACP-transport server to a session and returns the
``mcpServers`` the agent received.
"""

from __future__ import annotations

from typing import Any

from router_harness import CLIENT, P1, P2, Wire, init

KEY = "io.hopline/acp-session-id"
ACP_AGENT = {"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": {"acp": True}}}
D1_AGENT = {"protocolVersion": 1, "agentCapabilities": {"_meta": {"mcp_acp_transport": True}}}
D1 = {"envelope": "_proxy/successor/request", "handshake": "initialize"}
D4 = {"envelope": "_proxy/successor", "handshake": "_proxy/initialize"}
D5 = {"envelope": "proxy/successor", "handshake": "proxy/initialize"}


def chain(dialect: dict[str, str], agent: dict[str, Any] = ACP_AGENT, proxies: int = 1, **kw: Any) -> Wire:
    name = {"initialize": "d1", "_proxy/initialize": "d4", "proxy/initialize": "d5"}[dialect["handshake"]]
    wire = Wire([f"p{i}" for i in range(1, proxies + 1)] + ["agent"], dialect_options=[name], **kw)
    init(wire, proxies, dialect["envelope"], agent_result=agent, handshake=dialect["handshake"])
    return wire


def declare(wire: Wire, entry: dict[str, Any], envelope: str, sid: str = "s1") -> list[dict[str, Any]]:
    _, to_p1 = wire.one(CLIENT, {"id": "new", "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    conn, to_agent = wire.one(P1, {"id": 500, "method": envelope, "params": {"method": "session/new", "params": {"cwd": "/", "mcpServers": [entry]}}})
    assert conn == 2
    assert wire.one(2, {"id": to_agent["id"], "result": {"sessionId": sid}}) == (P1, {"jsonrpc": "2.0", "id": 500, "result": {"sessionId": sid}})
    assert wire.one(P1, {"id": to_p1["id"], "result": {"sessionId": sid}})[0] == CLIENT
    return to_agent["params"]["mcpServers"]


def inner(msg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The message a proxy received in its successor envelope."""
    return msg["params"]["method"], msg["params"].get("params")


def test_d4_both_sides_direct_to_the_declarer_with_conductor_owned_ids_and_session_meta():
    wire = chain(D4, proxies=2)
    # p1 declares; p2 forwards it; the agent answers
    _, to_p1 = wire.one(CLIENT, {"id": "new", "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    entry = {"type": "acp", "name": "tools", "serverId": "S"}
    conn, to_p2 = wire.one(P1, {"id": 500, "method": "_proxy/successor", "params": {"method": "session/new", "params": {"cwd": "/", "mcpServers": [entry]}}})
    assert conn == P2 and to_p2["params"]["mcpServers"] == [entry]
    conn, to_agent = wire.one(P2, {"id": 600, "method": "_proxy/successor", "params": {"method": "session/new", "params": to_p2["params"]}})
    assert conn == 3 and to_agent["params"]["mcpServers"] == [entry]
    wire.one(3, {"id": to_agent["id"], "result": {"sessionId": "s1"}})
    wire.one(P2, {"id": to_p2["id"], "result": {"sessionId": "s1"}})
    wire.one(P1, {"id": to_p1["id"], "result": {"sessionId": "s1"}})
    # connect: straight to p1 (p2 never sees it), the session id in _meta
    conn, msg = wire.one(3, {"id": 1, "method": "mcp/connect", "params": {"serverId": "S"}})
    assert conn == P1 and inner(msg) == ("mcp/connect", {"serverId": "S", "_meta": {KEY: "s1"}})
    assert wire.one(P1, {"id": msg["id"], "result": {"connectionId": "p1-conn"}}) == (3, {"jsonrpc": "2.0", "id": 1, "result": {"connectionId": "hopline-mcp-1"}})
    # a request on it: respelled with p1's connection id, _meta added, answer unchanged
    conn, msg = wire.one(3, {"id": 2, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "tools/call", "params": {"name": "x"}}})
    assert conn == P1 and inner(msg) == ("mcp/message", {"connectionId": "p1-conn", "method": "tools/call", "params": {"name": "x", "_meta": {KEY: "s1"}}})
    assert wire.one(P1, {"id": msg["id"], "result": {"content": []}}) == (3, {"jsonrpc": "2.0", "id": 2, "result": {"content": []}})
    # provider → consumer: back to the agent under the conductor's connection id
    note = {"connectionId": "p1-conn", "method": "notifications/progress", "params": {"progress": 1}}
    assert wire.one(P1, {"method": "_proxy/successor", "params": {"method": "mcp/message", "params": note}}) == (
        3,
        {"jsonrpc": "2.0", "method": "mcp/message", "params": {**note, "connectionId": "hopline-mcp-1"}},
    )
    conn, msg = wire.one(3, {"id": 3, "method": "mcp/disconnect", "params": {"connectionId": "hopline-mcp-1"}})
    assert conn == P1 and inner(msg) == ("mcp/disconnect", {"connectionId": "p1-conn"})
    assert wire.one(P1, {"id": msg["id"], "result": {}})[1]["result"] == {}
    conn, err = wire.one(3, {"id": 4, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "ping"}})
    assert conn == 3 and err["error"]["code"] == -32602


def test_unknown_and_malformed():
    wire = chain(D5)
    declare(wire, {"type": "acp", "name": "t", "serverId": "S"}, "proxy/successor")
    assert wire.one(2, {"id": 1, "method": "mcp/connect", "params": {"serverId": "nope"}})[1]["error"]["code"] == -32602
    assert wire.one(2, {"id": 2, "method": "mcp/message", "params": {"serverId": "nope", "requestId": "r", "method": "ping"}})[1]["error"]["code"] == -33001
    assert wire.one(2, {"id": 3, "method": "mcp/message", "params": {"connectionId": "nope", "method": "ping"}})[1]["error"]["code"] == -32602
    assert wire.feed(2, {"method": "mcp/message", "params": {"connectionId": "nope", "method": "notifications/x"}}) == []
    assert wire.one(2, {"id": 4, "method": "mcp/connect", "params": {}})[1]["error"]["code"] == -32602
    assert wire.one(2, {"id": 5, "method": "mcp/message", "params": {"serverId": "S"}})[1]["error"]["code"] == -32602


def test_d1_declarer_d4_consumer_declarations_and_connect_are_respelled():
    wire = chain(D1)
    seen = declare(wire, {"type": "http", "name": "t", "url": "acp:U", "headers": []}, "_proxy/successor/request")
    assert seen == [{"type": "acp", "name": "t", "serverId": "U"}]  # the agent speaks serverId (mcpCapabilities.acp)
    conn, msg = wire.one(2, {"id": 1, "method": "mcp/connect", "params": {"serverId": "U"}})
    assert conn == P1 and msg["method"] == "_proxy/successor/request"
    assert inner(msg) == ("_mcp/connect", {"url": "acp:U", "connectionId": "hopline-mcp-2", "_meta": {KEY: "s1"}})  # D1: the connector names it
    answer = wire.one(P1, {"id": msg["id"], "result": {"connectionId": "hopline-mcp-2", "serverInfo": {"name": "t"}}})
    assert answer[1]["result"] == {"serverInfo": {"name": "t"}, "connectionId": "hopline-mcp-1"}
    _, msg = wire.one(2, {"id": 2, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "tools/list"}})
    method, params = inner(msg)
    assert method == "_mcp/message" and params["connectionId"] == "hopline-mcp-2" and params["method"] == "tools/list" and "id" in params


def test_d5_provider_d4_consumer_connection_is_local_and_outcomes_unwrapped():
    wire = chain(D5)
    declare(wire, {"type": "acp", "name": "t", "serverId": "S"}, "proxy/successor")
    assert wire.one(2, {"id": 1, "method": "mcp/connect", "params": {"serverId": "S"}}) == (2, {"jsonrpc": "2.0", "id": 1, "result": {"connectionId": "hopline-mcp-1"}})
    conn, msg = wire.one(2, {"id": 2, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "tools/call", "params": {"name": "x"}}})
    method, params = inner(msg)
    assert (conn, method) == (P1, "mcp/message") and params["serverId"] == "S" and params["params"]["_meta"] == {KEY: "s1"}
    rid = params["requestId"]
    note = {"serverId": "S", "requestId": rid, "method": "notifications/progress", "params": {"progress": 1}}
    assert wire.one(P1, {"method": "proxy/successor", "params": {"method": "mcp/message", "params": note}})[1]["params"] == {
        "connectionId": "hopline-mcp-1",
        "method": "notifications/progress",
        "params": {"progress": 1},
    }
    assert wire.one(P1, {"id": msg["id"], "result": {"result": {"content": []}}})[1] == {"jsonrpc": "2.0", "id": 2, "result": {"content": []}}
    _, msg = wire.one(2, {"id": 3, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "tools/call"}})
    assert wire.one(P1, {"id": msg["id"], "result": {"error": {"code": -32000, "message": "no"}}})[1] == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "no"}}
    # the request is over: a late notification for it is dropped
    assert wire.feed(P1, {"method": "proxy/successor", "params": {"method": "mcp/message", "params": note}}) == []


def test_d4_provider_d5_consumer_gets_an_implicit_connection_and_wrapped_outcomes():
    wire = chain(D4)
    declare(wire, {"type": "acp", "name": "t", "serverId": "S"}, "_proxy/successor")
    conn, msg = wire.one(2, {"id": 7, "method": "mcp/message", "params": {"serverId": "S", "requestId": "r1", "method": "tools/call", "params": {}}})
    assert conn == P1 and inner(msg)[0] == "mcp/connect"  # the message waits for it
    conn, msg = wire.one(P1, {"id": msg["id"], "result": {"connectionId": "pc"}})
    assert conn == P1 and inner(msg) == ("mcp/message", {"connectionId": "pc", "method": "tools/call", "params": {"_meta": {KEY: "s1"}}})
    note = {"connectionId": "pc", "method": "notifications/progress", "params": {"progress": 1}}
    out = wire.one(P1, {"method": "_proxy/successor", "params": {"method": "mcp/message", "params": note}})
    assert out[1]["params"] == {"serverId": "S", "requestId": "r1", "method": "notifications/progress", "params": {"progress": 1}}
    assert wire.one(P1, {"id": msg["id"], "result": {"content": []}})[1]["result"] == {"result": {"content": []}}
    _, msg = wire.one(2, {"id": 8, "method": "mcp/message", "params": {"serverId": "S", "requestId": "r2", "method": "tools/call"}})
    assert inner(msg)[0] == "mcp/message"  # the connection is reused
    assert wire.one(P1, {"id": msg["id"], "error": {"code": -32000, "message": "no"}})[1]["result"] == {"error": {"code": -32000, "message": "no"}}
    assert wire.feed(P1, {"method": "_proxy/successor", "params": {"method": "mcp/message", "params": note}}) == []  # nothing in flight


def test_a_client_declaring_server_id_is_tried_in_d4_then_d5():
    wire = Wire(["agent"])
    conn, msg = wire.one(CLIENT, {"id": "i", "method": "initialize", "params": {"protocolVersion": 1}})
    wire.one(1, {"id": msg["id"], "result": ACP_AGENT})
    _, msg = wire.one(CLIENT, {"id": "n", "method": "session/new", "params": {"cwd": "/", "mcpServers": [{"type": "acp", "name": "c", "serverId": "C"}]}})
    wire.one(1, {"id": msg["id"], "result": {"sessionId": "s9"}})
    conn, msg = wire.one(1, {"id": 1, "method": "mcp/connect", "params": {"serverId": "C"}})
    assert (conn, msg["method"], msg["params"]) == (CLIENT, "mcp/connect", {"serverId": "C", "_meta": {KEY: "s9"}})
    assert wire.one(CLIENT, {"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})[1]["result"] == {"connectionId": "hopline-mcp-1"}
    conn, msg = wire.one(1, {"id": 2, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "ping"}})
    assert conn == CLIENT and msg["params"]["serverId"] == "C" and "requestId" in msg["params"]


def test_a_lost_declarer_takes_its_servers_and_connections_with_it():
    wire = chain(D5, on_crash="fail")
    declare(wire, {"type": "acp", "name": "t", "serverId": "S"}, "proxy/successor")
    wire.one(2, {"id": 1, "method": "mcp/connect", "params": {"serverId": "S"}})
    wire.one(2, {"id": 2, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "tools/call"}})
    out = wire.lost(P1)
    assert out[0][0] == 2 and out[0][1]["id"] == 2 and out[0][1]["error"]["code"] == -31001  # in flight: the conductor's error
    assert wire.one(2, {"id": 3, "method": "mcp/message", "params": {"connectionId": "hopline-mcp-1", "method": "ping"}})[1]["error"]["code"] == -32602
    assert wire.one(2, {"id": 4, "method": "mcp/connect", "params": {"serverId": "S"}})[1]["error"]["code"] == -32602


def test_declaration_shapes_follow_the_receiver():
    for agent, expected in ((D1_AGENT, {"type": "http", "name": "t", "url": "acp:S", "headers": []}), ({"protocolVersion": 1}, {"type": "acp", "name": "t", "serverId": "S"})):
        wire = chain(D5, agent)
        assert declare(wire, {"type": "acp", "name": "t", "serverId": "S"}, "proxy/successor") == [expected]
    wire = Wire(["p1", "agent"], dialect_options=["d5", "2=d2"])
    init(wire, 1, agent_result={"protocolVersion": 1})
    assert declare(wire, {"type": "http", "name": "t", "url": "acp:S"}, "proxy/successor") == [{"type": "acp", "name": "t", "id": "S"}]  # configured: d2


def test_declarations_reaching_a_d1_proxy_are_acp_urls():
    wire = Wire(["p1", "p2", "agent"], dialect_options=["1=d5", "2=d1"])
    conn, msg = wire.one(CLIENT, {"id": "i", "method": "initialize", "params": {"protocolVersion": 1}})
    conn, msg = wire.one(P1, {"id": 9, "method": "proxy/successor", "params": {"method": "initialize", "params": {"protocolVersion": 1}}})
    assert (conn, msg["method"]) == (P2, "initialize") and msg["params"]["_meta"] == {"proxy": True}
    wire.one(P2, {"id": 10, "method": "_proxy/successor/request", "params": {"method": "initialize", "params": {"protocolVersion": 1}}})
    _, to_p1 = wire.one(CLIENT, {"id": "n", "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    conn, msg = wire.one(P1, {"id": 11, "method": "proxy/successor", "params": {"method": "session/new", "params": {"mcpServers": [{"type": "acp", "name": "t", "serverId": "S"}]}}})
    assert conn == P2 and msg["params"]["mcpServers"] == [{"type": "http", "name": "t", "url": "acp:S", "headers": []}]
