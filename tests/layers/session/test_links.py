"""A session's backend links (links.py) as an object of their own, on fakes of the roles they are
handed (tests/layers/session_fakes.py): no gateway, no GatewaySession."""

from __future__ import annotations

import asyncio

import pytest

from hopline.jsonrpc import UnavailableError
from hopline.layers.session.links import BackendLinks
from tests.layers.session_fakes import FakeLinkClient, FakeLinkHub, FakeSharing, FakeSource, idle_session


async def test_a_backend_that_failed_answers_31001_and_is_reconnected_with_a_surface_change():
    up, _ = idle_session("a")
    later, _ = idle_session("b")
    failed = UnavailableError("backend b is unavailable: refused", backend="b", reason="start_failed")
    sharing = FakeSharing({"a": [up], "b": [failed, later]})
    client = FakeLinkClient()
    links = BackendLinks(client, FakeLinkHub(FakeSource({"a": object(), "b": object()}), sharing))
    assert await links.backend("a") is up
    with pytest.raises(UnavailableError) as caught:
        await links.backend("b")
    assert caught.value.data["backend"] == "b" and "refused" in caught.value.message
    assert "b" in links.tasks  # reconnecting, owned by the links (cancelled when the client closes)
    await asyncio.wait_for(links.tasks["b"], 2)
    assert await links.backend("b") is later and client.changes == 1 and sharing.asked.count("b") == 2



async def test_closing_cancels_and_awaits_every_reconnect():
    failed = UnavailableError("backend b is unavailable: refused", backend="b", reason="start_failed")
    client = FakeLinkClient()
    hub = FakeLinkHub(FakeSource({"b": object()}), FakeSharing({"b": [failed]}))
    hub.settings.routing.retry_after = 60.0  # the reconnect waits: closing must not
    links = BackendLinks(client, hub)
    with pytest.raises(UnavailableError):
        await links.backend("b")
    reconnect = links.tasks["b"]
    await links.cancel_tasks()
    assert reconnect.cancelled() and links.tasks == {}
