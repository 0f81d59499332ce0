"""The front door (transports/front_door.py) answers exactly as plain uvicorn does.

The front door does uvicorn's own per-request work inline (scope building, the request
cycle, ``receive``) and writes whole responses itself (``OneWrite.whole``), to save Python
calls per request. These tests hold it to uvicorn's behaviour: the same raw requests (query
strings, percent-encoded paths, chunked bodies, ``Expect: 100-continue``, HTTP/1.0,
pipelining, HEAD, odd response headers) are sent to a plain uvicorn (its httptools protocol)
and to the front door, serving the same app in this loop, and what each app saw (scope and
``receive`` events) and what each client got (the raw bytes, until the server closes) must
be identical.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
import uvicorn

from hopline import runtime
from hopline.transports import http_util as hu

BOUND = 10.0  # seconds: every wait here is for an event, well within it


async def app(scope, receive, send):
    """Echoes what it saw as JSON; ``/hu*`` answer through http_util (the front door's whole-response path)."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/twice":  # the body read with receive(), then read_body again: it must wait, as receive() does
        while (await receive()).get("more_body"):
            pass
        try:
            again = await asyncio.wait_for(hu.read_body(receive, hu.Headers(scope["headers"]), 1024, hu.fastpath(scope)), 0.2)
        except asyncio.TimeoutError:
            again = b"(waited)"
        await hu.send_bytes(send, 200, again, b"text/plain", None, hu.fastpath(scope))
        return
    if path.startswith("/hu"):
        fast = hu.fastpath(scope)  # the front door's side door (None from plain uvicorn): the same code, both ways
        body = await hu.read_body(receive, hu.Headers(scope["headers"]), 1024, fast)
        if path == "/hu":
            await hu.send_json(send, 200, b'{"got":%d}' % len(body), {"mcp-session-id": "abc123"}, fast)
        elif path == "/hu-upper":
            await hu.send_json(send, 200, b"{}", {"X-Upper": "1"}, fast)
        elif path == "/hu-conn":
            await hu.send_json(send, 200, b"{}", {"connection": "close"}, fast)
        elif path == "/hu-tab":
            await hu.send_json(send, 201, b"{}", {"x-a": "one\ttwo", "retry-after": "2"}, fast)
        elif path == "/hu-bad":
            await hu.send_json(send, 200, b"{}", {"x-a": "line\r\nx-injected: 1"}, fast)
        elif path == "/hu-colon":
            await hu.send_json(send, 200, b"{}", {"x: y": "v"}, fast)
        elif path == "/hu-unicode":
            await hu.send_json(send, 200, b"{}", {"x-a": "\u20ac"}, fast)
        elif path == "/hu-length":
            await hu.send_json(send, 200, b"{}", {"content-length": "2", "x-b": "a: b"}, fast)
        elif path == "/hu-204":
            await hu.send_empty(send, 204, None, fast)
        elif path == "/hu-text":
            await hu.send_bytes(send, 404, b"Not Found", b"text/plain", None, fast)
        else:
            await hu.send_bytes(send, 200, b"plain", None, None, fast)
        return
    events = []
    while True:
        event = await receive()
        events.append({k: v.decode("latin-1") if isinstance(v, bytes) else v for k, v in event.items()})
        if event["type"] != "http.request" or not event.get("more_body"):
            break
    seen = {k: scope[k] for k in ("type", "asgi", "http_version", "method", "scheme", "path", "raw_path",
                                  "query_string", "root_path", "state")}  # fmt: skip
    seen["headers"] = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    body = orjson.dumps({"scope": {k: v.decode("latin-1") if isinstance(v, bytes) else v for k, v in seen.items()},
                         "events": events})  # fmt: skip
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def ports():
    """(plain uvicorn's port, the front door's port), both serving ``app`` in this loop."""
    plain = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            http="httptools",
            ws="none",
            loop="none",
            lifespan="off",
            access_log=False,
            log_level="warning",
            server_header=False,
            date_header=False,
        )  # fmt: skip
    )
    serving = asyncio.create_task(plain._serve())
    stop, ready = asyncio.Event(), asyncio.get_running_loop().create_future()
    door = asyncio.create_task(
        runtime.serve_admin(app, host="127.0.0.1", port=0, on_ready=lambda h, p: ready.set_result(p), stop=stop)
    )
    door_port = await asyncio.wait_for(ready, BOUND)
    while not plain.started:
        await asyncio.sleep(0.01)
    yield plain.servers[0].sockets[0].getsockname()[1], door_port
    plain.should_exit = True
    stop.set()
    await asyncio.wait_for(serving, BOUND)
    await asyncio.wait_for(door, BOUND)


