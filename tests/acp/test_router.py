"""The routing core without I/O: feed messages, read what it sends (src/hopline/acp/router.py)."""

from __future__ import annotations

import pytest
from router_harness import AGENT, CLIENT, P1, P2, Wire, init

from hopline.acp import chain


def test_plain_chain_rewrites_ids_and_maps_answers_back():
    wire = Wire(["agent"])
    conn, msg = wire.one(CLIENT, {"id": "abc", "method": "initialize", "params": {"protocolVersion": 1}})
    assert conn == 1 and msg["method"] == "initialize" and msg["id"] == 1  # minted on the agent's connection
    assert wire.one(1, {"id": 1, "result": {"protocolVersion": 1}}) == (CLIENT, {"jsonrpc": "2.0", "id": "abc", "result": {"protocolVersion": 1}})
    conn, msg = wire.one(CLIENT, {"id": 7, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    assert (conn, msg["id"]) == (1, 2)
    assert wire.one(1, {"id": 2, "result": {"sessionId": "s"}})[1]["id"] == 7  # JSON type kept


def test_two_d5_proxies_wrap_going_up_and_unwrap_going_down():
    wire = Wire(["p1", "p2", "agent"])
    init(wire, 2)
    conn, msg = wire.one(CLIENT, {"id": 5, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}})
    assert conn == P1 and msg["method"] == "session/prompt"  # plain from the predecessor
    conn, msg = wire.one(P1, {"id": 9, "method": "proxy/successor", "params": {"method": "session/prompt", "params": {"sessionId": "s"}, "_meta": {"hop": 1}}})
    assert conn == P2 and msg["method"] == "session/prompt" and msg["params"] == {"sessionId": "s"}  # envelope _meta is hop-local
    conn, msg = wire.one(P2, {"id": 3, "method": "proxy/successor", "params": {"method": "session/prompt", "params": {"sessionId": "s"}}})
    assert conn == AGENT
    agent_id = msg["id"]
    # agent → client traffic: an update, then the result; both keep their order on every hop
    up = wire.one(AGENT, {"method": "session/update", "params": {"sessionId": "s", "update": {"x": 1}}})
    assert up == (P2, {"jsonrpc": "2.0", "method": "proxy/successor", "params": {"method": "session/update", "params": {"sessionId": "s", "update": {"x": 1}}}})
    assert wire.one(AGENT, {"id": agent_id, "result": {"stopReason": "end_turn"}}) == (P2, {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})


def test_requests_from_the_agent_reach_the_client_and_answers_return():
    wire = Wire(["p1", "agent"])
    init(wire, 1)
    conn, msg = wire.one(2, {"id": 0, "method": "session/request_permission", "params": {"sessionId": "s"}})
    assert conn == P1 and msg["method"] == "proxy/successor" and msg["params"]["method"] == "session/request_permission"
    envelope_id = msg["id"]
    conn, msg = wire.one(P1, {"id": 44, "method": "session/request_permission", "params": {"sessionId": "s"}})
    assert conn == CLIENT and msg["method"] == "session/request_permission"
    assert wire.one(CLIENT, {"id": msg["id"], "result": {"outcome": {"outcome": "cancelled"}}}) == (P1, {"jsonrpc": "2.0", "id": 44, "result": {"outcome": {"outcome": "cancelled"}}})
    assert wire.one(P1, {"id": envelope_id, "result": {"outcome": {"outcome": "cancelled"}}}) == (2, {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}})


