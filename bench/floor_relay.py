"""The HTTP floor: the least a Python HTTP→HTTP MCP relay does per call (target ``floor``).

    python bench/floor_relay.py --backend http://127.0.0.1:8801/mcp --port 8802

Not a product, a yardstick for bench/run_gateway.py: what any relay written in Python on
uvloop, httptools and orjson pays per proxied call before it does anything of its own, so
that a gateway's CPU can be read against it and against a peer's in the same run. Per client
connection it holds one keep-alive connection to the backend; per request it parses the head
(httptools), reads the JSON-RPC message (orjson, the envelope looked at), forwards the body
with the client's MCP headers (session id, protocol version, the 2026-07-28 mirror headers),
reads the backend's answer (JSON, or the answer's event out of an SSE stream) and writes it
back as one JSON body, the backend's session id with it. A 202 comes back as a 202.

What it leaves out, on purpose: sessions of its own, every layer (routing, policy,
resilience, observability), bounds, timeouts, error answers beyond a 502, SSE streaming of
anything but the answer, GET streams, concurrency per connection. Measured with
bench/run_gateway.py --targets direct,floor,hopline,fastmcp.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from urllib.parse import urlsplit

import httptools
import orjson

HOP = {b"host", b"content-length", b"connection", b"keep-alive", b"transfer-encoding", b"accept-encoding"}
STATUS = {200: b"200 OK", 202: b"202 Accepted", 400: b"400 Bad Request", 404: b"404 Not Found", 502: b"502 Bad Gateway"}


class Upstream(asyncio.Protocol):
    """One keep-alive connection to the backend, one exchange at a time."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future | None = None
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def connection_lost(self, exc) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("backend closed the connection"))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self.parser.get_status_code(), self.headers, b"".join(self.body)))
        self.headers, self.body = {}, []


class Front(asyncio.Protocol):
    def __init__(self, host: str, port: int, path: bytes) -> None:
        self.host, self.port, self.path = host, port, path
        self.parser = httptools.HttpRequestParser(self)
        self.up: Upstream | None = None
        self.transport: asyncio.Transport | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        if self.up is not None and self.up.transport is not None:
            self.up.transport.close()

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.headers, self.body = [], []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        asyncio.get_running_loop().create_task(self.relay(method, self.headers, b"".join(self.body)))

    async def relay(self, method: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        if method == b"POST":
            message = orjson.loads(body)
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                return self.answer(400, b"", b"")
        if self.up is None or self.up.transport is None or self.up.transport.is_closing():
            _, self.up = await asyncio.get_running_loop().create_connection(Upstream, self.host, self.port)
        head = [method, b" ", self.path, b" HTTP/1.1\r\nhost: %s:%d\r\n" % (self.host.encode(), self.port)]
        for name, value in headers:
            if name.lower() not in HOP:
                head += (name, b": ", value, b"\r\n")
        head.append(b"content-length: %d\r\n\r\n" % len(body))
        up = self.up
        up.waiter = asyncio.get_running_loop().create_future()
        up.transport.write(b"".join(head) + body)
        try:
            status, got, data = await up.waiter
        except ConnectionError:
            return self.answer(502, b"", b"")
        if got.get(b"content-type", b"").startswith(b"text/event-stream"):
            answer = b""
            for line in data.split(b"\n"):  # the last data line that holds a message
                if line.startswith(b"data:") and line[5:].strip():
                    answer = line[5:].strip()
            orjson.loads(answer or b"null")
            data = answer
        self.answer(status, got.get(b"mcp-session-id", b""), data)

    def answer(self, status: int, session: bytes, data: bytes) -> None:
        line = STATUS.get(status, b"502 Bad Gateway")
        head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % (line, len(data))
        if session:
            head += b"mcp-session-id: " + session + b"\r\n"
        assert self.transport is not None
        self.transport.write(head + b"\r\n" + data)


async def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--backend", required=True, help="the backend's Streamable HTTP URL")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    args = p.parse_args(argv)
    url = urlsplit(args.backend)
    loop = asyncio.get_running_loop()
    path = (url.path or "/").encode()
    server = await loop.create_server(lambda: Front(url.hostname, url.port or 80, path), args.host, args.port)
    print(f"floor relay on http://{args.host}:{args.port}/mcp -> {args.backend}", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()
    return 0


if __name__ == "__main__":
    import uvloop

    sys.exit(uvloop.run(main()))
