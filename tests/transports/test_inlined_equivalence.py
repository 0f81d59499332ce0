"""Each inlined copy on the hot path against the plain version it copies (issue 30 item 4).

A copy is fenced in the source (``# >> inlined copy of X`` … ``# << end of the copy of X``)
and the plain version stays beside it; here each copy meets its plain version on the same
input and must leave the same state and write the same bytes. Copies of uvicorn's own parser
callbacks are held to plain uvicorn by test_front_door_parity.py instead.
"""

from __future__ import annotations

import asyncio
import types

import orjson
import pytest
import uvicorn
from uvicorn.server import ServerState

from hopline.binding import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from hopline.jsonrpc import Message
from hopline.layers.resilience.window import Window
from hopline.transports import http_util as hu
from hopline.transports.app import HoplineApp
from hopline.transports.door_limits import DoorLimits
from hopline.transports.front_door import BUSY, FrontDoor
from hopline.transports.stdio import _Lines
from tests.transports.test_fastpath import BOUND, Exchanges, Recording, mcp_app

NOW = 1000.0  # the fixed clock of the fakes below


# -- http_util.guard, inlined in HoplineApp.__call__ ------------------------------------------------
GUARDED = {
    "a foreign origin": [(b"host", b"127.0.0.1"), (b"origin", b"http://evil.example")],
    "a foreign host": [(b"host", b"evil.example")],
    "a duplicated host": [(b"host", b"127.0.0.1"), (b"host", b"127.0.0.1")],
    "a duplicated session id": [(b"host", b"127.0.0.1"), (b"mcp-session-id", b"a"), (b"mcp-session-id", b"b")],
    "a passing request": [(b"host", b"127.0.0.1")],
}


@pytest.mark.parametrize("case", GUARDED)
async def test_the_apps_guard_is_http_util_guard(case):
    scope = {"type": "http", "method": "GET", "path": "/healthz", "headers": GUARDED[case]}
    inline: list = []
    plain: list = []

    async def keep(into, event):
        into.append(event)

    app = HoplineApp(None, security=hu.SecurityPolicy(), declaration=dict)  # type: ignore[arg-type]
    await app(scope, None, lambda e: keep(inline, e))
    passed = await hu.guard(scope, lambda e: keep(plain, e), hu.SecurityPolicy())
    if case == "a passing request":
        assert isinstance(passed, hu.Headers) and plain == [] and inline[0]["status"] == 200  # on to /healthz
    else:
        assert passed is None and inline == plain and plain[0]["status"] in (400, 403)


# -- StreamableHttpListener._modern and _deadline, inlined in its __call__ --------------------------
class FixedLoop:
    """The request's loop, as the fast path hands it over, with its clock stopped at NOW."""

    def time(self) -> float:
        return NOW


class Seen(Exchanges):
    """Exchanges that keep what reached the backend."""

    def __init__(self, answer) -> None:
        super().__init__(answer)
        self.messages: list[Message] = []

    async def open_exchange(self, era):
        end = await super().open_exchange(era)
        send = end.send

        async def keep(message):
            self.messages.append(message)
            await send(message)

        end.send = keep  # type: ignore[method-assign]
        return end


def modern_body(method: str, msg_id: int | None = 3) -> dict:
    meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
    body = {"jsonrpc": "2.0", "method": method, "params": {"name": "t", "arguments": {}, "_meta": meta}}
    if msg_id is not None:
        body["id"] = msg_id
    return body


def modern_scope(fast, body: bytes, method: str) -> dict:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"mcp-protocol-version", b"2026-07-28"),
            (b"mcp-method", method.encode()),
            (b"mcp-name", b"t"),
        ],
        "extensions": {hu.FASTPATH: fast},
    }


async def unread():
    raise AssertionError("the fast path has the body")


async def unsent(event):
    raise AssertionError("the fast path writes the whole answer")


@pytest.mark.parametrize("notification", [False, True], ids=["request", "notification"])
async def test_the_listeners_modern_post_is_its_modern(notification):
    body = modern_body("tools/call", None if notification else 3)
    raw = orjson.dumps(body)
    inline_backends, plain_backends = Seen({"content": []}), Seen({"content": []})
    inline, plain = Recording(body=raw), Recording()
    app = mcp_app(inline_backends)
    await asyncio.wait_for(app(modern_scope(inline, raw, "tools/call"), unread, unsent), BOUND)
    listener = mcp_app(plain_backends).mcp
    scope = modern_scope(plain, raw, "tools/call")
    await asyncio.wait_for(
        listener._modern(unread, unsent, hu.Headers(scope["headers"]), Message(body, raw), plain), BOUND
    )
    assert inline.written == plain.written and inline.written
    assert [m.body for m in inline_backends.messages] == [m.body for m in plain_backends.messages]


