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


SUB = "io.modelcontextprotocol/subscriptionId"


def _tagged(method: str, listen_id, **params) -> j.Message:
    return j.notification(method, {**params, "_meta": {SUB: listen_id}})


async def test_listen_streams_on_one_connection_each_get_their_own_frames_under_their_own_id():
    """2026-07-28 listens share a backend connection: what the backend tags with a listen's
    (backend) id goes to that listen's view alone, tagged with the client's id; its result too."""
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    tools, prompts = mux.view(), mux.view()
    await tools.send(j.request(7, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    await prompts.send(j.request(7, "subscriptions/listen", {"notifications": {"promptsListChanged": True}}))
    t_id, p_id = (await theirs.receive()).id, (await theirs.receive()).id
    await theirs.send(
        _tagged("notifications/subscriptions/acknowledged", p_id, notifications={"promptsListChanged": True})
    )
    await theirs.send(
        _tagged("notifications/subscriptions/acknowledged", t_id, notifications={"toolsListChanged": True})
    )
    await theirs.send(_tagged("notifications/tools/list_changed", t_id))
    got_p = await asyncio.wait_for(prompts.receive(), 2)
    assert got_p.body == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"promptsListChanged": True}, "_meta": {SUB: 7}},
    }
    got_t = [await asyncio.wait_for(tools.receive(), 2) for _ in range(2)]
    assert [m.method for m in got_t] == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed"]
    assert all(m.meta == {SUB: 7} for m in got_t)
    assert prompts.inbox.empty() and mux.unattributed == 0  # the tools change did not leak onto the prompts stream
    await theirs.send(j.result(p_id, {"_meta": {SUB: p_id}}))  # the stream's end
    end = await asyncio.wait_for(prompts.receive(), 2)
    assert end.id == 7 and end.body["result"] == {"_meta": {SUB: 7}}
    assert mux.listens == {t_id}
    await tools.aclose()  # cancelled at the backend; its id no longer routes
    assert mux.listens == set()
    await mux.aclose()


async def test_a_tag_naming_no_listen_in_flight_is_not_trusted():
    """A subscriptionId that is not the backend id of a listen in flight (a tools/call's id, a
    string, a finished listen) routes nothing: the usual rules apply."""
    ours, theirs = memory_pair()
    mux = Multiplexer(ours)
    a, b = mux.view(), mux.view()
    await a.send(j.request(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    await b.send(j.request(1, "tools/call", {"name": "x"}))
    _, call_id = (await theirs.receive()).id, (await theirs.receive()).id
    for bogus in (call_id, str(call_id), [call_id], None):
        await theirs.send(_tagged("notifications/message", bogus, level="info", data="?"))
    await asyncio.sleep(0.05)
    assert a.inbox.empty() and b.inbox.empty() and mux.unattributed == 4
    await mux.aclose()
