"""HTTP upstreams whose backend answers with invalid UTF-8 or malformed JSON (issue 13): that
request gets -31003 at once, never a hang (the SSE stream is left open) or an altered answer, and
the next request on the same channel works. The backend is a raw HTTP/1.1 server on loopback,
because the official SDK servers cannot be made to send broken bytes."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import orjson
import pytest

from hopline import jsonrpc
from hopline.binding import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from hopline.jsonrpc import Message
from hopline.transports.sse_client import SseUpstream
from hopline.transports.streamable_http_client import StreamableHttpUpstream

pytestmark = pytest.mark.timeout(30)

BROKEN = {  # tool name → the result bytes of its answer
    "utf8": b'{"content":[{"type":"text","text":"bad \xff\xfe bytes"}]}',
    "json": b'{"content":[{"type":"text","text":NaN}]}',
    "ok": b'{"content":[{"type":"text","text":"fine"}]}',
}
MALFORMED = "backend sent invalid UTF-8 / malformed JSON in its answer to this request"


def answer(msg_id, tool: str) -> bytes:
    if tool == "flood":
        tool = "ok"
    return b'{"jsonrpc":"2.0","id":' + orjson.dumps(msg_id) + b',"result":' + BROKEN[tool] + b"}"


def call(msg_id: int, tool: str) -> Message:
    meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: {"name": "t", "version": "1"}}
    return Message({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": tool, "arguments": {}, "_meta": meta}})


class RawBackend:
    """A loopback HTTP/1.1 server. POST /mcp answers with ``reply`` (``json``: a JSON body;
    ``sse``: one event on a chunked SSE stream that is then left open). GET /sse + POST
    /messages is a legacy HTTP+SSE server whose answers go out on the GET stream."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.legacy: asyncio.Queue[bytes] = asyncio.Queue()
        self.server: asyncio.Server | None = None
        self.held: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> RawBackend:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        for writer in self.held:
            writer.close()
        self.server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = int(head.split("content-length:")[1].split("\r\n")[0]) if "content-length:" in head else 0
                body = orjson.loads(await reader.readexactly(length)) if length else None
                if head.startswith("get /sse"):
                    return await self._legacy_stream(writer)
                if head.startswith("post /messages"):
                    if "id" in body:
                        await self.legacy.put(answer(body["id"], body["params"]["name"]))
                    writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    continue
                data = answer(body["id"], body["params"]["name"])
                if self.reply == "json":
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(data), data))
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                event = b"event: message\ndata: " + data + b"\n\n"
                if body["params"]["name"] == "flood":
                    event = b"event: message\ndata: not json\n\n" * 2000 + b"event: message\ndata: " + answer(body["id"], "ok") + b"\n\n"
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                if body["params"]["name"] in ("ok", "flood"):
                    writer.write(b"0\r\n\r\n")
                    continue
                self.held.append(writer)  # a broken answer, and the stream stays open
                return await asyncio.Event().wait()

    async def _legacy_stream(self, writer: asyncio.StreamWriter) -> None:
        self.held.append(writer)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for event in [b"event: endpoint\ndata: /messages\n\n"]:
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        while True:
            event = b"event: message\ndata: " + await self.legacy.get() + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))


async def recv(channel, timeout: float = 10.0) -> Message:
    async with asyncio.timeout(timeout):
        return await channel.receive()


@pytest.mark.parametrize("reply", ["json", "sse"])
@pytest.mark.parametrize("tool", ["utf8", "json"])
async def test_streamable_http_broken_answer_gets_minus_31003_and_the_channel_goes_on(reply, tool):
    async with RawBackend(reply) as backend:
        channel = StreamableHttpUpstream(backend.url + "/mcp", name="raw", read_timeout=300)
        try:
            await channel.send(call(1, tool))
            error = (await recv(channel)).body["error"]
            assert error["code"] == jsonrpc.PeerError.code == -31003
            assert error["message"] == f"raw: {MALFORMED}" and error["data"] == {"backend": "raw", "reason": "malformed_answer"}
            await channel.send(call(2, "ok"))
            fine = await recv(channel)
            assert fine.id == 2 and fine.body["result"]["content"][0]["text"] == "fine"
        finally:
            await channel.aclose()


@pytest.mark.parametrize("tool", ["utf8", "json"])
async def test_legacy_sse_broken_answer_gets_minus_31003_and_the_channel_goes_on(tool):
    async with RawBackend("sse") as backend:
        channel = await SseUpstream.connect(backend.url + "/sse", name="raw")
        try:
            await channel.send(call(1, tool))
            m = await recv(channel)
            assert m.id == 1 and m.body["error"]["code"] == -31003 and m.body["error"]["message"] == f"raw: {MALFORMED}"
            await channel.send(call(2, "ok"))
            assert (await recv(channel)).body["result"]["content"][0]["text"] == "fine"
        finally:
            await channel.aclose()


async def test_a_flood_of_sse_garbage_is_counted_with_bounded_log_output(caplog):
    async with RawBackend("sse") as backend:
        channel = StreamableHttpUpstream(backend.url + "/mcp", name="raw")
        try:
            with caplog.at_level(logging.WARNING, logger="hopline.http_upstream"):
                await channel.send(call(1, "flood"))
                assert (await recv(channel)).body["result"]["content"][0]["text"] == "fine"
            assert channel.garbage_frames == 2000
            assert 1 <= len([r for r in caplog.records if r.name == "hopline.http_upstream"]) <= 6
        finally:
            await channel.aclose()
