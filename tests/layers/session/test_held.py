"""Held calls (layers/session/held.py) without a network: ownership of a requestState,
requests asked together travel together, unanswered asks and expiry answer the backend."""

from __future__ import annotations

import asyncio

from hopline.jsonrpc import Message, request
from hopline.layers.session.held import HeldCalls


async def test_a_held_call_belongs_to_its_owner_and_rounds_until_done():
    calls = HeldCalls(ttl=30)
    backend_asks: list[Message] = []

    async def start(held):
        backend_asks.append(await held.on_request(request(1, "sampling/createMessage", {"messages": []})))
        both = await asyncio.gather(held.on_request(request(2, "roots/list", {})), held.on_request(request(3, "elicitation/create", {"message": "?"})))
        backend_asks.extend(both)
        return Message({"jsonrpc": "2.0", "id": 9, "result": {"content": []}})

    held = calls.hold(("iss", "alice"), start, on_expire=lambda h: None)
    first = await held.next_step(5)
    assert first["resultType"] == "input_required" and [r["method"] for r in first["inputRequests"].values()] == ["sampling/createMessage"]
    assert calls.take(first["requestState"], ("iss", "bob")) is None and calls.take("hopline-held:forged", ("iss", "alice")) is None
    assert calls.take(first["requestState"], ("iss", "alice")) is held
    held.answer({k: {"model": "m"} for k in first["inputRequests"]})
    second = await held.next_step(5)
    assert sorted(r["method"] for r in second["inputRequests"].values()) == ["elicitation/create", "roots/list"]
    roots_key = next(k for k, r in second["inputRequests"].items() if r["method"] == "roots/list")
    held.answer({roots_key: {"roots": []}})  # the elicitation is left unanswered
    done = await held.next_step(5)
    assert isinstance(done, Message) and done.body["result"] == {"content": []}
    assert backend_asks[0].body["result"] == {"model": "m"} and backend_asks[1].body["result"] == {"roots": []}
    assert backend_asks[2].body["error"]["code"] == -32603  # unanswered: an error, never a hang
    calls.release(held)
    assert len(calls) == 0


async def test_an_abandoned_call_expires_and_its_backend_request_is_answered():
    calls = HeldCalls(ttl=0.05)
    answered: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
    expired = asyncio.Event()

    async def start(held):
        # As with a real backend session: its request is served by a task of the RPC peer,
        # while the held call itself waits for the final answer (expiry cancels that wait).
        async def backend_asks() -> None:
            answered.set_result(await held.on_request(request(1, "sampling/createMessage", {})))

        asyncio.ensure_future(backend_asks())
        await asyncio.Event().wait()

    held = calls.hold("owner", start, on_expire=lambda h: expired.set())
    await held.next_step(5)
    calls.touch(held, lambda h: expired.set())
    await asyncio.wait_for(expired.wait(), 5)
    assert (await asyncio.wait_for(answered, 5)).body["error"]["code"] == -32603
    assert calls.take(held.state, "owner") is None and len(calls) == 0