@pytest.mark.parametrize("method", ["tools/call", "initialize", "subscriptions/listen"])
async def test_the_deadline_made_on_arrival_is_deadline(method):
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": {}}
    raw = orjson.dumps(body)
    backends = Seen({})
    inline = Recording(body=raw)
    inline.loop = FixedLoop()
    app = mcp_app(backends, request_timeout=30.0)
    app.mcp.sessions.handshake_timeout = 7.0
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"accept", b"application/json")],
        "extensions": {hu.FASTPATH: inline},
    }
    await asyncio.wait_for(app(scope, unread, lambda e: asyncio.sleep(0)), BOUND)
    (arrived,) = backends.messages
    plain = Message(body, raw)
    fast = Recording()
    fast.loop = FixedLoop()
    app.mcp._deadline(plain, fast)
    assert arrived.deadline == plain.deadline == {"tools/call": NOW + 30, "initialize": NOW + 7}.get(method)


# -- FrontDoorProtocol._arm and _feed, inlined in its parser callbacks and data_received ------------
class Wire:
    """A connection's transport, recording what is written."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def writelines(self, parts) -> None:
        self.writes.append(b"".join(parts))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def write_eof(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Handle:
    def cancel(self) -> None:
        pass


class StoppedLoop:
    """The connection's loop with its clock stopped at NOW; timers are recorded, never run."""

    def __init__(self, real) -> None:
        self.real = real
        self.armed: list[float] = []

    def time(self) -> float:
        return NOW

    def call_at(self, at, callback, *args):
        self.armed.append(at)
        return Handle()

    def call_later(self, delay, callback, *args):
        return self.call_at(NOW + delay, callback, *args)

    def __getattr__(self, name):
        return getattr(self.real, name)


async def held(scope, receive, send):
    await asyncio.Event().wait()  # never answers: the tests look at the connection, not the app


def connection(limits: DoorLimits):
    config = uvicorn.Config(held, http=FrontDoor(limits).protocol(), lifespan="off", access_log=False, log_level="error")
    config.load()
    loop = StoppedLoop(asyncio.get_running_loop())
    proto = config.http_protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    proto.connection_made(Wire())
    return proto, loop


def state(proto, loop) -> tuple:
    return proto._deadline, proto._timer_at, proto._phase, list(loop.armed)


SHORT = DoorLimits(idle_timeout=60, header_timeout=5, body_timeout=9)  # each arm fires sooner: the timer moves
LONG = DoorLimits(idle_timeout=5, header_timeout=60, body_timeout=90)  # ... later: it stays


def cancel_tasks(*protos) -> None:
    for proto in protos:
        for task in list(proto.tasks):
            task.cancel()


