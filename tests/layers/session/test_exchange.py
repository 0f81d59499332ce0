"""The innermost call layers (layers/session/exchange.py) on fakes (tests/layers/session_fakes.py):
what ``GatewaySession._forward``'s closure did, as steps a pipeline runs with or without any
configured layer, each attempt binding the backend session anew."""

from __future__ import annotations

from typing import Any

from hopline.binding import META_CLIENT_CAPABILITIES, Era
from hopline.context import Context
from hopline.jsonrpc import Message, request
from hopline.layers.session.exchange import EXCHANGE
from hopline.layers.session.task_calls import TASKS_EXTENSION
from hopline.pipeline import Call, Pipeline
from tests.layers.session_fakes import FakeBackendSession, FakeClient


def call_of(client: FakeClient, method: str, params: dict[str, Any], era: Era, meta: dict | None = None) -> Call:
    message = request(7, method, params)
    return Call(method, "b", params, context=Context(era=era), meta=meta or {}, client=client, request=message)


async def echo(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": method}]}


async def test_a_handshake_clients_capabilities_travel_to_a_modern_backend_with_no_layer_configured():
    backend = FakeBackendSession("b", Era.MODERN, echo)
    client = FakeClient({"b": [backend]}, client_capabilities={"sampling": {}})
    answer = await Pipeline().run(call_of(client, "tools/call", {"name": "t"}, Era.HANDSHAKE), EXCHANGE)
    assert answer.body["result"]["content"][0]["text"] == "tools/call"
    (method, sent, owner), = backend.sent
    caps = sent["_meta"][META_CLIENT_CAPABILITIES]
    assert caps["sampling"] == {} and TASKS_EXTENSION in caps["extensions"] and owner is client
    client.task_settings.mediate = False  # the gateway does not take tasks on: the extension is not declared
    await Pipeline().run(call_of(client, "tools/call", {"name": "t"}, Era.HANDSHAKE), EXCHANGE)
    assert backend.sent[-1][1]["_meta"][META_CLIENT_CAPABILITIES] == {"sampling": {}}


async def test_a_modern_client_on_a_modern_backend_is_sent_as_it_came():
    backend = FakeBackendSession("b", Era.MODERN, echo)
    client = FakeClient({"b": [backend]}, client_capabilities={"sampling": {}})
    params = {"name": "t", "arguments": {"x": 1}}
    await Pipeline().run(call_of(client, "tools/call", params, Era.MODERN), EXCHANGE)
    assert backend.sent == [("tools/call", params, client)] and client.asked == []


async def test_each_attempt_binds_the_backend_session_anew():
    failing = FakeBackendSession("b", Era.HANDSHAKE, echo)
    fresh = FakeBackendSession("b", Era.HANDSHAKE, echo)

    async def gone(method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("reset")

    failing.answer = gone

    async def retry_once(call: Call, next: Any) -> Message:  # a resilience layer's retry
        try:
            return await next(call)
        except ConnectionError:
            return await next(call)

    client = FakeClient({"b": [failing, fresh]})
    call = call_of(client, "tools/call", {"name": "t"}, Era.HANDSHAKE)
    answer = await Pipeline(calls=[retry_once]).run(call, EXCHANGE)
    assert "result" in answer.body and client.looked_up == 2 and len(fresh.sent) == 1


async def test_an_input_request_is_asked_of_a_handshake_client_and_the_call_retried():
    rounds: list[dict[str, Any]] = []

    async def asks_once(method: str, params: dict[str, Any]) -> dict[str, Any]:
        rounds.append(params)
        if "inputResponses" in params:
            return {"content": [], "answered": params["inputResponses"]}
        return {
            "resultType": "input_required",
            "inputRequests": {"k": {"method": "elicitation/create", "params": {"message": "?"}}},
            "requestState": "opaque",
        }

    backend = FakeBackendSession("b", Era.MODERN, asks_once)
    client = FakeClient({"b": [backend]}, replies={"elicitation/create": {"action": "accept"}})
    answer = await Pipeline().run(call_of(client, "tools/call", {"name": "t"}, Era.HANDSHAKE), EXCHANGE)
    assert client.asked == [("elicitation/create", {"message": "?"})]
    assert answer.body["result"]["answered"] == {"k": {"action": "accept"}} and rounds[1]["requestState"] == "opaque"
    # A 2026-07-28 client reads input_required itself: handed back as it came.
    modern = FakeClient({"b": [backend]})
    answer = await Pipeline().run(call_of(modern, "tools/call", {"name": "t"}, Era.MODERN), EXCHANGE)
    assert answer.body["result"]["resultType"] == "input_required" and modern.asked == []


async def test_a_task_is_settled_for_a_handshake_client_with_progress_under_its_token():
    async def tasks(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "tools/call":
            return {"resultType": "task", "taskId": "t1", "status": "working", "pollIntervalMs": 1}
        return {"taskId": "t1", "status": "completed", "result": {"content": [{"type": "text", "text": "done"}]}}

    backend = FakeBackendSession("b", Era.MODERN, tasks)
    client = FakeClient({"b": [backend]})
    call = call_of(client, "tools/call", {"name": "t"}, Era.HANDSHAKE, meta={"progressToken": "p"})
    answer = await Pipeline().run(call, EXCHANGE)
    assert answer.body["result"]["content"][0]["text"] == "done"
    assert [m for m, _, _ in backend.sent] == ["tools/call", "tasks/get"]
    assert all(m.params["progressToken"] == "p" for m in client.told)


async def test_subscriptions_on_a_shared_session_reach_the_backend_once_per_uri():
    backend = FakeBackendSession("b", Era.HANDSHAKE, echo)
    a, b = FakeClient({"b": [backend]}), FakeClient({"b": [backend]})
    for client in (a, b):
        await Pipeline().run(call_of(client, "resources/subscribe", {"uri": "file:///x"}, Era.HANDSHAKE), EXCHANGE)
    assert [m for m, _, _ in backend.sent] == ["resources/subscribe"]
    await Pipeline().run(call_of(a, "resources/unsubscribe", {"uri": "file:///x"}, Era.HANDSHAKE), EXCHANGE)
    assert len(backend.sent) == 1  # b still subscribes
    await Pipeline().run(call_of(b, "resources/unsubscribe", {"uri": "file:///x"}, Era.HANDSHAKE), EXCHANGE)
    assert [m for m, _, _ in backend.sent] == ["resources/subscribe", "resources/unsubscribe"]
    own = FakeClient({"b": [backend]}, own=[backend])  # its own session: every request goes on
    await Pipeline().run(call_of(own, "resources/subscribe", {"uri": "file:///x"}, Era.HANDSHAKE), EXCHANGE)
    await Pipeline().run(call_of(own, "resources/subscribe", {"uri": "file:///x"}, Era.HANDSHAKE), EXCHANGE)
    assert len(backend.sent) == 4
