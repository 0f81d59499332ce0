"""What the gateway composes for a 2026-07-28 client (layers/capability/compose.py)."""

from __future__ import annotations

from hopline.binding import Era
from hopline.layers.capability import compose
from hopline.layers.discovery.backend import BackendInfo

TOOL = {"name": "b__slow", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}, "annotations": {"readOnlyHint": True}}


def test_a_2026_tool_list_carries_no_handshake_era_execution_field():
    value = compose.stamp({"tools": [TOOL, {"name": "b__echo", "inputSchema": {"type": "object"}}]}, name="gw", reverse=False, backend_id=None, is_list=True)
    assert [sorted(t) for t in value["tools"]] == [["annotations", "inputSchema", "name"], ["inputSchema", "name"]]
    assert "execution" in TOOL  # the backend's own definition is untouched
    assert value["resultType"] == "complete" and value["ttlMs"] == 0


def test_a_reverse_discover_result_has_no_tasks_capability():
    info = BackendInfo(Era.HANDSHAKE, "2025-11-25", capabilities={"tools": {"listChanged": True}, "tasks": {"requests": {}}})
    caps = compose.discover_result({"b": info}, name="gw", own_instructions=None, reverse=True)["capabilities"]
    assert caps == {"tools": {"listChanged": True}}
    assert "tasks" in compose.initialize_result({"b": info}, requested="2025-11-25", name="gw", own_instructions=None, reverse=True)["capabilities"]


def test_a_handshake_answered_while_a_backend_starts_advertises_the_lists_it_may_bring():
    """Issue 29 item 9: the backend joins later with list_changed; the client must know to list."""
    info = BackendInfo(Era.HANDSHAKE, "2025-11-25", capabilities={"logging": {}})
    caps = compose.initialize_result({"up": info}, requested="2025-11-25", name="gw", own_instructions=None, reverse=False, starting=True)["capabilities"]
    assert caps == {"tools": {"listChanged": True}, "prompts": {"listChanged": True},
                    "resources": {"listChanged": True, "subscribe": False}, "logging": {}}
    settled = compose.initialize_result({"up": info}, requested="2025-11-25", name="gw", own_instructions=None, reverse=False)
    assert settled["capabilities"] == {"logging": {}}  # truthful once every backend is known