@pytest.mark.parametrize("limits", [SHORT, LONG], ids=["sooner", "later"])
async def test_each_arm_in_the_parser_callbacks_is_arm(limits):
    # on_message_begin arms the header deadline
    inline, inline_loop = connection(limits)
    inline.on_message_begin()
    plain, plain_loop = connection(limits)
    plain._phase = inline._phase  # (the callback's own work beside its arm)
    plain._arm(limits.header_timeout)
    assert state(inline, inline_loop) == state(plain, plain_loop)
    # on_headers_complete arms the body deadline (a POST whose body has not come yet)
    inline, inline_loop = connection(limits)
    inline.data_received(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n")
    plain, plain_loop = connection(limits)
    plain.on_message_begin()
    plain._phase = inline._phase
    plain._arm(limits.body_timeout)
    assert state(inline, inline_loop) == state(plain, plain_loop)
    cancel_tasks(inline)
    # on_response_complete arms the idle deadline
    inline, inline_loop = connection(limits)
    plain, plain_loop = connection(limits)
    for proto in (inline, plain):
        proto.on_message_begin()
        proto._phase = BUSY
        proto.cycle = types.SimpleNamespace(response_complete=True, transport=None)
    inline.on_response_complete()
    plain._phase = inline._phase
    plain._arm(limits.idle_timeout)
    assert state(inline, inline_loop) == state(plain, plain_loop)


@pytest.mark.parametrize(
    "data",
    [b"GET / HTTP/1.1\r\nhost: x\r\n", b"NOT HTTP AT ALL\r\n\r\n", b"GET / HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n"],
    ids=["a partial head", "garbage", "a malformed header"],
)
async def test_the_feed_in_data_received_is_feed(data):
    inline, inline_loop = connection(SHORT)
    inline.data_received(data)
    plain, plain_loop = connection(SHORT)
    plain._feed(data)
    assert inline.transport.writes == plain.transport.writes and inline._phase == plain._phase
    assert inline.transport.closed == plain.transport.closed
    cancel_tasks(inline, plain)


# -- Window._roll, inlined in Window.add ----------------------------------------------------------
def test_the_roll_in_add_is_roll():
    now = [0.0]
    inline, plain = Window(10, lambda: now[0], 5), Window(10, lambda: now[0], 5)
    for step, (a, b) in zip([0, 1, 1.5, 4, 9.9, 10, 31, 31.2, 50], [(1, 0), (1, 1), (2, 0), (0, 3), (1, 1), (5, 0), (1, 2), (0, 1), (7, 7)]):
        now[0] = step
        inline.add(a, b)
        i = plain._roll()  # add's plain version: roll, then count in the current slice
        plain._a[i] += a
        plain._b[i] += b
        assert (inline._a, inline._b, inline._head) == (plain._a, plain._b, plain._head)
        assert inline.totals() == plain.totals()


# -- _Lines._wake, inlined in _Lines.feed_data ------------------------------------------------------
@pytest.mark.parametrize("waiter_state", ["waiting", "cancelled", "none"])
async def test_the_wake_in_feed_data_is_wake(waiter_state):
    loop = asyncio.get_running_loop()
    results = []
    for wake_by_hand in (False, True):
        lines = _Lines(1024, loop)
        waiter = None
        if waiter_state != "none":
            waiter = lines.waiter = loop.create_future()
            if waiter_state == "cancelled":
                waiter.cancel()
        if wake_by_hand:
            lines.lines.append(b"one")
            lines._size += 4
            lines._wake()
        else:
            lines.feed_data(b"one\n")
        results.append((list(lines.lines), lines.waiter, None if waiter is None else (waiter.done(), waiter.cancelled())))
    assert results[0] == results[1]


# -- StreamableHttpUpstream._handshake_headers and ParamMaps.get, inlined in its _exchange and _modern_headers --
class Opened(Exception):
    pass


class Recorder:
    """The lean client's place: records a POST's headers and goes no further."""

    def __init__(self) -> None:
        self.headers: list[dict] = []

    async def open(self, method, url, content, headers, timeout, with_body=False):
        self.headers.append(headers)
        raise Opened


@pytest.mark.parametrize("method", ["initialize", "tools/call"])
@pytest.mark.parametrize("in_session", [False, True], ids=["no session", "a session"])
async def test_the_handshake_headers_in_exchange_are_handshake_headers(method, in_session):
    from hopline.transports.streamable_http_client import StreamableHttpUpstream, _Flight

    up = StreamableHttpUpstream("http://127.0.0.1:9/mcp", headers={"x-a": "1"})
    up._client, up._lean = Recorder(), True  # type: ignore[assignment]
    if in_session:
        up._set_session("s-1", "2025-11-25")
    message = Message({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}})
    with pytest.raises(Opened):
        await up._exchange(_Flight(message, False))
    (sent,) = up._client.headers
    assert sent == up._handshake_headers(message.body) and sent is up._handshake_headers(message.body)


class Named(str):
    pass


@pytest.mark.parametrize("name", ["echo", "other", Named("echo"), 5, None, ["echo"]], ids=repr)
def test_the_param_maps_lookup_in_modern_headers_is_param_maps_get(name):
    from hopline.transports.streamable_http_client import StreamableHttpUpstream

    up = StreamableHttpUpstream("http://127.0.0.1:9/mcp")
    up.params.learn({"tools": [{"name": "echo", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}}}}]})  # fmt: skip
    meta = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {"region": "eu"}, "_meta": meta}}
    mirrored = "mcp-param-region" in {k.lower() for k in up._modern_headers(body)}
    assert mirrored == (up.params.get(name) is not None)


