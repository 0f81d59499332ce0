"""The lean HTTP/1.1 upstream client (transports/h1client.py) against raw loopback servers
that answer exactly what each test scripts: keep-alive reuse, chunked and streamed bodies,
stale idle connections, and every way a server can misbehave (garbage, a cut, silence).
Failures must be httpx's exception types, so the upstreams treat both clients alike."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

import httpx
import pytest

from hopline.transports.h1client import LeanClient, lean_or_httpx, usable_for
from tests.peers import bounded, eventually

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A loopback TCP server running ``handler`` per connection; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Server:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            self.writers.append(writer)
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in self.writers:
            writer.close()
        self.server.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        self.requests.append(head + body)
        return body


def keepalive(server_ref: list[Server], responses: int = 100, body: bytes = b'{"ok":true}') -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(responses):
            got = await server_ref[0].read_request(reader)
            payload = body or got
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\ncontent-length: %d\r\n\r\n%s" % (len(payload), payload))
            await writer.drain()

    return handler


async def test_keep_alive_reuses_one_connection_and_sends_the_body():
    ref: list[Server] = []
    async with Server(keepalive(ref, body=b"")) as server:
        ref.append(server)
        client = LeanClient()
        for i in range(5):
            resp = await client.post(server.url, content=b'{"n":%d}' % i, headers={"content-type": "application/json", "x-a": "b"})
            assert resp.status_code == 200 and resp.content == b'{"n":%d}' % i
            assert resp.headers.get("MCP-Session-Id") == "s1"
        assert server.connections == 1
        head = server.requests[0].split(b"\r\n\r\n")[0].lower()
        assert head.startswith(b"post /mcp http/1.1") and b"x-a: b" in head and b"content-length: 7" in head and b"host: 127.0.0.1:" in head
        await client.aclose()


async def test_each_request_head_is_its_headers_as_they_are_then_even_one_dict_changed_between_requests():
    ref: list[Server] = []
    async with Server(keepalive(ref)) as server:
        ref.append(server)
        client = LeanClient()
        headers = {"a": "1", "b": "2"}
        steps = []
        for change in (None, None, ("a", "9"), None, "reorder", ("c", "3"), "drop", None):
            if change == "reorder":
                headers = {"b": headers["b"], "a": headers["a"]}  # the same fields in another order
            elif change == "drop":
                del headers["c"]
            elif change is not None:
                headers[change[0]] = change[1]
            await client.post(server.url, content=b"{}", headers=headers)
            steps.append(list(headers.items()))
        await client.stream("GET", server.url, headers=headers).__aenter__()  # another method, the same headers
        steps.append(list(headers.items()))
        await client.aclose()
        for request, items in zip(server.requests, steps, strict=True):
            fields = [line.split(b": ", 1) for line in request.split(b"\r\n\r\n")[0].split(b"\r\n")[2:]]
            assert [(k.decode(), v.decode()) for k, v in fields if k not in (b"content-length",)] == items
        assert server.requests[-1].startswith(b"GET /mcp HTTP/1.1\r\n")


async def test_chunked_stream_is_delivered_as_it_arrives():
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"6\r\nfirst\n\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"7\r\nsecond\n\r\n0\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with Server(handler) as server:
        client = LeanClient()
        async with client.stream("GET", server.url, timeout=5) as resp:
            assert resp.headers.get("content-type") == "text/event-stream"
            chunks = resp.aiter_bytes()
            assert await chunks.__anext__() == b"first\n"  # before the server sent the rest
            release.set()
            assert b"".join([c async for c in chunks]) == b"second\n"
        await client.aclose()


async def test_with_body_hands_the_response_over_with_its_first_bytes_not_at_its_head():
    head_sent, release = asyncio.Event(), asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for body in (b"6\r\nfirst\n\r\n0\r\n\r\n", b"0\r\n\r\n"):  # an event, then an empty body
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream\r\ntransfer-encoding: chunked\r\n\r\n")
            await writer.drain()
            head_sent.set()
            await release.wait()
            release.clear()
            writer.write(body)
            await writer.drain()
        await reader.read()

    async with Server(handler) as server:
        client = LeanClient()
        for expected in (b"first\n", b""):
            head_sent.clear()
            entering = asyncio.ensure_future(client.stream("POST", server.url, content=b"{}", timeout=5, with_body=True).__aenter__())
            await head_sent.wait()
            # The client has parsed the head (its status is in), and still holds the response back.
            await eventually(lambda: any(c.response is not None and c.response.status_code == 200 for c in client._conns))
            (conn,) = client._conns
            assert conn.ready is not None and not conn.ready.done() and not entering.done()
            release.set()
            resp = await entering
            assert resp.status_code == 200 and resp.content_type == "text/event-stream"
            assert resp.headers.get("content-type") == "Text/Event-Stream"  # made from the head when first read
            assert await resp.aread() == expected
            client._release(conn, resp)
        assert server.connections == 1  # both read to their end: the connection was kept
        await client.aclose()


async def test_with_body_a_connection_lost_after_the_head_is_a_read_error_not_a_hang():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        writer.transport.abort()

    async with Server(handler) as server:
        client = LeanClient()
        with pytest.raises(httpx.ReadError):
            await bounded(client.stream("POST", server.url, content=b"{}", timeout=5, with_body=True).__aenter__(), 10)
        await client.aclose()


async def test_the_head_is_kept_as_received_and_read_lazily():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 201 Made It\r\nX-Twice: a\r\nx-twice: b\r\nCONTENT-TYPE: Application/JSON\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()
        await reader.read()

    async with Server(handler) as server:
        client = LeanClient()
        resp = await client.get(server.url, timeout=5)
        assert resp.raw_headers[0] == (b"X-Twice", b"a") and resp.reason_phrase == "Made It"
        assert resp.content_type == "application/json"  # an unusual spelling, through the headers
        assert resp.headers.get("X-TWICE") == "a, b" and resp.headers["content-length"] == "2"
        await client.aclose()


async def test_a_stream_left_early_closes_its_connection_and_the_next_request_opens_another():
    ref: list[Server] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await ref[0].read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await writer.drain()
        await reader.read()  # never ends the stream

    async with Server(handler) as server:
        ref.append(server)
        client = LeanClient()
        for _ in range(2):
            async with client.stream("GET", server.url, timeout=5) as resp:
                assert await resp.aiter_bytes().__anext__() == b"abc"
        assert server.connections == 2
        await client.aclose()


async def test_an_idle_connection_the_server_closed_is_not_reused():
    ref: list[Server] = []
    async with Server(keepalive(ref, responses=1)) as server:  # one response, then the server closes
        ref.append(server)
        client = LeanClient()
        assert (await client.post(server.url, content=b"{}")).status_code == 200
        # Give the server's close no chance to reach the loop before the next request.
        for writer in server.writers:
            writer.close()
        resp = await client.post(server.url, content=b"{}")
        assert resp.status_code == 200 and server.connections == 2
        await client.aclose()


@pytest.mark.parametrize(
    "reply, error",
    [
        (b"garbage that is not HTTP\r\n\r\n", httpx.RemoteProtocolError),
        (b"", httpx.RemoteProtocolError),  # closes without a response
        (b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort", httpx.ReadError),  # cut mid-body
    ],
    ids=["garbage", "no-response", "cut-body"],
)
async def test_a_misbehaving_server_raises_httpx_errors(reply, error):
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()

    async with Server(handler) as server:
        client = LeanClient()
        with pytest.raises(error):
            await asyncio.wait_for(client.post(server.url, content=b"{}", timeout=5), 10)
        await client.aclose()


async def test_silence_is_a_read_timeout_and_a_closed_port_a_connect_error():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with Server(handler) as server:
        client = LeanClient()
        with pytest.raises(httpx.ReadTimeout):
            await client.post(server.url, content=b"{}", timeout=httpx.Timeout(5, read=0.2))
        url = server.url
    with pytest.raises(httpx.ConnectError):
        await client.post(url, content=b"{}", timeout=2)
    await client.aclose()
    with pytest.raises(httpx.ConnectError):
        await client.post(url, content=b"{}")


async def test_a_large_body_arrives_whole_with_reading_paused_and_resumed():
    size = 5 * 1024 * 1024

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size)
        for _ in range(size // 65536):
            writer.write(b"x" * 65536)
            await writer.drain()

    async with Server(handler) as server:
        client = LeanClient()
        total = 0
        async with client.stream("GET", server.url, timeout=10) as resp:
            async for chunk in resp.aiter_bytes():
                total += len(chunk)
                await asyncio.sleep(0)  # a slow reader
        assert total == size
        await client.aclose()


async def test_auth_supplies_headers_per_request():
    ref: list[Server] = []

    class Token(httpx.Auth):
        def __init__(self) -> None:
            self.n = 0

        def auth_flow(self, request):
            self.n += 1
            request.headers["authorization"] = f"Bearer t{self.n}"
            yield request

    async with Server(keepalive(ref)) as server:
        ref.append(server)
        client = LeanClient(auth=Token())
        await client.post(server.url, content=b"{}")
        await client.post(server.url, content=b"{}")
        assert b"authorization: Bearer t1" in server.requests[0] and b"authorization: Bearer t2" in server.requests[1]
        await client.aclose()


def refusing_first(server_ref: list[Server], refused: int = 1) -> Handler:
    """Answers 401 (with a challenge and a body) to the first ``refused`` requests, then 200."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server_ref[0].read_request(reader)
            if len(server_ref[0].requests) <= refused:
                body = b'{"error":"invalid_token"}'
                writer.write(b'HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer error="invalid_token"\r\ncontent-length: %d\r\n\r\n%s' % (len(body), body))
            else:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}")
            await writer.drain()

    return handler


