"""The binding parameters and era detection."""

from __future__ import annotations

from hopline.binding import MCP_HANDSHAKE, MCP_MODERN, Era, era_of_message, era_of_version


def test_seven_parameters_per_appendix_d():
    for b in (MCP_HANDSHAKE, MCP_MODERN):
        d = b.as_dict()
        assert d["METADATA-FIELD"] == "_meta"
        assert d["HOP-KEY"] == "io.modelcontextprotocol/proxy-hops"
        assert d["NAME-DELIMITER"] == "__"
        assert d["NAME-CHARSET"] == "[a-zA-Z0-9_-]"
        assert {"tools/list", "resources/list", "prompts/list"} <= set(d["LIST-METHODS"])
        assert set(d["INVOKE-METHODS"]) == {"tools/call", "resources/read", "prompts/get"}
        assert d["CHANGE-SIGNAL"] == "notifications/tools/list_changed"
    assert MCP_HANDSHAKE.handshake and not MCP_MODERN.handshake


def test_era_of_version_follows_the_sdk_header_routing():
    assert era_of_version(None) is Era.HANDSHAKE
    assert era_of_version("2025-06-18") is Era.HANDSHAKE
    assert era_of_version("2026-07-28") is Era.MODERN
    assert era_of_version("2099-01-01") is Era.MODERN  # answered by the modern path (-32022)


def test_era_of_message_on_a_byte_stream():
    modern = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
    assert era_of_message(modern) is Era.MODERN
    assert era_of_message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}) is Era.HANDSHAKE
    assert era_of_message({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) is Era.HANDSHAKE