# -- ResponseWriter._next's first wait, inlined in _respond -----------------------------------------
@pytest.mark.parametrize("case", ["answered", "spent", "left"])
async def test_the_first_wait_in_respond_is_next(case):
    from hopline.layers.transport.inbox import Interrupted
    from hopline.transports.session_table import SessionTable
    from hopline.transports.streamable_http_server import ListenerOptions, StreamableHttpListener

    loop = asyncio.get_running_loop()
    outcomes = []
    for plain in (True, False):
        backends = Exchanges({"content": []} if case == "answered" else None)
        listener = StreamableHttpListener(backends, SessionTable(), ListenerOptions(stateless=True, request_timeout=3600))
        exchange = await backends.open_exchange(None)
        request = Message({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "t"}})
        request.deadline = loop.time() + (-1 if case == "spent" else 3600)
        await exchange.send(request)
        fast = Recording()
        if plain:
            if case == "left":
                loop.call_soon(exchange.interrupt, Interrupted())
            got = await asyncio.wait_for(
                listener._next(exchange, request, None, None, 0, request.deadline, 3600, False, unsent, False, loop), BOUND
            )
            outcomes.append(None if got is None else got.encode())
        else:
            served = asyncio.ensure_future(listener._respond(unread, unsent, exchange, request, None, fast))
            if case == "left":
                while fast.on_lost is None:
                    await asyncio.sleep(0)
                fast.on_lost()
            await asyncio.wait_for(served, BOUND)
            outcomes.append(fast.written[0][3] if fast.written else None)
        await exchange.aclose()
    assert outcomes[0] == outcomes[1] and (outcomes[0] is None) == (case == "left")


# -- h1response.Response._more, inlined in read_some (aiter_bytes waits through _more itself) -------
class Conn:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass


@pytest.mark.parametrize("case", ["pieces then the end", "read_until's time", "a read timeout", "an error"])
async def test_the_wait_in_read_some_is_more(case):
    import httpx

    from hopline.transports.h1response import Response

    async def read_some(response):
        got = []
        while data := await response.read_some():
            got.append(data)
        return b"".join(got)

    async def aiter(response):
        return b"".join([chunk async for chunk in response.aiter_bytes()])

    outcomes = []
    for read in (read_some, aiter):
        response = Response(Conn(), 0.05 if case == "a read timeout" else 60.0)
        if case == "read_until's time":
            response.read_for(0.05)
        response._body(b"first ")  # buffered before the read: no wait
        reading = asyncio.ensure_future(read(response))
        await asyncio.sleep(0)  # the reader now waits for more
        if case == "pieces then the end":
            response._body(b"second ")
            await asyncio.sleep(0)
            response._body(b"third")
            response._end()
        elif case == "an error":
            response._end(ConnectionResetError("peer reset"))
        try:
            outcomes.append(await asyncio.wait_for(reading, BOUND))
        except (httpx.ReadTimeout, ConnectionResetError) as exc:
            outcomes.append(type(exc))
    assert outcomes[0] == outcomes[1]
    expected = {"pieces then the end": b"first second third", "read_until's time": b"first ", "a read timeout": httpx.ReadTimeout,
                "an error": ConnectionResetError}  # fmt: skip
    assert outcomes[0] == expected[case]


# -- h1client's idle check (_Connection.usable() and not stale()), inlined in LeanClient._send_once ---
class Reused(Exception):
    pass


class Checkout(Exception):
    pass


class Idle:
    """An idle connection's transport: writing on it means it was reused."""

    def __init__(self, sock, closing: bool = False) -> None:
        self.sock, self.closing = sock, closing

    def get_extra_info(self, name, default=None):
        return self.sock if name == "socket" else default

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data) -> None:
        raise Reused

    writelines = write

    def close(self) -> None:
        self.closing = True


@pytest.mark.parametrize("case", ["healthy", "readable (closed by its server)", "closed", "closing", "no transport"])
async def test_the_idle_check_in_send_once_is_usable_and_not_stale(case):
    import socket

    from hopline.transports.h1client import LeanClient, _Connection

    url = "http://127.0.0.1:9/mcp"
    verdicts = []
    pairs = []
    for plain in (True, False):
        ours, theirs = socket.socketpair()
        pairs += [ours, theirs]
        if case == "readable (closed by its server)":
            theirs.send(b"x")
        conn = _Connection()
        conn.sock = ours
        conn.transport = None if case == "no transport" else Idle(ours, closing=case == "closing")
        conn.closed = case == "closed"
        conn.loop = asyncio.get_running_loop()  # (set by _checkout, as the pool's connections have it)
        if plain:
            verdicts.append(conn.usable() and not conn.stale())
            continue
        client = LeanClient()

        async def checkout(*args):
            raise Checkout

        client._checkout = checkout  # type: ignore[method-assign]
        client._idle[("http", "127.0.0.1", 9)] = [conn]
        try:
            await client._send_once("POST", url, b"{}", {"content-type": "application/json"}, 5.0, None)
        except Reused:
            verdicts.append(True)
        except Checkout:
            verdicts.append(False)
    for s in pairs:
        s.close()
    assert verdicts[0] == verdicts[1] and verdicts[0] == (case == "healthy")
