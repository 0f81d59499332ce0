"""RpcPeer and ClientEnd over in-memory channels: ids, progress, server requests, failure."""

from __future__ import annotations

import asyncio

import pytest

from hopline import jsonrpc as j
from hopline.layers.session.client_end import ClientEnd
from hopline.layers.transport.rpc import RpcPeer
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.memory import memory_pair


async def test_call_gets_its_own_answer_and_progress():
    ours, theirs = memory_pair()
    seen = []
    peer = RpcPeer(ours, name="b")
    call = asyncio.create_task(peer.call("tools/call", {"name": "x"}, on_progress=seen.append))
    req = await asyncio.wait_for(theirs.receive(), 2)
    token = req.meta["progressToken"]
    await theirs.send(j.notification("notifications/progress", {"progressToken": "someone-else", "progress": 9}))
    await theirs.send(j.notification("notifications/progress", {"progressToken": token, "progress": 1}))
    await theirs.send(j.result(req.id, {"ok": True}))
    answer = await asyncio.wait_for(call, 2)
    assert answer.body["result"] == {"ok": True}
    assert [m.params["progress"] for m in seen] == [1]
    await peer.aclose()


async def test_timeout_cancels_at_the_peer():
    ours, theirs = memory_pair()
    peer = RpcPeer(ours, name="b")
    with pytest.raises(j.BackendTimeout):
        await peer.call("tools/call", {}, timeout=0.1)
    req = await theirs.receive()
    cancel = await asyncio.wait_for(theirs.receive(), 2)
    assert cancel.method == "notifications/cancelled" and cancel.params["requestId"] == req.id
    await peer.aclose()


async def test_closed_channel_fails_waiting_calls_with_unavailable():
    ours, theirs = memory_pair()
    peer = RpcPeer(ours, name="b")
    call = asyncio.create_task(peer.call("tools/call", {}))
    await theirs.receive()
    await theirs.aclose()
    answer = await asyncio.wait_for(call, 2)
    assert answer.body["error"]["code"] == -31001
    with pytest.raises(j.UnavailableError):
        await peer.call("tools/list", {})


async def test_server_requests_are_answered_under_the_peers_id():
    ours, theirs = memory_pair()

    async def on_request(message):
        return j.result(None, {"echo": message.method})

    peer = RpcPeer(ours, name="b", on_request=on_request)
    await theirs.send(j.request("srv-7", "sampling/createMessage", {}))
    answer = await asyncio.wait_for(theirs.receive(), 2)
    assert answer.id == "srv-7" and answer.body["result"] == {"echo": "sampling/createMessage"}
    await peer.aclose()


async def test_client_end_runs_requests_concurrently_and_cancels_on_request():
    started = asyncio.Event()

    async def handler(message, end):
        if message.params.get("slow"):
            started.set()
            await asyncio.sleep(30)
        return j.result(None, {"n": message.params.get("n")})

    end = ClientEnd(handler)
    await end.send(j.request("slow", "tools/call", {"slow": True}))
    await end.send(j.request(2, "tools/call", {"n": 2}))
    fast = await end.receive(2)
    assert fast.id == 2 and fast.body["result"] == {"n": 2}
    await asyncio.wait_for(started.wait(), 2)
    await end.send(j.notification("notifications/cancelled", {"requestId": "slow"}))
    with pytest.raises(TimeoutError):
        await end.receive(0.2)  # a cancelled request gets no answer
    await end.aclose()
    with pytest.raises(ChannelClosed):
        await end.receive(1)


async def test_client_end_asks_the_client_and_maps_the_answer_back():
    async def handler(message, end):
        answer = await end.ask("sampling/createMessage", {"q": 1})
        return j.result(None, {"client said": answer.body["result"]})

    end = ClientEnd(handler)
    await end.send(j.request(1, "tools/call", {}))
    question = await end.receive(2)
    assert question.method == "sampling/createMessage"
    await end.send(j.result(question.id, {"a": 42}))
    final = await end.receive(2)
    assert final.id == 1 and final.body["result"] == {"client said": {"a": 42}}
    await end.aclose()


async def test_errors_in_handlers_become_json_rpc_errors_without_tracebacks():
    async def handler(message, end):
        raise RuntimeError("secret internals")

    end = ClientEnd(handler)
    await end.send(j.request(1, "x", {}))
    answer = await end.receive(2)
    assert answer.body["error"]["code"] == -32603
    assert "secret internals" not in answer.body["error"]["message"]
    await end.aclose()


async def test_ids_toward_a_backend_are_unguessable_and_answers_to_other_ids_are_dropped_and_counted():
    ours, theirs = memory_pair()
    peer = RpcPeer(ours, name="b")
    first = asyncio.create_task(peer.call("tools/call", {"n": 1}, on_progress=lambda m: None))
    second = asyncio.create_task(peer.call("tools/call", {"n": 2}))
    a, b = await asyncio.wait_for(theirs.receive(), 2), await asyncio.wait_for(theirs.receive(), 2)
    for req in (a, b):
        assert type(req.id) is int and 0 < req.id < 2**53  # JSON integers a JavaScript backend reads exactly
    assert str(a.id) in a.meta["progressToken"]  # the progress token is as unguessable as the id
    # A misbehaving backend answers the id after the one it was given: a neighbour's, were ids sequential.
    await theirs.send(j.result(a.id + 1, {"stolen": True}))
    await theirs.send(j.result(b.id, {"n": 2}))
    await theirs.send(j.result(a.id, {"n": 1}))
    assert (await asyncio.wait_for(second, 2)).body["result"] == {"n": 2}
    assert (await asyncio.wait_for(first, 2)).body["result"] == {"n": 1}
    assert peer.stray_answers == 1
    ids = [peer.next_id() for _ in range(100)]
    assert len({y - x for x, y in zip(ids, ids[1:])}) > 1  # not a counter
    await peer.aclose()
