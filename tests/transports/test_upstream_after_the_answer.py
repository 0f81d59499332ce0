"""What a Streamable HTTP upstream does with a POST's SSE stream once its answer has come on it
(streamable_http_client.py, ANSWERED_GRACE): the stream is read on briefly, so what the server
sends after the answer is still delivered and its end keeps the connection for the next request;
a server that does not end the stream in time cannot hold the channel (the connection is closed,
not reused), nor can one that keeps sending. The backend is a raw HTTP/1.1 server on loopback
that scripts what follows each answer."""

from __future__ import annotations

import asyncio
import contextlib

import orjson
import pytest

from hopline.binding import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from hopline.jsonrpc import Message
from hopline.transports import streamable_http_client
from hopline.transports.h1client import LeanClient
from hopline.transports.streamable_http_client import StreamableHttpUpstream

pytestmark = pytest.mark.timeout(30)
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(body: dict) -> bytes:
    return chunk(b"event: message\r\ndata: " + orjson.dumps(body) + b"\r\n\r\n")


def call(msg_id: int, then: str, era: str = "2026") -> Message:
    params: dict = {"name": "t", "arguments": {"then": then}}
    if era == "2026":
        meta = {
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {},
            META_CLIENT_INFO: {"name": "t", "version": "1"},
        }
        params["_meta"] = meta
    return Message({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params})


class Backend:
    """Answers each POST with one SSE event, then does what the call's ``then`` says:
    "end" (ends the stream a moment later), "note" (a notification, then the end), "late" (a
    notification after the grace, then the end), "open" (nothing more, ever), "trickle" (a ping
    comment every 20 ms, never an end), "now" (the end in the same write as the answer)."""

    def __init__(self) -> None:
        self.connections = 0
        self.closed_by_peer = 0  # connections the client closed (EOF seen) while we held them
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Backend:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        for writer in self.writers:
            writer.close()
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = int(head.split("content-length:")[1].split("\r\n")[0])
                body = orjson.loads(await reader.readexactly(length))
                if "id" not in body:
                    writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    continue
                then = body["params"]["arguments"]["then"]
                answer = event({"jsonrpc": "2.0", "id": body["id"], "result": {"content": []}})
                note = event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"after": body["id"]}})
                if then == "now":
                    writer.write(HEAD + answer + b"0\r\n\r\n")
                    continue
                writer.write(HEAD)
                await writer.drain()
                await asyncio.sleep(0.01)
                writer.write(answer)
                await writer.drain()
                if then in ("end", "note"):
                    await asyncio.sleep(0.05)
                    if then == "note":
                        writer.write(note)
                        await writer.drain()
                        await asyncio.sleep(0.02)
                    writer.write(b"0\r\n\r\n")
                elif then == "late":
                    await asyncio.sleep(0.6)  # the grace is 0.3 s here
                    writer.write(note + b"0\r\n\r\n")
                    await writer.drain()
                    await self._until_eof(reader)
                    return
                elif then == "trickle":
                    with contextlib.suppress(ConnectionError):
                        while not reader.at_eof():
                            writer.write(chunk(b": ping\n\n"))
                            await writer.drain()
                            await asyncio.sleep(0.02)
                            if reader._buffer or reader.at_eof():  # noqa: SLF001 - the client's next request, or its close
                                break
                    await self._until_eof(reader)
                    return
                else:  # "open"
                    await self._until_eof(reader)
                    return

    async def _until_eof(self, reader: asyncio.StreamReader) -> None:
        while await reader.read(1 << 16):
            pass
        self.closed_by_peer += 1


@pytest.fixture
def short_grace(monkeypatch):
    monkeypatch.setattr(streamable_http_client, "ANSWERED_GRACE", 0.3)


async def answers(ch: StreamableHttpUpstream, n: int, timeout: float = 5.0) -> list[Message]:
    got = []
    async with asyncio.timeout(timeout):
        while len(got) < n:
            got.append(await ch.receive())
    return got


@pytest.mark.parametrize("then", ["end", "now"])
@pytest.mark.parametrize("era", ["2026", "2025"])
async def test_a_stream_that_ends_after_its_answer_keeps_its_connection(then, era, short_grace):
    async with Backend() as backend:
        ch = StreamableHttpUpstream(backend.url, get_stream=False)
        try:
            for i in range(1, 4):
                await ch.send(call(i, then, era))
                (m,) = await answers(ch, 1)
                assert m.id == i and "result" in m.body
                await asyncio.sleep(0.1)  # the stream's end has come
            assert backend.connections == 1 and backend.closed_by_peer == 0
        finally:
            await ch.aclose()


async def test_what_follows_the_answer_on_its_stream_is_delivered_and_the_connection_kept(short_grace):
    async with Backend() as backend:
        ch = StreamableHttpUpstream(backend.url, get_stream=False)
        try:
            for i in (1, 2):
                await ch.send(call(i, "note"))
                answer, note = await answers(ch, 2)
                assert answer.id == i and note.method == "notifications/message" and note.params == {"after": i}
                await asyncio.sleep(0.1)
            assert backend.connections == 1
        finally:
            await ch.aclose()


@pytest.mark.parametrize("then", ["open", "trickle", "late"])
async def test_a_stream_not_ended_within_the_grace_is_cut_and_its_connection_not_reused(then, short_grace):
    async with Backend() as backend:
        ch = StreamableHttpUpstream(backend.url, get_stream=False)
        try:
            await ch.send(call(1, then))
            (m,) = await answers(ch, 1)
            assert m.id == 1
            async with asyncio.timeout(3):  # cut after the grace: the server sees the connection closed
                while backend.closed_by_peer < 1:
                    await asyncio.sleep(0.02)
            await ch.send(call(2, "end"))
            (m,) = await answers(ch, 1)
            assert m.id == 2 and backend.connections == 2
            if then == "late":  # what the server sent after the grace was not read
                with pytest.raises(TimeoutError):
                    await answers(ch, 1, timeout=0.6)
        finally:
            await ch.aclose()


@pytest.mark.parametrize("shared", [False, True], ids=["own-client", "shared-client"])
async def test_closing_the_channel_after_an_answer_closes_its_stream(shared):
    async with Backend() as backend:
        client = LeanClient() if shared else None  # a shared client stays open: the channel closes its stream itself
        ch = StreamableHttpUpstream(backend.url, get_stream=False, client=client)
        await ch.send(call(1, "open"))
        (m,) = await answers(ch, 1)
        assert m.id == 1
        await ch.aclose()
        async with asyncio.timeout(0.5):  # at once, not when the grace (ANSWERED_GRACE, 1 s) runs out
            while backend.closed_by_peer < 1:
                await asyncio.sleep(0.01)
        if client is not None:
            await client.aclose()
