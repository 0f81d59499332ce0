"""The HTTP front door (transports/front_door.py) against slow, idle and oversized clients.

A real uvicorn server in this loop (``runtime.serve_admin``: the same front door as every
hopline listener, without signal handlers) with small deadlines, reached over raw loopback
sockets. Every wait is for an event (an answer, an EOF) with a generous bound: no timing
is asserted beyond "closed before the bound".
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from hopline import runtime
from hopline.transports.front_door import DoorCounters, DoorLimits

BOUND = 10.0  # seconds: every deadline in these tests is far below it
FAST = DoorLimits(idle_timeout=0.3, header_timeout=0.3, body_timeout=0.3, max_header_bytes=8 * 1024, max_headers=20, max_url_bytes=1024,
                  max_connections=50, max_connections_per_source=50)
TICK = 0.05  # seconds between the events of the test SSE stream


async def app(scope, receive, send):
    """``GET /sse``: an event every TICK until the client leaves; ``POST``: the body's length; else ``ok``."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/sse":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        n = 0
        while True:
            n += 1
            await send({"type": "http.response.body", "body": b"data: %d\n\n" % n, "more_body": True})
            with contextlib.suppress(asyncio.TimeoutError):
                if (await asyncio.wait_for(receive(), TICK))["type"] == "http.disconnect":
                    return
    size = 0
    while True:
        event = await receive()
        size += len(event.get("body", b""))
        if not event.get("more_body"):
            break
    body = b"ok" if scope["method"] == "GET" else str(size).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def server():
    """``await server(limits)`` → (port, counters); the server stops at teardown."""
    stops: list[tuple[asyncio.Event, asyncio.Task]] = []

    async def start(limits: DoorLimits = FAST):
        counters, stop, ready = DoorCounters(), asyncio.Event(), asyncio.get_running_loop().create_future()
        task = asyncio.create_task(runtime.serve_admin(app, host="127.0.0.1", port=0, on_ready=lambda h, p: ready.set_result(p), stop=stop,
                                                       limits=limits, counters=counters))
        stops.append((stop, task))
        return await asyncio.wait_for(ready, BOUND), counters

    yield start
    for stop, task in stops:
        stop.set()
        await asyncio.wait_for(task, BOUND)


async def connect(port: int, source: str = "127.0.0.1"):
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), BOUND)


