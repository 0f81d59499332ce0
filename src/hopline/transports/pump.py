"""Join a client's channel to a backend's: :func:`pump`, and :func:`serve_own_stdio` for
hopline's own stdin/stdout (``hopline relay --stdio URL``, ``hopline serve`` on stdio)."""

from __future__ import annotations

import asyncio
import contextlib

from hopline.jsonrpc import Message
from hopline.layers.transport.channel import Channel, ChannelClosed, Settles


async def pump(inbound: Channel, outbound: Channel, backend: Channel, *, drain: float = 10.0) -> str:
    """Join a client (its receiving and sending halves) to a backend until one side ends.

    When the client's input ends first, answers to requests it already sent still
    reach it (for up to ``drain`` seconds), so ``printf … | hopline relay --stdio URL``
    loses nothing. Both sides are closed on return; the result says why it ended.
    """
    outstanding: set = set()
    # Set once the requests outstanding when the client's input ended are answered: made only
    # then (not an Event set and cleared on every call: bench/profile_call.py --relay, three
    # Python calls per relayed call fewer with is_request/is_response inline).
    drained: asyncio.Future | None = None

    def delivered(message: Message) -> None:
        if "method" not in message.body:  # a response (inlined copy of Message.is_response's one expression)
            outstanding.discard(message.id)
            if not outstanding and drained is not None and not drained.done():
                drained.set_result(None)

    # What the backend sends may go to the client straight from the backend's own delivery
    # (an HTTP upstream's ``settle``, only while its queue is empty, so nothing is overtaken)
    # when the client's side takes it without waiting (``send_nowait``): no hop through the
    # down task and the queue. bench/profile_call.py --relay: one event-loop turn per call fewer.
    send_now = getattr(outbound, "send_nowait", None)
    if send_now is not None and isinstance(backend, Settles) and backend.settle is None:

        def settle(message: Message) -> bool:
            if not send_now(message):
                return False  # closed, or the client reads slowly: the down task waits for it
            delivered(message)
            return True

        backend.settle = settle

    async def up() -> str:
        try:
            while True:
                message = await inbound.receive()
                body = message.body
                if "method" in body and "id" in body:  # a request (inlined copy of Message.is_request's expression)
                    outstanding.add(message.id)
                await backend.send(message)
        except ChannelClosed as exc:
            return exc.reason

    async def down() -> str:
        try:
            while True:
                message = await backend.receive()
                delivered(message)
                await outbound.send(message)
        except ChannelClosed as exc:
            return exc.reason

    up_task, down_task = asyncio.create_task(up()), asyncio.create_task(down())
    done, _ = await asyncio.wait((up_task, down_task), return_when=asyncio.FIRST_COMPLETED)
    if up_task in done and not down_task.done() and outstanding:
        drained = asyncio.get_running_loop().create_future()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.wait((down_task, drained), return_when=asyncio.FIRST_COMPLETED), drain)
    for task in (up_task, down_task):
        task.cancel()
    reason = next(iter(done)).result()
    for ch in (inbound, outbound, backend):
        with contextlib.suppress(Exception):
            await ch.aclose()
    return reason


async def serve_own_stdio(backend: Channel, *, drain: float) -> str:
    """Join hopline's own stdin/stdout (a client that launched us) to ``backend``."""
    from hopline.transports.stdio import open_own_stdio_halves

    inbound, outbound, feeder = await open_own_stdio_halves()
    try:
        return await pump(inbound, outbound, backend, drain=drain)
    finally:
        if feeder is not None:
            feeder.cancel()
