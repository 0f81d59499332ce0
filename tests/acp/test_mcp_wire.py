"""MCP-over-ACP wire shapes as data (src/hopline/acp/mcp_wire.py)."""

from __future__ import annotations

import pytest

from hopline.acp import mcp_wire
from hopline.acp.mcp_wire import MCP


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"type": "acp", "name": "t", "serverId": "S"}, ("S", "S", "serverId")),
        ({"type": "acp", "name": "t", "id": "I"}, ("I", "I", "id")),
        ({"type": "http", "name": "t", "url": "acp:U", "headers": []}, ("U", "acp:U", "url")),
        ({"name": "t", "url": "acp:U", "headers": []}, ("U", "acp:U", "url")),
        ({"type": "http", "name": "t", "url": "http://x/mcp", "headers": []}, None),
        ({"name": "t", "command": "x", "args": [], "env": []}, None),
        ({"type": "acp", "name": "t"}, None),
        ("not an object", None),
    ],
)
def test_declared(entry, expected):
    assert mcp_wire.declared(entry) == expected


def test_a_server_is_the_same_in_every_shape():
    for shape in ("serverId", "id", "url"):
        shown = mcp_wire.shown_id("acp:U", "url", shape)
        entry = mcp_wire.declaration({"name": "t", "_meta": {"k": 1}}, shape, shown)
        assert mcp_wire.declared(entry) == ("U", shown, shape) and entry["_meta"] == {"k": 1}
    assert mcp_wire.shown_id("S", "serverId", "serverId") == "S"


@pytest.mark.parametrize(
    ("method", "params", "kind", "dialect", "key", "connection"),
    [
        ("mcp/connect", {"serverId": "S"}, "connect", "d4", "S", None),
        ("mcp/connect", {"acpId": "S"}, "connect", "d2", "S", None),
        ("_mcp/connect", {"acp_url": "acp:S"}, "connect", "d3", "S", None),
        ("_mcp/connect", {"url": "acp:S", "connectionId": "k"}, "connect", "d1", "S", "k"),
        ("mcp/message", {"connectionId": "c", "method": "ping"}, "message", "d4", None, "c"),
        ("_mcp/message", {"connectionId": "c", "method": "ping", "id": 3}, "message", "d1", None, "c"),
        ("mcp/message", {"serverId": "S", "requestId": "r", "method": "ping"}, "message", "d5", "S", None),
        ("mcp/disconnect", {"connectionId": "c"}, "disconnect", "d4", None, "c"),
        ("_mcp/disconnect", {"connection_id": "c"}, "disconnect", "d3", None, "c"),
        ("_mcp/disconnect", {"connectionId": "c"}, "disconnect", "d1", None, "c"),
    ],
)
def test_parse_every_spelling(method, params, kind, dialect, key, connection):
    op = mcp_wire.parse(method, params)
    assert (op.kind, op.dialect, op.key, op.connection) == (kind, dialect, key, connection)


@pytest.mark.parametrize(("method", "params"), [("mcp/connect", {}), ("mcp/message", {"connectionId": "c"}), ("mcp/message", {"serverId": "S", "method": "x"}), ("mcp/disconnect", {})])
def test_parse_malformed(method, params):
    with pytest.raises(ValueError):
        mcp_wire.parse(method, params)


def test_parse_ignores_other_methods():
    assert mcp_wire.parse("session/prompt", {}) is None


def test_builders_round_trip_through_parse():
    for name, d in MCP.items():
        if not d.connectionless:
            method, params = mcp_wire.connect(d, "acp:S" if d.shape == "url" else "S", "k", {"x": 1})
            assert mcp_wire.parse(method, params).key == "S"
            method, params, _ = mcp_wire.disconnect(d, "c")
            assert mcp_wire.parse(method, params).connection == "c"
        method, params = mcp_wire.message(d, "c" if not d.connectionless else "S", "tools/call", {"a": 1}, "r")
        op = mcp_wire.parse(method, params)
        assert (op.method, op.params) == ("tools/call", {"a": 1}), name


def test_consumer_shape_and_session_meta():
    assert mcp_wire.consumer_shape({"agentCapabilities": {"mcpCapabilities": {"acp": True}}}) == "serverId"
    assert mcp_wire.consumer_shape({"capabilities": {"mcp_acp_transport": True}}) == "url"
    assert mcp_wire.consumer_shape({"agentCapabilities": {"mcpCapabilities": {"http": True}}}) is None
    key = mcp_wire.SESSION_META_KEY
    assert key == "io.hopline/acp-session-id"
    assert mcp_wire.with_session(None, "s") == {"_meta": {key: "s"}}
    assert mcp_wire.with_session({"_meta": {key: "mine"}, "a": 1}, "s") == {"_meta": {key: "mine"}, "a": 1}  # kept if set
    assert mcp_wire.with_session({"a": 1}, None) == {"a": 1}
    assert mcp_wire.outcome({"error": {"code": 1}}) == {"error": {"code": 1}}
    assert mcp_wire.from_outcome({"result": None, "error": {"code": 1}}) == ("result", None)  # result wins
