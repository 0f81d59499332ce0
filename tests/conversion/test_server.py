"""The in-process MCP server for converted tools: both eras, tools only, cancellation."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from hopline.binding import LATEST_MODERN, Era
from hopline.conversion.server import OpenApiBackends, http_timeout
from hopline.jsonrpc import Message, UnavailableError
from hopline.layers.discovery.backend import BackendSession
from tests.conftest import SERVERS


def backend_spec(**kw):
    fields = {"openapi": str(SERVERS / "petstore.openapi.yaml"), "base_url": "http://127.0.0.1:9", "headers": {}, "operations": None, "allow_addresses": []}
    return SimpleNamespace(**{**fields, **kw})


@pytest.mark.parametrize("era", [Era.HANDSHAKE, Era.MODERN])
async def test_both_eras_are_answered_with_the_converted_tools_only(era):
    connector = OpenApiBackends("pets", backend_spec(operations=["listPets", "getPet"]), base_dir=None, timeout=5)
    try:
        session = await BackendSession.open("pets", await connector.open_session(era), prefer=era, timeout=5)
        assert session.info.era is era
        assert session.info.capabilities == {"tools": {"listChanged": False}}
        assert session.info.server_info["name"] == "hopline-openapi/pets" and session.info.server_info["title"] == "Test pet store"
        if era is Era.MODERN:
            assert session.info.protocol_version == LATEST_MODERN
        tools = await session.list_all("tools/list")
        assert [t["name"] for t in tools] == ["listPets", "getPet"]
        answer = await session.call("resources/list", {})
        assert answer.body["error"]["code"] == -32601
        result = (await session.call("tools/call", {"name": "getPet", "arguments": {}})).body["result"]
        assert result["isError"] and "missing required argument: petId" in result["content"][0]["text"]
        await session.aclose()
    finally:
        await connector.aclose()


async def test_cancelling_a_call_cancels_its_http_request(tmp_path):
    connector = OpenApiBackends("pets", backend_spec(), base_dir=None, timeout=5)
    channel = await connector.open_session(Era.HANDSHAKE)
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang(arguments, req):
        started.set()
        try:
            await asyncio.Event().wait()  # an HTTP request that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise

    catalog = channel.protocol.catalog
    catalog.tools["slowEndpoint"] = type(catalog.tools["slowEndpoint"])("slowEndpoint", "", {"type": "object"}, hang)
    await channel.send(Message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    assert (await channel.receive()).body["result"]["protocolVersion"] == "2025-11-25"
    await channel.send(Message({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slowEndpoint", "arguments": {}}}))
    await asyncio.wait_for(started.wait(), 5)
    running = channel._inflight[2]
    await channel.send(Message({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}))
    await asyncio.wait_for(cancelled.wait(), 5)  # the request itself was cancelled
    await asyncio.wait([running], timeout=5)
    assert running.done() and not channel._inflight
    await channel.aclose()
    await connector.aclose()


async def test_a_spec_that_cannot_be_loaded_makes_the_backend_unavailable_not_broken():
    connector = OpenApiBackends("pets", backend_spec(openapi="missing.yaml"), base_dir="/nonexistent", timeout=5)
    with pytest.raises(UnavailableError, match="backend pets: cannot read the spec file missing.yaml") as info:
        await connector.open_session(Era.MODERN)
    assert info.value.data["reason"] == "openapi_spec"
    await connector.aclose()


def test_the_http_timeout_leaves_the_gateway_deadline_a_margin():
    assert http_timeout(30) == 29.5 and http_timeout(1.5) == pytest.approx(1.35) and http_timeout(0.01) == 0.05
