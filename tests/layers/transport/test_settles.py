"""``Settles`` (layers/transport/channel.py), a channel's optional capability, over every
implementation: the HTTP upstreams' ``Inbound`` and the gateway's ``ClientEnd``.

The contract: ``settle`` starts None; once its reader sets it, an answer delivered while
nothing waits in the channel's queue is offered to it, and is queued as usual only if it
returns False (what it refuses is queued); an answer behind a queued message is never
offered (nothing is overtaken).
Readers find the capability by ``isinstance(channel, Settles)``; a channel without it is
left alone."""

from __future__ import annotations

import asyncio

import pytest

from hopline.jsonrpc import Message
from hopline.layers.session.client_end import ClientEnd
from hopline.layers.transport.channel import Settles
from hopline.layers.transport.rpc import RpcPeer
from hopline.transports.inbound import Inbound
from hopline.transports.memory import memory_pair

BOUND = 10.0


def answer(msg_id: int) -> Message:
    return Message({"jsonrpc": "2.0", "id": msg_id, "result": {}})


class InboundSide:
    """An ``Inbound``: what a backend sends is ``put`` into it."""

    def __init__(self) -> None:
        self.channel = Inbound(16)
        self.channel.name = "upstream"

    async def deliver_note(self) -> None:
        await self.channel.put(Message({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}))

    async def deliver_answer(self, msg_id: int) -> None:
        await self.channel.put(answer(msg_id))

    async def next_queued(self) -> Message:
        return await asyncio.wait_for(self.channel.receive(), BOUND)


class ClientEndSide:
    """A ``ClientEnd``: a request's answer comes from its handler; a notification the gateway sends is queued first."""

    def __init__(self) -> None:
        async def handler(message: Message, end: ClientEnd) -> Message:
            return answer(message.id)

        self.channel = ClientEnd(handler)

    async def deliver_note(self) -> None:
        self.channel.notify(Message({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}))

    async def deliver_answer(self, msg_id: int) -> None:
        await self.channel.send(Message({"jsonrpc": "2.0", "id": msg_id, "method": "ping"}))
        for _ in range(5):  # its handler's task runs and answers
            await asyncio.sleep(0)

    async def next_queued(self) -> Message:
        return await asyncio.wait_for(self.channel.receive(BOUND), BOUND)


SIDES = [InboundSide, ClientEndSide]


@pytest.mark.parametrize("side", SIDES, ids=lambda s: s.__name__)
async def test_a_settles_channel_starts_without_a_reader_and_declares_the_capability(side):
    s = side()
    assert isinstance(s.channel, Settles) and s.channel.settle is None


@pytest.mark.parametrize("side", SIDES, ids=lambda s: s.__name__)
async def test_an_answer_taken_by_settle_skips_the_queue_and_one_refused_is_queued(side):
    s = side()
    offered: list = []
    s.channel.settle = lambda m: offered.append(m.id) or m.id == 1
    await s.deliver_answer(1)  # taken
    await s.deliver_answer(2)  # refused: queued
    assert offered == [1, 2]
    assert (await s.next_queued()).id == 2


@pytest.mark.parametrize("side", SIDES, ids=lambda s: s.__name__)
async def test_an_answer_behind_a_queued_message_is_not_offered(side):
    s = side()
    offered: list = []
    s.channel.settle = lambda m: offered.append(m.id) or m.method is None  # takes answers only
    await s.deliver_note()  # (queued: offered and refused, or never offered)
    await s.deliver_answer(3)
    assert 3 not in offered
    assert (await s.next_queued()).method is not None and (await s.next_queued()).id == 3


async def test_a_peer_installs_its_settle_on_a_settles_channel_and_leaves_any_other_alone():
    upstream = Inbound(16)
    upstream.name = "upstream"
    peer = RpcPeer(upstream, name="up")
    plain, _ = memory_pair()
    other = RpcPeer(plain, name="plain")
    try:
        assert upstream.settle is not None
        assert "settle" not in vars(plain)
    finally:
        upstream._finish("done")
        await plain.aclose()
        await asyncio.wait_for(asyncio.gather(peer._reader, other._reader, return_exceptions=True), BOUND)
