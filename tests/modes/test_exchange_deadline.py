"""One deadline per exchange (issue 30 item 5): made once where the request arrives (the
listener puts it on the message, ``Message.deadline``), and read by the gateway's context,
hence by the pipeline's timeouts (``Call.timeout`` from ``Context.remaining``) and the RPC
peer. Driven in-process against a real stdio backend (hopline's demo server)."""

from __future__ import annotations

import asyncio

import orjson

from hopline.jsonrpc import BackendTimeout, Message
from hopline.transports.session_table import SessionTable
from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener
from tests.modes.test_gateway_context import gateway_with
from tests.modes.test_gateway_pipeline import ALICE, connect
from tests.transports.test_fastpath import Exchanges, Recording

BOUND = 10.0  # seconds: an answer due at once comes well within it; a second full timeout (an hour) never would


def call(msg_id: int, deadline: float | None) -> Message:
    message = Message(
        {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "tools/call",
            "params": {"name": "demo__countdown", "arguments": {"steps": 100, "delay_ms": 2000}},  # 200 s
        }
    )
    message.principal = ALICE
    message.deadline = deadline
    return message


async def test_the_context_takes_the_deadline_the_listener_made():
    gateway = gateway_with(request_timeout=3600, backend_timeout=3600)
    try:
        await connect(gateway, ALICE)
        (session,) = gateway.sessions
        at = asyncio.get_running_loop().time() + 5
        assert session.context(call(1, at)).deadline == at  # not a second deadline from the setting
        assert session.context(call(2, None)).deadline > at + 3000  # no listener deadline: the setting's, from now
    finally:
        await gateway.aclose()


async def test_a_request_whose_deadline_is_spent_on_arrival_is_answered_at_once_with_the_timeout_error():
    gateway = gateway_with(request_timeout=3600, backend_timeout=3600)
    try:
        client = await connect(gateway, ALICE)
        await client.end.send(call(7, asyncio.get_running_loop().time() - 1))
        while True:
            answer = await asyncio.wait_for(client.end.receive(timeout=BOUND), BOUND)
            if answer.id == 7:
                break
        assert answer.body["error"]["code"] == BackendTimeout.code
    finally:
        await gateway.aclose()


async def test_the_writer_answers_a_request_whose_deadline_is_spent_at_once_with_the_timeout_error():

    backends = Exchanges(None)  # never answers
    listener = StreamableHttpListener(backends, SessionTable(), ListenerOptions(stateless=True, request_timeout=3600))
    exchange = await backends.open_exchange(None)
    request = call(9, asyncio.get_running_loop().time() - 1)
    await exchange.send(request)
    fast = Recording()

    async def receive():
        raise AssertionError("the fast path watches the client")

    async def send(event):
        raise AssertionError("the whole answer goes through the fast path")

    await asyncio.wait_for(listener._respond(receive, send, exchange, request, None, fast), BOUND)
    ((status, _, _, body),) = fast.written
    error = orjson.loads(body)["error"]
    assert status == 200 and error["code"] == BackendTimeout.code and "3600 s" in error["message"]
    await exchange.aclose()