class Renewing(httpx.Auth):
    """Like propagation.CredentialAuth: a new token after a 401, once (or never, if not renewable)."""

    def __init__(self, renewable: bool = True) -> None:
        self.issued, self.renewable, self.seen = 0, renewable, []

    async def async_auth_flow(self, request):
        self.issued += 1
        request.headers["authorization"] = f"Bearer t{self.issued}"
        response = yield request
        self.seen.append((response.status_code, response.headers.get("www-authenticate")))
        if response.status_code == 401 and self.renewable:
            self.issued += 1
            request.headers["authorization"] = f"Bearer t{self.issued}"
            yield request


async def test_a_refused_credential_is_renewed_once_and_the_request_sent_again():
    ref: list[Server] = []
    async with Server(refusing_first(ref)) as server:
        ref.append(server)
        auth = Renewing()
        client = LeanClient(auth=auth)
        answer = await client.post(server.url, content=b'{"id":1}')
        assert answer.status_code == 200 and answer.content == b'{"ok":true}'
        assert auth.seen == [(401, 'Bearer error="invalid_token"')]  # the flow saw the challenge
        assert [r.split(b"authorization: ")[1].split(b"\r\n")[0] for r in server.requests] == [b"Bearer t1", b"Bearer t2"]
        assert all(r.endswith(b'{"id":1}') for r in server.requests)  # the same body, twice
        assert server.connections == 1  # the 401's connection was read to the end and reused
        await client.aclose()


async def test_a_flow_that_does_not_renew_hands_the_401_to_the_caller_whole():
    ref: list[Server] = []
    async with Server(refusing_first(ref, refused=5)) as server:
        ref.append(server)
        client = LeanClient(auth=Renewing(renewable=False))
        async with client.stream("POST", server.url, content=b"{}") as answer:
            assert answer.status_code == 401 and answer.headers.get("www-authenticate") == 'Bearer error="invalid_token"'
            assert b"".join([chunk async for chunk in answer.aiter_bytes()]) == b'{"error":"invalid_token"}'
        assert len(server.requests) == 1
        await client.aclose()


def test_credential_flows_use_the_lean_client_too():
    assert isinstance(lean_or_httpx("http://127.0.0.1:9/mcp", auth=Renewing()), LeanClient)


def test_environment_proxies_keep_httpx(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert usable_for("http://example.test/mcp") and isinstance(lean_or_httpx("http://example.test/mcp"), LeanClient)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    assert not usable_for("http://example.test/mcp") and isinstance(lean_or_httpx("http://example.test/mcp"), httpx.AsyncClient)
    monkeypatch.setenv("NO_PROXY", "example.test")
    assert usable_for("http://example.test/mcp")
