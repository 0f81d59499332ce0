"""The declared side door into the HTTP server (issue 30 item 4): ``http_util.FastPath``.

hopline's front door advertises, per request, ``scope["extensions"]["hopline.fastpath"]``
(its ``OneWrite``): the whole body at once, the whole response at once, a callback when the
client leaves, the request's loop. The listener uses it when present and plain ASGI events
when not. These tests hold both ends to it: the real front door (a server on port 0) offers
it and lets go of its request when the response is done; the real MCP listener, driven in
process with a FastPath in its scope, reads, answers and watches through it and nothing else.
"""

from __future__ import annotations

import asyncio

import orjson
import uvicorn

from hopline import runtime
from hopline.binding import Era
from hopline.jsonrpc import Message
from hopline.layers.session.client_end import ClientEnd
from hopline.transports import http_util as hu
from hopline.transports.app import HoplineApp
from hopline.transports.front_door import OneWrite
from hopline.transports.session_table import SessionTable
from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener

BOUND = 10.0  # seconds: every wait here is for an event, well within it


class Recording:
    """A FastPath over another (or over nothing: it writes into ``written``), recording each use."""

    def __init__(self, inner=None, body: bytes | None = None) -> None:
        self.inner = inner
        self.loop = inner.loop if inner is not None else asyncio.get_running_loop()
        self.calls: list[str] = []
        self.written: list[tuple[int, bytes | None, dict | None, bytes]] = []
        self._body = body
        self.on_lost = None

    def body(self) -> bytes | None:
        self.calls.append("body")
        if self.inner is not None:
            return self.inner.body()
        body, self._body = self._body, None
        return body

    def whole(self, status, content_type, headers, body) -> bool:
        self.calls.append("whole")
        if self.inner is not None:
            return self.inner.whole(status, content_type, headers, body)
        self.written.append((status, content_type, headers, body))
        return True

    def watch(self, callback):
        self.calls.append("watch")
        if self.inner is not None:
            return self.inner.watch(callback)
        self.on_lost = callback
        return lambda: setattr(self, "on_lost", None)


# -- the front door offers it ----------------------------------------------------------------
seen: list = []


async def echo(scope, receive, send):
    if scope["type"] != "http":
        return
    fast = hu.fastpath(scope)
    seen.append(fast)
    recording = Recording(fast) if fast is not None else None
    body = await hu.read_body(receive, hu.Headers(scope["headers"]), 1024, recording)
    await hu.send_json(send, 200, b'{"got":%d}' % len(body), None, recording)
    seen.append(recording)


async def serve(door: bool):
    """A server of ``echo`` in this loop: hopline's front door (as the admin listener runs it) or plain uvicorn."""
    stop, ready = asyncio.Event(), asyncio.get_running_loop().create_future()
    if door:
        task = asyncio.create_task(
            runtime.serve_admin(echo, host="127.0.0.1", port=0, on_ready=lambda h, p: ready.set_result(p), stop=stop)
        )
        port = await asyncio.wait_for(ready, BOUND)
    else:
        plain = uvicorn.Server(
            uvicorn.Config(echo, host="127.0.0.1", port=0, http="httptools", ws="none", loop="none", lifespan="off",
                           access_log=False, log_level="warning", server_header=False, date_header=False)
        )  # fmt: skip
        task = asyncio.create_task(plain._serve())
        while not plain.started:
            await asyncio.sleep(0.01)
        port = plain.servers[0].sockets[0].getsockname()[1]
        stop = plain  # type: ignore[assignment]
    return port, stop, task


async def post_hello(door: bool) -> bytes:
    seen.clear()
    port, stop, task = await serve(door)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello")
        raw = await asyncio.wait_for(reader.read(), BOUND)
        writer.close()
    finally:
        if door:
            stop.set()
        else:
            stop.should_exit = True
        await asyncio.wait_for(task, BOUND)
    return raw


async def test_the_front_door_advertises_its_fast_path_and_the_helpers_go_through_it():
    raw = await post_hello(door=True)
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and raw.endswith(b'{"got":5}')
    fast, recording = seen
    assert isinstance(fast, OneWrite) and fast.loop is asyncio.get_running_loop()
    assert recording.calls == ["body", "whole"]  # the body and the answer went through the declared door
    assert fast.cycle is None  # the response is complete: the door let go of uvicorn's request cycle


async def test_plain_uvicorn_offers_no_fast_path_and_the_helpers_use_asgi_events():
    raw = await post_hello(door=False)
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n") and raw.endswith(b'{"got":5}')
    assert seen == [None, None]


# -- the listener uses it, in process ----------------------------------------------------------
class Exchanges:
    """Backends whose every exchange is a ClientEnd answering with ``answer`` (None: never)."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.ends: list[ClientEnd] = []

    async def open_session(self, era: Era):  # pragma: no cover - a stateless listener asks for none
        raise AssertionError("no sessions here")

    async def open_exchange(self, era: Era):
        async def handler(message: Message, end: ClientEnd) -> Message | None:
            if self.answer is None:
                await asyncio.Event().wait()
            return Message({"jsonrpc": "2.0", "id": message.id, "result": self.answer})

        end = ClientEnd(handler, name="exchange")
        self.ends.append(end)
        return end

    async def aclose(self) -> None:
        pass


def mcp_app(backends, **options) -> HoplineApp:
    listener = StreamableHttpListener(backends, SessionTable(), ListenerOptions(stateless=True, **options))
    return HoplineApp(listener, security=hu.SecurityPolicy(), declaration=dict)


def post_scope(fast, body: bytes) -> dict:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ],
        "extensions": {hu.FASTPATH: fast},
    }


CALL = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t", "arguments": {}}})


async def test_the_listener_reads_answers_and_watches_through_the_fast_path_in_its_scope():
    app = mcp_app(Exchanges({"content": []}))
    fast = Recording(body=CALL)
    events: list = []

    async def receive():  # the plain ASGI path must not be taken
        raise AssertionError("receive() called although the fast path had the body")

    async def send(event):
        events.append(event)

    await asyncio.wait_for(app(post_scope(fast, CALL), receive, send), BOUND)
    assert events == []  # nothing through send(): the whole answer went through the door
    assert fast.calls == ["body", "watch", "whole"]
    ((status, ctype, headers, body),) = fast.written
    assert (status, ctype, headers) == (200, b"application/json", None)
    assert orjson.loads(body) == {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}


async def test_a_client_leaving_is_told_through_the_fast_path_and_cancels_the_exchange():
    backends = Exchanges(None)  # never answers
    app = mcp_app(backends)
    fast = Recording(body=CALL)

    async def receive():
        raise AssertionError("receive() called although the fast path watches the client")

    async def send(event):
        raise AssertionError("nothing is written to a client that left")

    served = asyncio.ensure_future(app(post_scope(fast, CALL), receive, send))
    while fast.on_lost is None:
        await asyncio.sleep(0)
    fast.on_lost()  # the front door's callback: the client has gone
    await asyncio.wait_for(served, BOUND)
    assert fast.written == [] and backends.ends[0].is_closed()  # the exchange was cancelled (closed)
