"""The per-exchange context (issue 14): made once as a request arrives, passed down
explicitly, carrying who, which session, which era, and the exchange's one deadline.
Driven in-process against real stdio backends (hopline's demo server)."""

from __future__ import annotations

import asyncio

import yaml

from hopline.config.load import parse_config
from hopline.context import Context
from hopline.jsonrpc import Message
from hopline.binding import Era
from hopline.modes import forward
from hopline.pipeline import Call, Next, Pipeline
from tests.conftest import PY
from tests.modes.test_gateway_pipeline import ALICE, connect


class Seen:
    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def __call__(self, call: Call, next: Next) -> Message:
        self.calls.append(call)
        return await next(call)


def gateway_with(request_timeout: float, backend_timeout: float):
    backends = {"demo": {"command": PY, "args": ["-m", "hopline.demo"], "timeout": backend_timeout}}
    return forward.build(parse_config(yaml.safe_dump({"backends": backends, "listen": {"request_timeout": request_timeout}})))


async def test_a_call_carries_its_exchange_context_and_one_deadline():
    gateway = gateway_with(request_timeout=30, backend_timeout=600)
    seen = Seen()
    gateway.pipeline = Pipeline(calls=[seen])
    try:
        client = await connect(gateway, ALICE)
        loop = asyncio.get_running_loop()
        before = loop.time()
        answer = await client.rpc("tools/call", {"name": "demo__add", "arguments": {"a": 1, "b": 2}})
        after = loop.time()
        assert "result" in answer
        (call,) = seen.calls
        ctx = call.context
        assert isinstance(ctx, Context)
        assert ctx.principal is ALICE and call.principal is ALICE
        assert ctx.era is Era.HANDSHAKE and ctx.session is not None and ctx.session == call.session
        assert before + 30 <= ctx.deadline <= after + 30  # listen.request_timeout from arrival
        assert call.timeout is not None and call.timeout <= 30  # the exchange's deadline, not the backend's 600 s
    finally:
        await gateway.aclose()


async def test_a_backend_timeout_shorter_than_the_exchange_bounds_the_call():
    gateway = gateway_with(request_timeout=300, backend_timeout=7)
    seen = Seen()
    gateway.pipeline = Pipeline(calls=[seen])
    try:
        client = await connect(gateway, ALICE)
        assert "result" in await client.rpc("tools/call", {"name": "demo__add", "arguments": {"a": 1, "b": 2}})
        (call,) = seen.calls
        assert call.timeout == 7 and call.context.remaining(asyncio.get_running_loop().time()) > 7
    finally:
        await gateway.aclose()


async def test_a_tool_modes_inner_calls_share_the_exchange_they_run_in():
    gateway = gateway_with(request_timeout=30, backend_timeout=600)
    seen = Seen()
    gateway.pipeline = Pipeline(calls=[seen])
    try:
        await connect(gateway, ALICE)
        (session,) = gateway.sessions
        outer = session.context(Message({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}))
        host = session.tool_host(context=outer)
        await host.call_tool("demo__add", {"a": 2, "b": 2})
        await host.call_tool("demo__add", {"a": 3, "b": 3})
        assert [c.context for c in seen.calls] == [outer, outer] and all(c.context is outer for c in seen.calls)
    finally:
        await gateway.aclose()
