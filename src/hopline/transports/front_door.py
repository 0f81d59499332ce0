"""The HTTP front door: uvicorn's httptools protocol with deadlines, size caps and connection caps.

Every HTTP listener hopline runs (the MCP listener with legacy SSE, the admin listener, the
transparent listener) serves connections through :class:`FrontDoorProtocol`, which keeps these
bounds (:class:`DoorLimits`, all configuration):

- **open connections**, in total and per source address: over a cap a new connection gets a
  minimal ``503`` with ``Retry-After`` at once and is closed;
- **idle time**: a connection that has not begun a request (a new one that sends nothing, a
  keep-alive one between requests) is closed after ``idle_timeout``;
- **header time**: a request head (request line and headers) must be complete within
  ``header_timeout`` of its first byte, else ``408`` and close (slow-loris);
- **body time**: the body must be complete within ``body_timeout`` of the head, else ``408``
  and close; time during which hopline itself is not reading (the app has not taken what it
  was given: uvicorn paused the socket) does not count against the client;
- **TLS** (the listener's ``ssl`` context, transparent mode's ``tls: terminate``): the
  handshake is done here, after the connection is counted under the caps, and must end within
  ``header_timeout``; over a cap the connection is closed at once (no TLS to answer in);
- **head size**: more than ``max_header_bytes`` of head, more than ``max_headers`` header fields
  (``431``) or a request target over ``max_url_bytes`` (``414``). The head bytes are counted as
  they arrive and the parser is never fed past the limit, so an oversized header costs the
  limit's worth of parsing and no more (httptools grows a partial header by bytes
  concatenation, quadratic in its length: uvicorn's ``h11_max_incomplete_event_size`` does not
  apply to it). A request pipelined behind another in the same read may be parsed for up to
  one read (≤ 256 KiB) more before it is counted.

Only *reading the request* is deadlined: once a request is read, its response may last as
long as it likes (SSE streams, GET listen streams). A 408/414/431 is written only when no
other response is in progress on the connection, then the write side is shut and what the
client still sends is discarded for at most :data:`LINGER` seconds / :data:`LINGER_BYTES`
bytes (so the client can read the answer instead of a reset), then the socket is closed; the
connection keeps its place under the caps meanwhile. A connection over a cap holds no place,
so it gets its 503 and is closed at once.

Cost: one ``loop.call_later`` timer per connection, moved lazily (a later deadline just
updates a number; the timer re-arms itself when it fires early), plus a few integer updates
per read. Refusals are counted per reason in :class:`DoorCounters` (plain attributes, for
``/metrics``).

This subclasses uvicorn internals (``HttpToolsProtocol``: its parser callbacks, whose bodies
it does inline, ``cycle``, ``flow``, ``_start_asgi_task``, ``timeout_keep_alive_task``; the
``RequestResponseCycle`` it makes per request and whose ``receive``/``send`` work
:class:`OneWrite` does for whole bodies and whole responses), tested with uvicorn 0.54 and
httptools 0.9; pyproject.toml pins uvicorn to that range, and
tests/transports/test_front_door_parity.py holds the front door to plain uvicorn's answers,
byte for byte. uvicorn has no hook for
per-connection admission, head accounting or request-read deadlines (``limit_concurrency``
answers 503 only after the head is read, and ``timeout_keep_alive`` covers only the time
between requests), hence this module.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import urllib.parse
from typing import Any, Callable

import httptools
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import (
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from hopline.transports.door_limits import DoorCounters, DoorLimits
from hopline.transports.http_util import FASTPATH

__all__ = ["DoorCounters", "DoorLimits", "FrontDoor", "FrontDoorProtocol"]

log = logging.getLogger("hopline.http")


LINGER = 1.0  # seconds a refused connection drains the client's input, after its last bytes, before it is closed
LINGER_MAX = 5.0  # ... and at most this long in all
# Connections refused over a cap may linger (LINGER at most) so their client reads the 503
# instead of a reset; at most this many at once, beyond it they are closed at once.
MAX_REFUSING = 256
LINGER_BYTES = 4 * 1024 * 1024  # ... or this much of it, whichever comes first (a client sends its whole
# request before it reads: a 1.3 MB header closed on at 1 MiB reset the connection under its 431)
RETRY_AFTER = b"2"  # seconds, in the 503 over a connection cap

IDLE, HEAD, BODY, BUSY, CLOSING = range(5)


class FrontDoor:
    """State shared by every connection of one listener: its limits, counters, and open connections per source."""

    def __init__(
        self, limits: DoorLimits | None = None, counters: DoorCounters | None = None, tls: ssl.SSLContext | None = None
    ) -> None:
        self.limits = limits or DoorLimits()
        self.counters = counters or DoorCounters()
        self.tls = tls  # the listener's server context: each connection's handshake is done here, under the caps
        self.by_source: dict[str, int] = {}
        self.refusing = 0  # connections over a cap, answered 503, draining before their close

    def admit(self, source: str) -> str | None:
        """Count a new connection in, or say why not ("over_total", "over_source")."""
        c, lim = self.counters, self.limits
        if c.open >= lim.max_connections:
            c.over_total += 1
            return "over_total"
        n = self.by_source.get(source, 0)
        if n >= lim.max_connections_per_source:
            c.over_source += 1
            return "over_source"
        self.by_source[source] = n + 1
        c.open += 1
        c.accepted += 1
        return None

    def release(self, source: str) -> None:
        self.counters.open -= 1
        n = self.by_source.get(source, 1) - 1
        if n > 0:
            self.by_source[source] = n
        else:
            self.by_source.pop(source, None)

    def protocol(self) -> type[FrontDoorProtocol]:
        """The protocol class to give uvicorn (``Config(http=...)``) for this listener."""
        return type("FrontDoorProtocol", (FrontDoorProtocol,), {"door": self})


class _Refused(Exception):
    """Raised from a parser callback to stop parsing; the refusal is in ``_refusal``."""


def _ssl_protocol(loop: asyncio.AbstractEventLoop) -> Any:
    """The TLS protocol class of ``loop``: uvloop's own (what ``create_server(ssl=...)`` uses there), else asyncio's."""
    try:
        import uvloop
        import uvloop.loop

        if isinstance(loop, uvloop.Loop):
            return uvloop.loop.SSLProtocol
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass
    from asyncio.sslproto import SSLProtocol

    return SSLProtocol


def _answer(status: bytes, body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\nconnection: close\r\n"
        + extra
        + b"\r\n"
        + body
    )


BUSY_503 = _answer(b"503 Service Unavailable", b"too many connections\n", b"retry-after: " + RETRY_AFTER + b"\r\n")
TIMEOUT_408 = _answer(b"408 Request Timeout", b"request not received in time\n")
HEAD_431 = _answer(b"431 Request Header Fields Too Large", b"request header too large\n")
COUNT_431 = _answer(b"431 Request Header Fields Too Large", b"too many header fields\n")
URL_414 = _answer(b"414 URI Too Long", b"request target too long\n")


# What OneWrite.whole checks of a response's headers (uvicorn's send() refuses what these find).
_NAME_BAD = re.compile(r'[\x00-\x1f\x7f()<>@,;:\\\[\]={} \t"]')  # HEADER_RE's, for text
_VALUE_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # HEADER_VALUE_RE's, for text
_SPECIAL = ("connection", "content-length", "transfer-encoding")  # send() reads these: it writes them
# Header names and content types found fit to write as they are (a listener writes a handful,
# the same on every response), at most KEPT of each.
_NAMES_OK: set[str] = set()
_TYPE_LINES: dict[bytes, bytes] = {}  # a content type: its header line
KEPT = 64


def _name_ok(name: str) -> bool:
    """Whether whole() may write header ``name`` as it is (send() would write it unchanged)."""
    ok = not _NAME_BAD.search(name) and name.lower() == name and not any(s in name for s in _SPECIAL)
    if ok and len(_NAMES_OK) < KEPT:
        _NAMES_OK.add(name)
    return ok


def _type_line(content_type: bytes) -> bytes | None:
    """The header line of ``content_type``, None if send() would refuse it."""
    if HEADER_VALUE_RE.search(content_type):
        return None
    line = b"content-type: " + content_type + b"\r\n"
    if len(_TYPE_LINES) < KEPT:
        _TYPE_LINES[content_type] = line
    return line


class OneWrite:
    """The transport a request's cycle writes its response to: the head is held until the
    body's first write (or the end of this loop iteration, whichever comes first) and goes
    out with it in one ``writelines``, so a whole response is one ``send`` syscall instead
    of uvicorn's two (head, then body).

    Measured with bench/profile_call.py (a proxied ``tools/call``, JSON backend): write
    syscalls per request 3.0 -> 2.0 (the gateway's own: one upstream, one to the client).
    An SSE response's head still leaves in the same iteration it was written (``call_soon``),
    so a stream whose first event comes later is not held back. Everything else goes to
    the connection's transport as is; closing writes what is held first.

    It also tells its request's app when the client has gone (:meth:`watch`, what
    ``http_util.on_disconnect`` uses): a callback instead of a task parked in ``receive()``
    for ``http.disconnect`` (bench/profile_call.py --era 2026: one task fewer per request).

    It is the request's ``http_util.FastPath``, advertised to the app in
    ``scope["extensions"]["hopline.fastpath"]`` (:meth:`FrontDoorProtocol.on_headers_complete`):
    the app reaches :meth:`whole`, :meth:`body`, :meth:`watch` and ``loop`` through that
    declared door, never through uvicorn's objects. ``cycle`` (uvicorn's request cycle this
    transport writes for) is let go once the response is complete or the connection lost, so
    a finished request's objects are freed by reference counting, not the cycle collector."""

    __slots__ = ("_transport", "loop", "_held", "_first", "_on_lost", "lost", "cycle")

    def __init__(self, transport: Any, loop: Any) -> None:
        self._transport = transport
        self.cycle: Any = None  # uvicorn's RequestResponseCycle, set by the front door once made
        self.loop = loop  # the connection's: its requests run in it (the response writer's clock)
        self._held: bytes | None = None
        self._first = True
        self._on_lost: Callable[[], object] | None = None
        self.lost = False  # the client went away (or its request was given up) before the response was complete

    def watch(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` once when the client goes away before the response is complete
        (soon, if it has already); one watcher per request. Returns the way to stop watching."""
        if self.lost:
            self.loop.call_soon(callback)
        else:
            self._on_lost = callback
        return self._unwatch

    def _unwatch(self) -> None:
        self._on_lost = None

    def whole(self, status: int, content_type: bytes | None, headers: dict[str, str] | None, body: bytes) -> bool:
        """Write a whole response, head and body, for uvicorn's request ``cycle`` (whose
        transport this is) in one go, as its ``send`` does for ``http.response.start`` then
        one last ``http.response.body`` (``http_util.send_bytes`` uses it): ``content_type``
        first (if any), then ``headers`` (latin-1 text, as ``http_util.header_list`` encodes
        them), then content-length. False, with nothing done, where ``send`` must do it:
        a response begun, a client gone, a paused socket, HEAD, a ``connection`` (or
        content-length, transfer-encoding) header, server default headers or an access log,
        an odd status or a header it would refuse or lower-case.
        Measured with bench/profile_call.py: two ``send`` coroutines, their header checks, and
        the held head's flush callback (~30 Python calls) per response fewer; taking the
        headers as the caller's dict, with the names checked once per process (``_NAMES_OK``),
        ~15 more (header_list's tuples, the joins and checks of every name)."""
        cycle = self.cycle
        if (
            cycle is None
            or cycle.response_started
            or cycle.disconnected
            or cycle.flow.write_paused
            or cycle.default_headers
            or cycle.access_log
            or status not in STATUS_LINE
            or status in (204, 304)
            or cycle.scope["method"] == "HEAD"
        ):
            return False
        text = ""
        if content_type is None:
            typed = b""
        else:
            try:
                typed = _TYPE_LINES[content_type]
            except KeyError:
                typed = _type_line(content_type)
                if typed is None:
                    return False
        if headers:
            values = ""
            for name, value in headers.items():
                if name not in _NAMES_OK and not _name_ok(name):
                    return False
                text += name + ": " + value + "\r\n"
                values += value
            if _VALUE_BAD.search(values):
                return False  # send() refuses it
        head = STATUS_LINE[status] + typed + text.encode("latin-1") + b"content-length: %d\r\n" % len(body)
        if not cycle.keep_alive:
            head += b"connection: close\r\n"
        cycle.response_started = cycle.response_complete = True
        cycle.waiting_for_100_continue = False
        data = head + b"\r\n" + body
        held, self._held, self._first = self._held, None, False  # a 100 Continue still held goes first
        if held is not None:
            self._transport.writelines((held, data))
        else:
            self._transport.write(data)
        cycle.message_event.set()
        if not cycle.keep_alive:
            self._transport.close()
        cycle.on_response()  # (on_response_complete lets go of the cycle)
        return True

    def body(self) -> bytes | None:
        """The rest of the request body of uvicorn's request ``cycle`` (whose transport this is)
        if it has all arrived: what its ``receive()`` would return now as one ``http.request``
        event with ``more_body`` False, taken the same way. None where ``receive()`` must run:
        more to come, a 100 Continue to write, a paused socket, a client gone, a response done,
        or nothing new since the last ``receive()`` (it would wait).
        Measured with bench/profile_call.py (``http_util.read_body`` uses it): the receive()
        coroutine, its flow check and event wait (~5 Python calls) per request fewer."""
        cycle = self.cycle
        if (
            cycle is None
            or cycle.more_body
            or cycle.waiting_for_100_continue
            or cycle.flow.read_paused
            or cycle.disconnected
            or cycle.response_complete
        ):
            return None
        event = cycle.message_event
        if not cycle.body and not event.is_set():  # (body bytes arrived since the last receive() set it)
            return None
        event.clear()
        body = bytes(cycle.body)
        cycle.body = bytearray()
        return body

    def _lose(self) -> None:
        self.lost = True
        callback, self._on_lost = self._on_lost, None
        if callback is not None:
            try:
                callback()
            except Exception:  # a watcher's bug must not break the connection's teardown
                log.exception("a disconnect watcher failed")

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif self._first:  # the head (or a 100 Continue): wait for what follows in this iteration
            self._first = False
            self._held = data
            self.loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class FrontDoorProtocol(HttpToolsProtocol):
    """One connection (see the module docstring). ``door`` is set on the per-listener subclass."""

    door: FrontDoor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = self.door.limits
        self._phase = IDLE
        self._deadline: float | None = None
        self._timer: Any = None
        self._timer_at = 0.0
        self._head = 0  # head bytes fed since the last head was complete
        self._heads = 0  # heads completed on this connection
        self._url = self._fields = 0  # of the head being read
        self._refusal = b""
        self._drained = 0
        self._linger_end = 0.0  # a draining connection is closed by then at the latest
        self._source: str | None = None
        self._refusing = False  # refused over a cap and lingering (counted in door.refusing)
        self._handshake: Any = None  # with TLS: the handshake's task (False: refused before it)
        self._raw_root = self.root_path.encode("ascii")  # what uvicorn encodes per request

    # -- the connection -----------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        if self.door.tls is not None:
            if self._handshake is None:  # the TCP connection: admitted first, then its TLS handshake
                self._start_tls(transport)
                return
            super().connection_made(transport)  # the handshake is done: the TLS transport, admitted already
            self._arm(self._limits.idle_timeout)
            return
        super().connection_made(transport)
        source = self.client[0] if self.client else ""
        if self.door.admit(source) is not None:
            self._phase = CLOSING
            transport.write(BUSY_503)
            if self.door.refusing >= MAX_REFUSING:  # not counted in the caps, so never many lingering: close at once
                transport.close()
                return
            # Half-close and drain the request briefly, so the client reads the 503 (closing with
            # its request unread would reset the connection and lose the answer).
            self.door.refusing += 1
            self._refusing = True
            try:
                transport.write_eof()
            except (NotImplementedError, RuntimeError, OSError):
                transport.close()
                return
            self._linger_end = self.loop.time() + LINGER_MAX
            self._arm(LINGER)
            return
        self._source = source
        self._arm(self._limits.idle_timeout)

    def _start_tls(self, raw: Any) -> None:
        """A TLS connection counts under the caps from its TCP accept, like a plaintext one, and
        its handshake must finish within ``header_timeout`` (a client that sends nothing, or half
        a ClientHello, is closed then); over a cap it is closed at once (no TLS to answer in).
        The listener's own TLS (uvicorn's ``ssl``) ran the handshake before any of this, outside
        the caps, 60 s each. The TLS layer is put in place here, before the first byte is read
        (the loop starts reading after ``connection_made``); once its handshake is done it calls
        ``connection_made`` again, with the TLS transport."""
        peer = raw.get_extra_info("peername")
        source = peer[0] if isinstance(peer, tuple) else ""
        if self.door.admit(source) is not None:
            self._handshake = False
            raw.abort()
            return
        self._source = source
        loop = self.loop
        waiter = self._handshake = loop.create_future()
        waiter.add_done_callback(self._handshake_done)
        tls = _ssl_protocol(loop)(
            loop, self, self.door.tls, waiter, server_side=True, ssl_handshake_timeout=self._limits.header_timeout
        )
        raw.set_protocol(tls)
        tls.connection_made(raw)

    def _handshake_done(self, waiter: asyncio.Future) -> None:
        if self.transport is not None:
            return  # done: connection_made had the TLS transport
        exc = None if waiter.cancelled() else waiter.exception()
        if isinstance(exc, (TimeoutError, ConnectionAbortedError)):  # the deadline
            self.door.counters.header_timeout += 1
        self._release()  # no TLS: the connection is closed, its place given back

    def _release(self) -> None:
        if self._source is not None:
            self.door.release(self._source)
            self._source = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:  # a TLS connection refused over a cap (its handshake's end: _handshake_done)
            self._release()
            return
        super().connection_lost(exc)
        self._cycle_lost()
        self._deadline = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._source is not None:
            self.door.release(self._source)
            self._source = None
        if self._refusing:
            self._refusing = False
            self.door.refusing -= 1

    def data_received(self, data: bytes) -> None:
        if self._phase == CLOSING:
            self._drained += len(data)
            if self._drained > LINGER_BYTES:
                self.transport.close()
            elif self._linger_end:  # still sending (a big head, slowly under load): wait for its end
                self._arm(min(LINGER, self._linger_end - self.loop.time()))
            return
        # uvicorn's keep-alive timer is never armed here (on_response_complete): nothing to unset.
        if self._phase != BODY:  # head bytes (of this request or the next): fed up to the limit only
            room = self._limits.max_header_bytes - self._head
            size = len(data)
            if size > room:
                heads = self._heads
                self._head += room
                self._feed(data[:room])
                if self._phase == CLOSING:
                    return
                if self._heads == heads:  # the limit is reached and the head is still not complete
                    self.door.counters.header_too_large += 1
                    self._refuse(HEAD_431)
                    return
                self.data_received(data[room:])
                return
            self._head += size
        # >> inlined copy of _feed (one Python call per read fewer); test_inlined_equivalence.py
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass
        except httptools.HttpParserError:
            self._parse_error()
        # << end of the copy of _feed

    def _feed(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # hopline serves no upgrades (ws="none"): the request is served as plain HTTP
        except httptools.HttpParserError:
            self._parse_error()

    def _parse_error(self) -> None:
        if self._refusal:
            self._refuse(self._refusal)
        elif self._phase != CLOSING:
            self._phase = CLOSING
            self.send_400_response("Invalid HTTP request received.")

    # -- parser callbacks -------------------------------------------------------------
    # The parser callbacks do uvicorn's own work inline (its bodies as of 0.54) instead of
    # calling super(): one Python call per header field fewer, and per request the super()
    # calls of on_message_begin, on_headers_complete (and its _start_asgi_task) and
    # on_message_complete (bench/profile_call.py).
    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self.scope = {  # type: ignore[typeddict-item]
            "type": "http",
            "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "root_path": self.root_path,
            "headers": self.headers,
            "state": self.app_state.copy(),
        }
        self._url = self._fields = 0
        self._phase = HEAD
        # >> inlined copy of _arm (see _move's comment); test_inlined_equivalence.py
        self._deadline = at = self.loop.time() + self._limits.header_timeout
        if self._timer is None or self._timer_at > at:
            self._move(at)
        # << end of the copy of _arm

    def on_url(self, url: bytes) -> None:
        self._url += len(url)
        if self._url > self._limits.max_url_bytes:
            self.door.counters.url_too_long += 1
            self._refusal = URL_414
            raise _Refused
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        if self._fields > self._limits.max_headers:
            self.door.counters.too_many_headers += 1
            self._refusal = COUNT_431
            raise _Refused
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._heads += 1
        self._head = 0
        self._phase = BODY
        # >> inlined copy of _arm (see _move's comment); test_inlined_equivalence.py
        self._deadline = at = self.loop.time() + self._limits.body_timeout
        if self._timer is None or self._timer_at > at:
            self._move(at)
        # << end of the copy of _arm
        parser, scope = self.parser, self.scope
        http_version = parser.get_http_version()
        scope["method"] = parser.get_method().decode("ascii")
        if http_version != "1.1":
            scope["http_version"] = http_version
        if parser.should_upgrade() and self._should_upgrade():
            return
        parsed_url = httptools.parse_url(self.url)
        raw_path = parsed_url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        scope["path"] = self.root_path + path
        scope["raw_path"] = self._raw_root + raw_path
        scope["query_string"] = parsed_url.query or b""
        if self.limit_concurrency is not None and (
            len(self.connections) >= self.limit_concurrency or len(self.tasks) >= self.limit_concurrency
        ):
            app = service_unavailable
            self.logger.warning("Exceeded concurrency limit.")
        else:
            app = self.app
        existing_cycle = self.cycle
        out = OneWrite(self.transport, self.loop)
        extensions = scope.get("extensions")  # the request's own (interception.py: its original destination, SNI)
        if extensions is None:
            scope["extensions"] = {FASTPATH: out}  # the declared side door (http_util.FastPath)
        else:
            extensions[FASTPATH] = out
        self.cycle = out.cycle = cycle = RequestResponseCycle(
            scope=scope,
            transport=out,
            flow=self.flow,
            logger=self.logger,
            access_logger=self.access_logger,
            access_log=self.access_log,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(),
            expect_100_continue=self.expect_100_continue,
            keep_alive=http_version != "1.0" and parser.should_keep_alive(),
            on_response=self.on_response_complete,
        )
        if existing_cycle is None or existing_cycle.response_complete:  # start it now
            if self.config.reset_contextvars:
                self._start_asgi_task(cycle, app)
            else:
                task = self.loop.create_task(cycle.run_asgi(app))
                task.add_done_callback(self.tasks.discard)
                self.tasks.add(task)
        else:  # a pipelined request: queued up
            self.flow.pause_reading()
            self.pipeline.appendleft((cycle, app))

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if not ((self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete):
            cycle.more_body = False
            cycle.message_event.set()
        if cycle is not None and cycle.response_complete:  # answered before its body was read (a 413)
            self._phase = IDLE
            self._arm(self._limits.idle_timeout)
        else:
            self._phase = BUSY  # the response may take as long as it likes
            self._deadline = None

    def on_response_complete(self) -> None:
        # uvicorn's own (0.54), less its keep-alive timer, which ours replaces: it armed one per
        # response only to have it cancelled here (bench/profile_call.py: a timer per request).
        cycle = self.cycle  # (a pipelined request's, not yet answered, may be the current one already)
        if cycle.response_complete and cycle.transport.__class__ is OneWrite:
            cycle.transport.cycle = None  # the response is complete: its side door lets go of the cycle
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        if self.flow.read_paused:
            self.flow.resume_reading()
        if self.pipeline:  # a pipelined request is next
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self._phase == BUSY:
            self._phase = IDLE
            # >> inlined copy of _arm (see _move's comment); test_inlined_equivalence.py
            self._deadline = at = self.loop.time() + self._limits.idle_timeout
            if self._timer is None or self._timer_at > at:
                self._move(at)
            # << end of the copy of _arm

    def _cycle_lost(self) -> None:
        """The current request's client is gone (uvicorn marked its cycle disconnected): its watcher, \
if any, is told."""
        cycle = self.cycle
        if cycle is not None and cycle.disconnected:
            out = cycle.transport
            if isinstance(out, OneWrite):
                out.cycle = None
                if not out.lost:
                    out._lose()

    # -- deadlines ------------------------------------------------------------------
    def _arm(self, seconds: float) -> None:
        at = self.loop.time() + seconds
        self._deadline = at
        if self._timer is None or self._timer_at > at:
            self._move(at)

    # The parser callbacks arm inline, calling _move only when the timer must fire sooner
    # (bench/profile_call.py: three Python calls per request fewer).
    def _move(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = self.loop.call_at(at, self._expire), at

    def _expire(self) -> None:
        self._timer = None
        at = self._deadline
        if at is None or self.transport.is_closing():
            return
        now = self.loop.time()
        if now < at:
            self._timer, self._timer_at = self.loop.call_at(at, self._expire), at
            return
        phase, counters = self._phase, self.door.counters
        if phase == CLOSING:
            self.transport.close()
        elif phase == IDLE:
            counters.idle_reaped += 1
            self.transport.close()
        elif phase == HEAD:
            counters.header_timeout += 1
            self._refuse(TIMEOUT_408)
        elif phase == BODY:
            if self.flow.read_paused:  # hopline is not reading: not the client's delay
                self._arm(self._limits.body_timeout)
                return
            counters.body_timeout += 1
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                started = cycle.response_started
                cycle.disconnected = True  # the app's receive() sees http.disconnect, its send() is dropped
                cycle.message_event.set()
                self._cycle_lost()
                if started:
                    self.transport.close()
                    return
            self._refuse(TIMEOUT_408, force=True)

    def _refuse(self, answer: bytes, force: bool = False) -> None:
        """Answer (when no other response is in progress), shut the write side, drain a little, close."""
        self._phase = CLOSING
        self._refusal = b""
        transport = self.transport
        if transport.is_closing():
            return
        if not (force or self.cycle is None or self.cycle.response_complete):
            transport.close()  # another response is on the wire: no answer of ours can follow it
            return
        transport.write(answer)
        self.flow.resume_reading()
        try:
            transport.write_eof()
        except (NotImplementedError, RuntimeError, OSError):  # a TLS transport cannot half-close
            transport.close()
            return
        self._linger_end = self.loop.time() + LINGER_MAX
        self._arm(LINGER)
