"""A held call (held_invoke.py) on fakes of the roles it is handed (tests/layers/session_fakes.py):
a 2026-07-28 client's call to a handshake backend that asks it for input, on the backend's shared
session, round by round, with the backend's progress and logs relayed to the round that waits."""

from __future__ import annotations

from typing import Any

from hopline.binding import META_CLIENT_CAPABILITIES, Era
from hopline.context import Principal
from hopline.jsonrpc import notification, request
from hopline.layers.session import held_invoke
from hopline.layers.session.held import HeldCalls
from hopline.pipeline import Call
from tests.layers.session_fakes import (
    FakeBackendSession,
    FakeBackendSettings,
    FakeHeldClient,
    FakeHeldHub,
    FakeHeldSettings,
)

ALICE = Principal("alice", issuer="test")


async def test_a_held_call_asks_the_client_then_answers_it_on_the_shared_session():
    client: FakeHeldClient

    async def asks(method: str, params: dict[str, Any]) -> dict[str, Any]:
        held = client.held_call  # what the shared session's backend asks comes to the held call
        held.progress(notification("notifications/progress", {"progressToken": 1, "progress": 1}))
        reply = await held.on_request(request(1, "sampling/createMessage", {"messages": []}))
        return {"content": [{"type": "text", "text": reply.body["result"]["model"]}]}

    backend = FakeBackendSession("b", Era.HANDSHAKE, asks)
    hub = FakeHeldHub(HeldCalls(ttl=30), FakeHeldSettings({"b": FakeBackendSettings()}))
    client = FakeHeldClient(hub, backend, principal=ALICE)
    meta = {META_CLIENT_CAPABILITIES: {"sampling": {}}, "progressToken": "p1"}
    first = request(5, "tools/call", {"name": "t", "_meta": meta})
    assert held_invoke.applies(client, backend, first, first.params)
    step = await held_invoke.send(client, first, Call("tools/call", "b", {"name": "t"}, timeout=5))
    value = step.body["result"]
    assert value["resultType"] == "input_required" and [r["method"] for r in value["inputRequests"].values()] == [
        "sampling/createMessage"
    ]
    assert [m.params["progressToken"] for m in client.told] == ["p1"]  # under the round's own token
    answers = {key: {"model": "m-1"} for key in value["inputRequests"]}
    retry = {"name": "t", "inputResponses": answers, "requestState": value["requestState"]}
    again = request(6, "tools/call", {**retry, "_meta": {META_CLIENT_CAPABILITIES: {"sampling": {}}}})
    assert held_invoke.applies(client, backend, again, retry)
    final = await held_invoke.send(client, again, Call("tools/call", "b", retry, timeout=5))
    assert final.body["result"]["content"][0]["text"] == "m-1" and backend.sent[0][2] is client