def test_cancel_request_is_translated_hop_by_hop():
    wire = Wire(["p1", "agent"])
    init(wire, 1)
    _, to_p1 = wire.one(CLIENT, {"id": "c-1", "method": "session/prompt", "params": {"sessionId": "s"}})
    _, to_agent = wire.one(P1, {"id": 77, "method": "proxy/successor", "params": {"method": "session/prompt", "params": {"sessionId": "s"}}})
    assert wire.one(CLIENT, {"method": "$/cancel_request", "params": {"requestId": "c-1"}}) == (P1, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": to_p1["id"]}})
    assert wire.one(P1, {"method": "$/cancel_request", "params": {"requestId": 77}}) == (2, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": to_agent["id"]}})
    assert wire.feed(CLIENT, {"method": "$/cancel_request", "params": {"requestId": "unknown"}}) == []  # ignored silently


def test_probe_order_d5_then_d4_then_d1_and_lock_on_forward():
    wire = Wire(["p1", "agent"])
    _, msg = wire.one(CLIENT, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    assert msg["method"] == "proxy/initialize"
    _, msg = wire.one(P1, {"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
    assert msg["method"] == "_proxy/initialize"
    _, msg = wire.one(P1, {"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
    assert msg["method"] == "initialize" and msg["params"]["_meta"] == {"proxy": True}
    # held while probing: a request the client sent too early waits for the dialect
    assert wire.feed(CLIENT, {"id": 2, "method": "session/new", "params": {}}) == []
    out = wire.feed(P1, {"id": 50, "method": "_proxy/successor/request", "params": {"method": "initialize", "params": {"protocolVersion": 1, "_meta": {"proxy": True}}}})
    assert [(c, m["method"]) for c, m in out] == [(P1, "session/new"), (2, "initialize")]
    assert "_meta" not in out[1][1]["params"]  # the agent is never told it is a proxy
    assert wire.router.dialect[1] == "d1"
    wire.one(2, {"id": out[1][1]["id"], "result": {"protocolVersion": 1}})
    up = wire.one(2, {"method": "session/update", "params": {"sessionId": "s"}})
    assert up[1]["method"] == "_proxy/successor/notification"  # D1 envelopes from now on
    # the D1 answer echoes the role; the echo is hop-local and stripped for the client
    answer = wire.one(P1, {"id": 3, "result": {"protocolVersion": 1, "_meta": {"proxy": True}}})
    assert answer == (CLIENT, {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})


def test_terminal_agent_in_proxy_position_is_refused_after_all_probes():
    wire = Wire(["agent-as-proxy", "agent"])
    _, msg = wire.one(CLIENT, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    _, msg = wire.one(P1, {"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
    _, msg = wire.one(P1, {"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
    conn, err = wire.one(P1, {"id": msg["id"], "result": {"protocolVersion": 1}})  # no echo: not a proxy
    assert conn == CLIENT and err["error"]["code"] == -32600 and err["error"]["message"] == "Proxy component did not accept proxy capability"
    conn, err = wire.one(CLIENT, {"id": 2, "method": "session/new", "params": {}})
    assert conn == CLIENT and "did not start as a proxy" in err["error"]["message"]


def test_configured_dialect_passes_the_refusal_through():
    wire = Wire(["agent-as-proxy", "agent"], dialect_options=["d5"])
    _, msg = wire.one(CLIENT, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    refusal = {"code": -32601, "message": "Method not found", "data": {"method": "proxy/initialize"}}
    assert wire.one(P1, {"id": msg["id"], "error": refusal}) == (CLIENT, {"jsonrpc": "2.0", "id": 1, "error": refusal})


def test_negative_initialization_cases():
    wire = Wire(["p1", "agent"])
    first = wire.one(CLIENT, {"id": 1, "method": "session/new", "params": {}})
    assert first[1]["error"] == {"code": -32600, "message": "Invalid request", "data": "expected `initialize` request"}
    for method in ("proxy/initialize", "_proxy/initialize"):
        err = wire.one(CLIENT, {"id": 2, "method": method, "params": {}})[1]["error"]
        assert err["code"] == -32600 and err["data"] == "initialize/proxy requests are only sent by the conductor"
    wire.one(CLIENT, {"id": 3, "method": "initialize", "params": {"protocolVersion": 1}})
    again = wire.one(CLIENT, {"id": 4, "method": "initialize", "params": {"protocolVersion": 1}})[1]["error"]
    assert again == {"code": -32603, "message": "conductor initialization was re-entered"}
    # a proxy forwarding a proxy handshake is refused too
    err = wire.one(P1, {"id": 9, "method": "proxy/successor", "params": {"method": "_proxy/initialize", "params": {}}})
    assert err[0] == P1 and err[1]["error"]["data"] == "initialize/proxy requests are only sent by the conductor"


def test_second_initialize_after_start_is_already_initialized():
    wire = Wire(["agent"])
    _, msg = wire.one(CLIENT, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    wire.one(1, {"id": msg["id"], "result": {"protocolVersion": 1}})
    err = wire.one(CLIENT, {"id": 2, "method": "initialize", "params": {"protocolVersion": 1}})[1]["error"]
    assert err == {"code": -32600, "message": "conductor already initialized"}


def test_crash_answers_affected_requests_and_cancels_the_dead_ones_work():
    wire = Wire(["p1", "agent"])
    init(wire, 1)
    _, to_p1 = wire.one(CLIENT, {"id": "c-9", "method": "session/prompt", "params": {"sessionId": "s"}})
    _, to_agent = wire.one(P1, {"id": 70, "method": "proxy/successor", "params": {"method": "session/prompt", "params": {"sessionId": "s"}}})
    out = wire.lost(P1)
    assert out[0][0] == CLIENT and out[0][1]["id"] == "c-9"
    assert out[0][1]["error"]["code"] == -31001 and "exited with status 7" in out[0][1]["error"]["message"]
    assert out[1] == (2, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": to_agent["id"]}})
    assert wire.feed(2, {"id": to_agent["id"], "result": {"stopReason": "cancelled"}}) == []  # orphan answer dropped
    later = wire.one(CLIENT, {"id": "c-10", "method": "session/prompt", "params": {}})
    assert later[0] == CLIENT and later[1]["error"]["data"] == {"backend": "p1", "reason": "exited"}


def test_bypass_routes_around_a_dead_proxy():
    wire = Wire(["p1", "p2", "agent"], on_crash="bypass")
    init(wire, 2)
    wire.lost(P2)
    conn, msg = wire.one(P1, {"id": 5, "method": "proxy/successor", "params": {"method": "session/prompt", "params": {}}})
    assert conn == AGENT and msg["method"] == "session/prompt"
    conn, msg = wire.one(AGENT, {"method": "session/update", "params": {}})
    assert conn == P1 and msg["method"] == "proxy/successor"


def test_proxy_mode_wraps_toward_the_parent_and_echoes_the_d1_role():
    wire = Wire(["p1"], mode=chain.PROXY_MODE)
    refused = wire.one(CLIENT, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    assert refused[1]["error"]["code"] == -32600  # a proxy-mode conductor must be offered the role
    conn, msg = wire.one(CLIENT, {"id": 2, "method": "initialize", "params": {"protocolVersion": 1, "_meta": {"proxy": True}}})
    assert (conn, msg["method"]) == (P1, "proxy/initialize") and "_meta" not in msg["params"]
    conn, msg = wire.one(P1, {"id": 8, "method": "proxy/successor", "params": {"method": "initialize", "params": {"protocolVersion": 1}}})
    assert conn == CLIENT and msg["method"] == "_proxy/successor/request"  # the parent speaks D1
    assert wire.one(CLIENT, {"id": msg["id"], "result": {"protocolVersion": 1}}) == (P1, {"jsonrpc": "2.0", "id": 8, "result": {"protocolVersion": 1}})
    conn, msg = wire.one(P1, {"id": 1, "result": {"protocolVersion": 1}})
    assert conn == CLIENT and msg["result"] == {"protocolVersion": 1, "_meta": {"proxy": True}}
    # traffic from our successor arrives wrapped from the parent and reaches p1 wrapped again
    conn, msg = wire.one(CLIENT, {"method": "_proxy/successor/notification", "params": {"method": "session/update", "params": {"k": 1}}})
    assert conn == P1 and msg == {"jsonrpc": "2.0", "method": "proxy/successor", "params": {"method": "session/update", "params": {"k": 1}}}


def test_proxy_mode_without_proxies_still_answers_as_a_proxy():
    wire = Wire([], mode=chain.PROXY_MODE)
    conn, msg = wire.one(CLIENT, {"id": 1, "method": "_proxy/initialize", "params": {"protocolVersion": 1}})
    assert conn == CLIENT and msg["method"] == "_proxy/successor" and msg["params"]["method"] == "initialize"
    assert wire.one(CLIENT, {"id": msg["id"], "result": {"protocolVersion": 1}}) == (CLIENT, {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})


def test_trace_names_every_hop():
    wire = Wire(["p1", "agent"])
    init(wire, 1)
    hops = [(src, dst, dialect, method) for src, dst, _m, dialect, method in wire.trace]
    assert hops[0] == ("client", "p1", "d5", "proxy/initialize")
    assert ("p1", "agent", None, "initialize") in hops
    assert hops[-1] == ("p1", "client", None, "initialize")


@pytest.mark.parametrize("bad", [{"id": 1, "method": "proxy/successor", "params": {}}, {"id": 1, "method": "proxy/successor"}])
def test_envelope_without_inner_method_is_invalid_params(bad):
    wire = Wire(["p1", "agent"])
    init(wire, 1)
    conn, msg = wire.one(P1, bad)
    assert conn == P1 and msg["error"]["code"] == -32602


def test_a_success_without_forwarding_initialize_is_a_refusal():
    """An agent whose SDK treats ``_proxy/initialize`` as an extension method answers it
    successfully without forwarding anything: it did not act as a proxy."""
    wire = Wire(["agent-as-proxy", "agent"])
    _, msg = wire.one(CLIENT, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    _, msg = wire.one(P1, {"id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})
    assert msg["method"] == "_proxy/initialize"
    _, msg = wire.one(P1, {"id": msg["id"], "result": {"method": "proxy/initialize", "echo": {}}})
    assert msg["method"] == "initialize"  # D4 was not really accepted: D1 is offered next
