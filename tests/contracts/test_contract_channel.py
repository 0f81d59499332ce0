"""The Channel contract (layers/transport/channel.py), over every implementation a backend is
reached through.

A channel carries whole JSON-RPC messages both ways; whoever implements it:

- is a :class:`Channel` (the runtime-checkable Protocol: send, receive, aclose, is_closed);
- carries a handshake-era conversation: ``initialize`` is answered, then requests are
  answered under their own ids, several in flight at once and never cross-wired;
- ``aclose`` is idempotent and makes ``is_closed`` true; after it ``send`` and ``receive``
  raise :class:`ChannelClosed` (with a reason) at once, never hang.

Implementations, each against a real MCP server: the memory pair (the demo protocol on its
other end, in this process), stdio (``python -m hopline.demo`` as a child), Streamable HTTP
and legacy HTTP+SSE (tests/transports/servers/mcp_http_server.py: the official SDK).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from hopline import jsonrpc
from hopline.demo.dispatch import Dispatcher
from hopline.demo.protocol import DemoProtocol
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import Channel, ChannelClosed
from hopline.transports.memory import memory_pair
from hopline.transports.sse_client import SseUpstream
from hopline.transports.stdio import StdioChild
from hopline.transports.streamable_http_client import StreamableHttpUpstream

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transports" / "servers"))
from mcp_harness import McpServerProcess  # noqa: E402

pytestmark = pytest.mark.timeout(30)

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "contract", "version": "1"}}
IMPLEMENTATIONS = ["memory", "stdio", "streamable-http", "sse"]


def msg(body: dict[str, Any]) -> Message:
    return jsonrpc.parse(orjson.dumps({"jsonrpc": "2.0", **body}))


@pytest.fixture(scope="module")
def http_server():
    with McpServerProcess() as server:
        yield server


@pytest.fixture(scope="module")
def sse_server():
    with McpServerProcess("--sse") as server:
        yield server


class _Serve:
    """The demo protocol on the far end of a memory pair: what it sends goes out in order."""

    def __init__(self, end: Channel) -> None:
        self.end, self.out = end, asyncio.Queue()
        self.dispatcher = Dispatcher(DemoProtocol(), self, name="memory-demo")
        self.tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._write())]

    def send(self, body: dict[str, Any]) -> None:
        self.out.put_nowait(Message(body))

    async def drain(self) -> None:
        pass

    async def _read(self) -> None:
        while True:
            try:
                self.dispatcher.dispatch(await self.end.receive())
            except ChannelClosed:
                return

    async def _write(self) -> None:
        while True:
            try:
                await self.end.send(await self.out.get())
            except ChannelClosed:
                return

    async def aclose(self) -> None:
        self.dispatcher.cancel_all()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.end.aclose()


@pytest.fixture(params=IMPLEMENTATIONS)
async def channel(request):
    """A client's channel to a real MCP server, of the implementation under test."""
    served = None
    if request.param == "memory":
        ch, theirs = memory_pair("contract")
        served = _Serve(theirs)
    elif request.param == "stdio":
        ch = await StdioChild.spawn([sys.executable, "-m", "hopline.demo"], name="demo")
    elif request.param == "streamable-http":
        ch = StreamableHttpUpstream(request.getfixturevalue("http_server").url, timeout=10)
    else:
        ch = await SseUpstream.connect(request.getfixturevalue("sse_server").sse_url, timeout=10)
    try:
        yield ch
    finally:
        await ch.aclose()
        if served is not None:
            await served.aclose()


async def answer(ch: Channel, ids: set, timeout: float = 10.0) -> dict:
    """The responses for ``ids``, by id (notifications and other traffic skipped)."""
    got: dict = {}
    async with asyncio.timeout(timeout):
        while set(got) != ids:
            m = await ch.receive()
            if m.is_response():
                assert m.id in ids and m.id not in got, f"an answer to no request in flight: {m.body}"
                got[m.id] = m.body
    return got


async def initialize(ch: Channel) -> dict:
    await ch.send(msg({"id": 1, "method": "initialize", "params": INIT}))
    init = (await answer(ch, {1}))[1]
    await ch.send(msg({"method": "notifications/initialized"}))
    return init


async def test_it_is_a_channel(channel):
    assert isinstance(channel, Channel)
    assert not channel.is_closed()


async def test_a_conversation_is_carried_and_answers_keep_their_ids(channel):
    init = await initialize(channel)
    assert isinstance(init["result"]["protocolVersion"], str)
    for n in (2, 3, 4):  # several in flight at once
        await channel.send(msg({"id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": f"call {n}"}}}))
    await channel.send(msg({"id": "five", "method": "tools/list"}))
    got = await answer(channel, {2, 3, 4, "five"})
    assert {n: got[n]["result"]["content"][0]["text"] for n in (2, 3, 4)} == {2: "call 2", 3: "call 3", 4: "call 4"}
    assert "echo" in {t["name"] for t in got["five"]["result"]["tools"]}


async def test_after_aclose_it_is_closed_and_refuses_at_once(channel):
    await initialize(channel)
    await channel.aclose()
    await channel.aclose()  # idempotent
    assert channel.is_closed()
    with pytest.raises(ChannelClosed) as sent:
        await asyncio.wait_for(channel.send(msg({"id": 9, "method": "tools/list"})), 5)
    with pytest.raises(ChannelClosed) as received:
        await asyncio.wait_for(channel.receive(), 5)
    assert sent.value.reason and received.value.reason