async def exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` at once and read everything the server sends until it closes."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), BOUND)
    writer.write(raw)
    chunks = []
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), BOUND):
            chunks.append(chunk)
    except ConnectionError:
        pass
    writer.close()
    return b"".join(chunks)


H = b"host: 127.0.0.1\r\n"
CLOSE = b"connection: close\r\n"
REQUESTS = {
    "query": b"GET /echo?x=1&y=%20z HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "percent path": b"GET /echo/%7Euser/a%20b;p HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "mixed-case and repeated headers": b"GET /echo HTTP/1.1\r\n"
    + H
    + b"X-Foo: Bar \r\nx-foo: baz\r\nACCEPT: */*\r\n"
    + CLOSE
    + b"\r\n",
    "body": b"POST /echo HTTP/1.1\r\n" + H + b"content-length: 5\r\n" + CLOSE + b"\r\nhello",
    "chunked body": b"POST /echo HTTP/1.1\r\n"
    + H
    + b"transfer-encoding: chunked\r\n"
    + CLOSE
    + b"\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    "expect 100-continue": b"POST /echo HTTP/1.1\r\n"
    + H
    + b"Expect: 100-Continue\r\ncontent-length: 2\r\n"
    + CLOSE
    + b"\r\nok",
    "HTTP/1.0": b"GET /echo HTTP/1.0\r\n" + H + b"\r\n",
    "pipelined": b"GET /echo?a HTTP/1.1\r\n"
    + H
    + b"\r\n"
    + b"POST /echo HTTP/1.1\r\n"
    + H
    + b"content-length: 3\r\n\r\nxyz"
    + b"GET /echo?c HTTP/1.1\r\n"
    + H
    + CLOSE
    + b"\r\n",
    "whole response": b"POST /hu HTTP/1.1\r\n" + H + b"content-length: 4\r\n" + CLOSE + b"\r\nabcd",
    "whole responses pipelined": b"GET /hu HTTP/1.1\r\n"
    + H
    + b"\r\n"
    + b"POST /hu HTTP/1.1\r\n"
    + H
    + b"content-length: 1\r\n\r\nz"
    + b"GET /hu-text HTTP/1.1\r\n"
    + H
    + CLOSE
    + b"\r\n",
    "whole response, HTTP/1.0": b"GET /hu HTTP/1.0\r\n" + H + b"\r\n",
    "whole response to HEAD": b"HEAD /hu HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "whole response, expect 100-continue": b"POST /hu HTTP/1.1\r\n"
    + H
    + b"expect: 100-continue\r\ncontent-length: 2\r\n"
    + CLOSE
    + b"\r\nok",
    "upper-case response header": b"GET /hu-upper HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "connection response header": b"GET /hu-conn HTTP/1.1\r\n" + H + b"\r\n",
    "tab in a response header": b"GET /hu-tab HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "an invalid response header": b"GET /hu-bad HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "a colon in a response header's name": b"GET /hu-colon HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "a response header beyond latin-1": b"GET /hu-unicode HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "a content-length response header": b"GET /hu-length HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "204": b"GET /hu-204 HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "no content type": b"GET /hu-plain HTTP/1.1\r\n" + H + CLOSE + b"\r\n",
    "body over the app's limit": b"POST /hu HTTP/1.1\r\n"
    + H
    + b"content-length: 2000\r\n"
    + CLOSE
    + b"\r\n"
    + b"x" * 2000,
    "a chunked body over the app's limit": b"POST /hu HTTP/1.1\r\n"
    + H
    + b"transfer-encoding: chunked\r\n"
    + CLOSE
    + b"\r\n7d0\r\n"
    + b"x" * 2000
    + b"\r\n0\r\n\r\n",
    "a chunked body within it": b"POST /hu HTTP/1.1\r\n"
    + H
    + b"transfer-encoding: chunked\r\n"
    + CLOSE
    + b"\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    "a body read twice": b"POST /twice HTTP/1.1\r\n" + H + b"content-length: 3\r\n" + CLOSE + b"\r\nabc",
    "malformed": b"GET /echo HTTP/1.1\r\n" + H + b"bad header line\r\n\r\n",
}


UNANSWERED = {"an invalid response header", "a colon in a response header's name"}  # uvicorn closes at once


@pytest.mark.parametrize("name", list(REQUESTS))
async def test_the_front_door_answers_as_plain_uvicorn_does(ports, name):
    plain, door = ports
    raw = REQUESTS[name]
    expected = await exchange(plain, raw)
    assert expected or name in UNANSWERED  # the oracle answered (or just closed, as for an invalid header)
    assert await exchange(door, raw) == expected