async def until_eof(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes (a reset counts as closed)."""
    chunks = []
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), BOUND):
            chunks.append(chunk)
    return b"".join(chunks)


async def get(reader, writer, path: str = "/") -> bytes:
    """One keep-alive GET on an open connection: the status line and body."""
    writer.write(b"GET %s HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n" % path.encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head.split(b"\r\n")[0] + b" " + await asyncio.wait_for(reader.readexactly(length), BOUND)


async def test_a_trickling_header_is_cut_at_the_header_deadline(server):
    port, counters = await server()
    reader, writer = await connect(port)

    async def trickle():
        with contextlib.suppress(ConnectionError):
            writer.write(b"GET / HTTP/1.1\r\n")
            while True:  # one header byte per tick: never a complete head
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(TICK)

    pacing = asyncio.create_task(trickle())
    try:
        answer = await until_eof(reader)
    finally:
        pacing.cancel()
    assert answer.startswith(b"HTTP/1.1 408 ") and counters.header_timeout == 1


async def test_a_stalled_body_is_cut_at_the_body_deadline(server):
    port, counters = await server()
    reader, writer = await connect(port)
    writer.write(b"POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 1000\r\n\r\n" + b"y" * 10)
    assert (await until_eof(reader)).startswith(b"HTTP/1.1 408 ") and counters.body_timeout == 1


async def test_a_socket_that_sends_nothing_is_reaped(server):
    port, counters = await server()
    reader, _ = await connect(port)
    assert await until_eof(reader) == b"" and counters.idle_reaped == 1


async def test_an_idle_keep_alive_connection_is_reaped_after_its_request(server):
    port, counters = await server()
    reader, writer = await connect(port)
    assert await get(reader, writer) == b"HTTP/1.1 200 OK ok"
    assert await until_eof(reader) == b"" and counters.idle_reaped == 1


async def test_a_complete_body_in_time_is_served(server):
    port, _ = await server()
    reader, writer = await connect(port)
    writer.write(b"POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 5000\r\n\r\n" + b"y" * 5000)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)
    assert head.startswith(b"HTTP/1.1 200 ") and await asyncio.wait_for(reader.readexactly(4), BOUND) == b"5000"


async def test_a_1_mib_header_gets_431_while_another_client_is_served(server):
    port, counters = await server()
    reader, writer = await connect(port)

    async def flood():
        with contextlib.suppress(ConnectionError):
            writer.write(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * (1024 * 1024) + b"\r\n\r\n")
            await writer.drain()

    sending = asyncio.create_task(flood())
    try:
        answer = await until_eof(reader)
        other = await get(*await connect(port))
    finally:
        sending.cancel()
    assert answer.startswith(b"HTTP/1.1 431 ") and answer.endswith(b"request header too large\n")
    assert other == b"HTTP/1.1 200 OK ok" and counters.header_too_large == 1


async def test_a_thousand_headers_get_431(server):
    port, counters = await server()
    reader, writer = await connect(port)
    writer.write(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n" + b"".join(b"x-%d: 1\r\n" % i for i in range(1000)) + b"\r\n")
    answer = await until_eof(reader)
    assert answer.startswith(b"HTTP/1.1 431 ") and b"too many header fields" in answer and counters.too_many_headers == 1


async def test_a_long_request_target_gets_414(server):
    port, counters = await server()
    reader, writer = await connect(port)
    writer.write(b"GET /" + b"a" * 4000 + b" HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    assert (await until_eof(reader)).startswith(b"HTTP/1.1 414 ") and counters.url_too_long == 1


async def test_over_the_total_cap_a_new_connection_is_refused_at_once_and_the_others_keep_working(server):
    port, counters = await server(DoorLimits(max_connections=3, max_connections_per_source=10))
    open_ = [await connect(port) for _ in range(3)]
    for conn in open_:
        assert await get(*conn) == b"HTTP/1.1 200 OK ok"
    reader, _ = await connect(port)
    answer = await until_eof(reader)
    assert answer.startswith(b"HTTP/1.1 503 ") and b"\r\nretry-after: 2\r\n" in answer and counters.over_total == 1
    for conn in open_:
        assert await get(*conn) == b"HTTP/1.1 200 OK ok"


async def test_over_the_per_source_cap_only_that_source_is_refused(server):
    port, counters = await server(DoorLimits(max_connections=10, max_connections_per_source=2))
    mine = [await connect(port) for _ in range(2)]
    for conn in mine:
        assert await get(*conn) == b"HTTP/1.1 200 OK ok"
    reader, _ = await connect(port)
    assert (await until_eof(reader)).startswith(b"HTTP/1.1 503 ") and counters.over_source == 1
    assert await get(*await connect(port, source="127.0.0.2")) == b"HTTP/1.1 200 OK ok"
    for conn in mine:
        assert await get(*conn) == b"HTTP/1.1 200 OK ok"
    # A slot freed is a slot for the same source again. The server closes (Connection: close), so its
    # connection_lost has run (same loop, called soon after its close) before this client reads the EOF.
    mine[0][1].write(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
    assert (await until_eof(mine[0][0])).startswith(b"HTTP/1.1 200 ")
    assert await get(*await connect(port)) == b"HTTP/1.1 200 OK ok"


async def test_a_burst_from_one_source_is_answered_not_reset_past_the_per_source_cap(server):
    """A burst of real HTTP clients from one address, past the per-source cap: the refused ones
    must read their 503. Closing a refused connection at once resets the ones whose request
    is already on its way, and the client sees a broken connection instead of an answer."""
    import httpx

    port, counters = await server(DoorLimits(max_connections=1000, max_connections_per_source=8, idle_timeout=5))

    async def one(http: httpx.AsyncClient) -> str:
        try:
            return str((await http.post(f"http://127.0.0.1:{port}/", content=b"x" * 65536)).status_code)
        except httpx.TransportError as exc:
            return type(exc).__name__

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=BOUND, limits=limits) as http:
        outcomes = await asyncio.wait_for(asyncio.gather(*(one(http) for _ in range(200))), BOUND * 3)
    assert set(outcomes) <= {"200", "503"}, sorted(set(outcomes))
    assert "503" in outcomes and counters.over_source > 0


async def test_an_sse_stream_outlives_every_deadline(server):
    port, counters = await server()
    reader, writer = await connect(port)
    writer.write(b"GET /sse HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)).startswith(b"HTTP/1.1 200 ")
    idle, _ = await connect(port)
    assert await until_eof(idle) == b"" and counters.idle_reaped == 1  # the deadlines are running meanwhile
    # Events keep coming for several times every deadline (0.3 s): 40 events at one per 0.05 s.
    events = 0
    while events < 40:
        chunk = await asyncio.wait_for(reader.readuntil(b"\n\n"), BOUND)
        events += chunk.count(b"data: ")
    assert counters.header_timeout == counters.body_timeout == 0 and counters.idle_reaped == 1
    writer.close()


# -- the configuration reaches every listener of `hopline serve` -----------------------------------
def write_config(tmp_path, config: dict) -> str:
    import yaml

    path = tmp_path / "door.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


async def silent_socket_is_reaped(url: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    reader, _ = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port), BOUND)
    return await until_eof(reader) == b""


async def test_listen_limits_reach_the_gateway_and_admin_listeners(tmp_path, hopline_serve):
    limits = {"idle_timeout": 0.3, "max_headers": 5}
    gw = hopline_serve(write_config(tmp_path, {"listen": {"limits": limits}, "backends": {"demo": {"command": "python", "args": ["-m", "hopline.demo"]}}}),
                       "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    assert await silent_socket_is_reaped(gw.url) and await silent_socket_is_reaped(admin)
    reader, writer = await connect(int(gw.base.rsplit(":", 1)[1]))
    writer.write(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n" + b"".join(b"x-%d: 1\r\n" % i for i in range(10)) + b"\r\n")
    assert (await until_eof(reader)).startswith(b"HTTP/1.1 431 ")


async def test_listen_limits_reach_the_transparent_listener(tmp_path, hopline_serve):
    config = {"mode": "transparent", "listen": {"limits": {"idle_timeout": 0.3}}, "transparent": {"destinations": {"example.test": "http://127.0.0.1:9"}}}
    proc = hopline_serve(write_config(tmp_path, config))
    assert await silent_socket_is_reaped(proc.url)


async def test_pipelined_requests_whose_heads_together_exceed_the_limit_are_each_served(server):
    port, counters = await server()  # max_header_bytes 8 KiB; each head below is about 5 KiB
    reader, writer = await connect(port)
    one = b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nx-pad: " + b"p" * 5000 + b"\r\n\r\n"
    writer.write(one * 3)
    for _ in range(3):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)
        assert head.startswith(b"HTTP/1.1 200 ") and await asyncio.wait_for(reader.readexactly(2), BOUND) == b"ok"
    assert counters.header_too_large == 0


def test_max_connections_is_lowered_to_what_the_open_file_limit_allows():
    import subprocess
    import sys

    code = ("import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))\n"
            "from hopline.runtime import _fit_fd_limit; from hopline.transports.door_limits import DoorLimits\n"
            "print(_fit_fd_limit(DoorLimits()).max_connections, _fit_fd_limit(DoorLimits(max_connections=500)).max_connections)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=BOUND)
    assert done.stdout.split() == ["768", "500"] and "does not fit the open-file limit 1024" in done.stderr


# -- one write per response -------------------------------------------------------------------------
class Recorded:
    """A transport that records what is written to it."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def writelines(self, parts) -> None:
        self.writes.append(b"".join(parts))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


async def test_a_response_head_leaves_with_its_body_in_one_write():
    from hopline.transports.front_door import OneWrite

    wire = Recorded()
    out = OneWrite(wire, asyncio.get_running_loop())
    out.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    out.write(b"ok")
    assert wire.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]
    out.write(b"more")  # later writes pass straight on
    assert wire.writes[-1] == b"more"


async def test_a_stream_head_leaves_in_the_same_loop_iteration_without_waiting_for_an_event():
    from hopline.transports.front_door import OneWrite

    wire = Recorded()
    out = OneWrite(wire, asyncio.get_running_loop())
    out.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
    await asyncio.sleep(0)  # the head's flush was scheduled before this task's wake-up
    assert wire.writes == [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"]
    out.write(b"data: 1\n\n")
    assert wire.writes[-1] == b"data: 1\n\n"


async def test_closing_writes_a_held_head_first():
    from hopline.transports.front_door import OneWrite

    wire = Recorded()
    out = OneWrite(wire, asyncio.get_running_loop())
    out.write(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
    out.close()
    assert wire.writes == [b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n"] and wire.closed
    await asyncio.sleep(0)
    assert len(wire.writes) == 1  # the scheduled flush finds nothing left
