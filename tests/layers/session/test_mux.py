"""The multiplexer over a shared backend channel, with in-memory channels (no I/O)."""

from __future__ import annotations

import asyncio

import pytest

from hopline import jsonrpc as j
from hopline.layers.session.mux import Multiplexer
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.memory import memory_pair


async def echo_backend(channel, *, log=None):
    """Answers every request with its own id and params; records what it saw."""
    try:
        while True:
            msg = await channel.receive()
            if log is not None:
                log.append(msg.body)
            if msg.is_request():
                await channel.send(j.result(msg.id, {"echo": msg.params}))
    except ChannelClosed:
        pass


async def test_same_client_ids_never_cross():
    ours, theirs = memory_pair()
    backend = asyncio.create_task(echo_backend(theirs))
    mux = Multiplexer(ours)
    views = [mux.view() for _ in range(5)]
    for n, v in enumerate(views):
        await v.send(j.request(1, "tools/call", {"who": n}))
    answers = [await asyncio.wait_for(v.receive(), 2) for v in views]
    assert [a.id for a in answers] == [1] * 5
    assert [a.body["result"]["echo"]["who"] for a in answers] == list(range(5))
    await mux.aclose()
    backend.cancel()


async def test_progress_tokens_are_rewritten_and_restored():
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    a, b = mux.view(), mux.view()
    await a.send(j.request("x", "tools/call", {"_meta": {"progressToken": 1}}))
    await b.send(j.request("x", "tools/call", {"_meta": {"progressToken": 1}}))
    seen = [await theirs.receive(), await theirs.receive()]
    tokens = [m.meta["progressToken"] for m in seen]
    assert len(set(tokens)) == 2 and 1 not in tokens
    await theirs.send(j.notification("notifications/progress", {"progressToken": tokens[1], "progress": 5}))
    got = await asyncio.wait_for(b.receive(), 2)
    assert got.params == {"progressToken": 1, "progress": 5}
    assert a.inbox.empty()
    await mux.aclose()


async def test_cancel_is_translated_and_unknown_cancels_dropped():
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    a, b = mux.view(), mux.view()
    await a.send(j.request(3, "tools/call", {}))
    backend_id = (await theirs.receive()).id
    await b.send(j.notification("notifications/cancelled", {"requestId": 3}))  # not B's request
    await a.send(j.notification("notifications/cancelled", {"requestId": 3}))
    cancel = await asyncio.wait_for(theirs.receive(), 2)
    assert cancel.params["requestId"] == backend_id
    assert theirs._inbox.empty()
    await mux.aclose()


async def test_closing_a_view_cancels_its_requests_at_the_backend():
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    v = mux.view()
    await v.send(j.request(1, "tools/call", {}))
    backend_id = (await theirs.receive()).id
    await v.aclose()
    cancel = await asyncio.wait_for(theirs.receive(), 2)
    assert cancel.method == "notifications/cancelled" and cancel.params["requestId"] == backend_id
    await mux.aclose()


async def test_shared_handshake_is_forwarded_once():
    ours, theirs = memory_pair()
    log: list = []
    backend = asyncio.create_task(echo_backend(theirs, log=log))
    mux = Multiplexer(ours, share_handshake=True)
    a, b = mux.view(), mux.view()
    await a.send(j.request(1, "initialize", {"protocolVersion": "2025-11-25"}))
    first = await asyncio.wait_for(a.receive(), 2)
    await a.send(j.notification("notifications/initialized"))
    await b.send(j.request("b-init", "initialize", {"protocolVersion": "2025-11-25"}))
    second = await asyncio.wait_for(b.receive(), 2)
    await b.send(j.notification("notifications/initialized"))
    await asyncio.sleep(0.05)
    assert second.id == "b-init" and second.body["result"] == first.body["result"]
    assert [m["method"] for m in log] == ["initialize", "notifications/initialized"]
    await mux.aclose()
    backend.cancel()


async def test_backend_death_fails_everything_in_flight():
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    views = [mux.view() for _ in range(3)]
    for n, v in enumerate(views):
        await v.send(j.request(n, "tools/call", {}))
    await theirs.aclose()
    for n, v in enumerate(views):
        answer = await asyncio.wait_for(v.receive(), 2)
        assert answer.id == n and answer.body["error"]["code"] == -31001
        with pytest.raises(ChannelClosed):
            await asyncio.wait_for(v.receive(), 2)
    with pytest.raises(ChannelClosed):
        mux.view()


async def test_server_requests_go_to_the_only_owner_and_answers_come_back():
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    a, b = mux.view(), mux.view()
    await a.send(j.request(1, "tools/call", {}))
    await theirs.receive()
    await theirs.send(j.request("s1", "sampling/createMessage", {"messages": []}))
    req = await asyncio.wait_for(a.receive(), 2)
    assert req.method == "sampling/createMessage" and b.inbox.empty()
    await a.send(j.result(req.id, {"role": "assistant"}))
    answer = await asyncio.wait_for(theirs.receive(), 2)
    assert answer.id == "s1"
    await mux.aclose()


async def test_unattributable_server_request_is_refused_not_guessed():
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    a, b = mux.view(), mux.view()
    await a.send(j.request(1, "tools/call", {}))
    await b.send(j.request(1, "tools/call", {}))
    await theirs.receive(), await theirs.receive()
    await theirs.send(j.request("s1", "sampling/createMessage", {}))
    refusal = await asyncio.wait_for(theirs.receive(), 2)
    assert refusal.id == "s1" and "error" in refusal.body
    assert a.inbox.empty() and b.inbox.empty() and mux.unattributed == 1
    await mux.aclose()


async def test_backend_ids_are_unguessable_and_an_answer_to_an_id_not_in_flight_is_dropped_and_counted():
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    a, b = mux.view(), mux.view()
    await a.send(j.request(1, "tools/call", {"who": "a"}))
    await b.send(j.request(1, "tools/call", {"who": "b"}))
    sent_a, sent_b = await asyncio.wait_for(theirs.receive(), 2), await asyncio.wait_for(theirs.receive(), 2)
    assert all(type(m.id) is int and 0 < m.id < 2**53 for m in (sent_a, sent_b))
    await theirs.send(j.result(sent_a.id + 1, {"for": "a, addressed to the next id"}))  # b's, were ids sequential
    await theirs.send(j.result(sent_b.id, {"for": "b"}))
    await theirs.send(j.result(sent_a.id, {"for": "a"}))
    assert (await asyncio.wait_for(b.receive(), 2)).body["result"] == {"for": "b"}
    assert (await asyncio.wait_for(a.receive(), 2)).body["result"] == {"for": "a"}
    assert mux.stray_answers == 1 and a.inbox.empty() and b.inbox.empty()
    await mux.aclose()
