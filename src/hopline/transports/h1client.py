"""A lean HTTP/1.1 client for the upstream hot path: keep-alive connections over
asyncio protocols, responses parsed by httptools (the parser uvicorn uses).

Why not httpx here: a proxied ``tools/call`` costs the gateway ~0.6 CPU-ms, and most
of it was httpx/httpcore bookkeeping per request (request/response models, header
normalisation, pool scans), measured in ``bench/run_gateway.py``. This client does
what the MCP upstreams need and nothing else: POST/GET/DELETE with bytes bodies,
JSON or SSE responses read whole or as a stream, keep-alive reuse, TLS.

Its own cost per exchange is measured with ``bench/profile_call.py --sse --by-module`` (a proxied
``tools/call`` to the SDK echo server, which answers with one SSE event): this module and
h1response.py, with the calls they make, 35 Python calls per request (73 at 84e8efb, before
``open``/``end``, the head memo, the loops kept on the connection and the callbacks' trims).

Contract (the subset of ``httpx.AsyncClient`` that ``StreamableHttpUpstream`` and
``SseUpstream`` use, so either client can be given to them):
- ``stream(method, url, content=, headers=, timeout=)`` is an async context manager
  giving a :class:`Response` whose body is read with ``aread()`` or ``aiter_bytes()``;
  ``post``/``delete`` read the whole body. ``open(...)`` and ``end(response)`` are the same
  exchange without the context manager, for the upstream's hot path (not in httpx).
  ``timeout`` is an ``httpx.Timeout`` (its ``connect`` and ``read`` are honoured) or seconds.
- Failures raise httpx's exception types (``ConnectError``, ``ConnectTimeout``,
  ``ReadTimeout``, ``ReadError``, ``RemoteProtocolError``), so callers handle both
  clients alike.
- A connection goes back to the pool only after its response was read to the end and
  the server allows keep-alive; a stream left early closes its connection.
- ``auth``: an optional ``httpx.Auth``. Its flow's first request supplies the headers;
  if the server answers 401 and the flow yields a second request (a renewed credential),
  that request is sent once more and its answer is the response. Longer flows (digest
  auth and the like) are not supported.
- Environment proxies are not honoured: :func:`usable_for` says whether a URL would
  need one, and the caller then keeps httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import ssl
import urllib.request
from typing import Any, Coroutine
from urllib.parse import urlsplit

import httptools
import httpx

from hopline.transports.h1response import Response, expire
from hopline.layers.transport.loop import running_loop

MAX_IDLE = 32  # idle keep-alive connections kept per origin


def usable_for(url: str) -> bool:
    """True unless the environment routes ``url`` through a proxy (httpx would honour it)."""
    host = urlsplit(url).hostname or ""
    proxies = urllib.request.getproxies()
    scheme = urlsplit(url).scheme
    if not (proxies.get(scheme) or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(host))


def lean_or_httpx(url: str, *, auth: httpx.Auth | None = None, timeout: Any = 30.0) -> Any:
    """The client an upstream should use for ``url``: lean, unless the environment routes
    it through a proxy."""
    if usable_for(url):
        return LeanClient(auth=auth, timeout=timeout)
    # No connection cap: every handshake-era backend session holds one for its GET stream.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    return httpx.AsyncClient(follow_redirects=False, auth=auth, timeout=timeout, limits=limits)


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one response at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.closed = False
        self.ready: asyncio.Future[Response] | None = None
        self.origin: tuple[str, str, int] = ("", "", 0)
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop that made it (set by _checkout)
        # Its origin's idle list in its client (set by _checkout; the client's _idle holds the same
        # list until aclose empties it, and then nothing goes back to a pool).
        self.pool: list[_Connection] = []
        self.sock: Any = None  # its socket, for the stale() probe (set by _checkout)
        self.conns: set[_Connection] | None = None  # its client's open connections (set by _checkout)
        self.raw_headers: list[tuple[bytes, bytes]] = []  # the response's, as on_header receives them
        self._paused = False
        # True: ``ready`` waits past the head for the body's first bytes (or its end), so
        # that a response whose head and body arrive apart wakes its reader once, not twice.
        self.with_body = False

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.response is None:  # bytes nobody asked for: the connection is unusable
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))
            self.close()

    def eof_received(self) -> bool:
        if self.response is not None and not self.response._done:
            with contextlib.suppress(httptools.HttpParserError):
                self.parser.feed_data(b"")  # a body delimited by the end of the connection
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.conns is not None:
            self.conns.discard(self)
        self._fail(
            httpx.ReadError(f"connection closed by the server{f': {exc}' if exc else ''}")
            if self.response is None or self.response.status_code
            else httpx.RemoteProtocolError("server disconnected without sending a response")
        )

    # -- httptools callbacks -------------------------------------------------------------------
    # The head is kept as received (raw_headers); the Headers dict and the reason phrase are
    # made from it only if someone reads them (h1response.py): an upstream's hot path reads the
    # status and the content type only (bench/profile_call.py: ~20 Python calls per response fewer).
    def on_status(self, status: bytes) -> None:
        assert self.response is not None
        self.response._reason = status

    def on_header(self, name: bytes, value: bytes) -> None:
        # ``+=`` a one-pair tuple, not ``.append``: one Python call per header instead of two
        # (bench/profile_call.py --by-function: an SSE answer has eight headers).
        self.raw_headers += ((name, value),)

    # ``ready`` is let go as its result is set: the body's later callbacks find None, not a done
    # future to ask; and set without asking ``done()`` first (a Python call each): it is done
    # already only if its wait timed out or was cancelled (InvalidStateError, then nothing to do).
    def on_headers_complete(self) -> None:
        assert self.response is not None
        self.response.status_code = self.parser.get_status_code()
        ready = self.ready
        if not self.with_body and ready is not None:
            self.ready = None
            try:
                ready.set_result(self.response)
            except asyncio.InvalidStateError:
                pass

    def on_body(self, body: bytes) -> None:
        response = self.response
        assert response is not None
        response._body(body)
        ready = self.ready
        if ready is not None:  # ``with_body``: the head and the first bytes are in
            self.ready = None
            try:
                ready.set_result(response)
            except asyncio.InvalidStateError:
                pass

    def on_message_complete(self) -> None:
        response = self.response
        if response is not None:
            if not self.parser.should_keep_alive():
                self.closed = True
            response._end()
            ready = self.ready
            if ready is not None:  # ``with_body`` and no body at all
                self.ready = None
                try:
                    ready.set_result(response)
                except asyncio.InvalidStateError:
                    pass

    # -- ours ------------------------------------------------------------------------------------
    def _fail(self, error: BaseException) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(error)
        if self.response is not None:
            self.response._end(error)

    def pause(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.transport.is_closing():
            self._paused = False
            self.transport.resume_reading()

    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def stale(self) -> bool:
        """An idle connection with something to read has been closed by the server (or
        sent junk) and the loop has not seen it yet: it must not carry a request."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


MAX_CACHED = 256  # parsed URLs kept
MAX_HEADS = 16  # encoded request heads kept per URL (an upstream has a handful: initialize, in-session, GET, DELETE)


class _Target:
    """One URL, parsed once; the request heads written to it, encoded once per (method, Host,
    headers) and reused (content-length goes after them). Measured with bench/profile_call.py:
    urlsplit and the header formatting were ~25 Python calls per proxied call."""

    __slots__ = ("origin", "secure", "path", "netloc", "heads", "idle", "last")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.secure = parts.scheme == "https"
        host = parts.hostname or ""
        self.origin = (parts.scheme, host, parts.port or (443 if self.secure else 80))
        self.path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        self.netloc = parts.netloc.rpartition("@")[2]
        self.heads: dict[tuple, bytes] = {}
        self.idle: list[_Connection] = []  # its origin's idle connections (the client's list, see _send_once)
        # The last head written from a dict: (method, Host, the dict's keys in order, a copy of it, the
        # head). The same headers again (an upstream's own dict, request after request) are found
        # by comparing, without a Python call (``items()`` and a dict look-up per request fewer).
        self.last: tuple[str, str | None, tuple, dict, bytes] | None = None


class _Stream:
    """What ``LeanClient.stream`` returns: sends on enter, releases the connection on exit
    (a hand-written async context manager: cheaper per request than ``asynccontextmanager``)."""

    __slots__ = ("_client", "_args", "_response")

    def __init__(self, client: LeanClient, *args: Any) -> None:
        self._client = client
        self._args = args
        self._response: Response | None = None

    async def __aenter__(self) -> Response:
        self._response = await self._client._send(*self._args)
        return self._response

    async def __aexit__(self, *exc: object) -> None:
        if self._response is not None:
            self._client.end(self._response)


_NO_TIMEOUT = object()  # LeanClient._last_timeout before the first request


def _seconds(timeout: Any) -> tuple[float | None, float | None]:
    """(connect, read) seconds from an ``httpx.Timeout``, a number or None."""
    if isinstance(timeout, httpx.Timeout):
        return timeout.connect, timeout.read
    return timeout, timeout


class LeanClient:
    """Keep-alive HTTP/1.1 connections per origin (see module docstring)."""

    def __init__(self, *, auth: httpx.Auth | None = None, timeout: Any = 30.0) -> None:
        self._targets: dict[str, _Target] = {}  # parsed URLs and their encoded request heads
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        # Every open connection (idle or busy), for aclose: added as made, gone as lost (not a set
        # operation per request, bench/profile_call.py --by-function).
        self._conns: set[_Connection] = set()
        self._auth = auth
        self._timeout = timeout
        self._ssl: ssl.SSLContext | None = None
        self._closed = False
        # The last URL's target and the last timeout's seconds, found by identity (an upstream
        # passes the same string and Timeout object each time): a dict look-up and _seconds'
        # two calls per request fewer (bench/profile_call.py --by-function).
        self._last_url: str | None = None
        self._last_target: _Target | None = None
        self._last_timeout: Any = _NO_TIMEOUT
        self._last_seconds: tuple[float | None, float | None] = (None, None)

    # -- the httpx-like surface -------------------------------------------------------------------
    def stream(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
        timeout: Any = None,
        host: str | None = None,
        with_body: bool = False,
    ) -> _Stream:
        """``async with client.stream(...) as response``. ``headers`` may be a list of pairs
        (repeats kept); ``host`` replaces the Host the URL gives (a transparent proxy keeps
        the one its client sent). ``with_body``: the response is handed over once its head
        *and* the first bytes of its body (or its end) are in, not at its head alone: what a
        caller that reads the body at once wants (a server that writes the head and the body
        apart then wakes it once, not twice; bench/profile_call.py --sse). The read timeout
        covers that wait too. Not for a stream whose body may begin long after its head."""
        timeout = self._timeout if timeout is None else timeout
        return _Stream(self, method, url, content, headers or {}, timeout, host, with_body)

    def open(
        self,
        method: str,
        url: str,
        content: bytes | None = None,
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
        timeout: Any = None,
        *,
        with_body: bool = False,
    ) -> Coroutine[Any, Any, Response]:
        """``stream`` without its context manager, for a caller on the hot path: awaiting it gives
        the response, which the caller must hand back with :meth:`end` (in a ``finally``), as
        leaving ``stream``'s context does. Two coroutine levels fewer on each wait of the
        exchange (bench/profile_call.py --sse)."""
        timeout = self._timeout if timeout is None else timeout
        if self._auth is None:
            return self._send_once(method, url, content, headers or {}, timeout, None, with_body)
        return self._send_auth(method, url, content, headers or {}, timeout, None)

    def end(self, response: Response) -> None:
        """The exchange of ``response`` (from :meth:`open`) is over: its connection goes back to
        the pool if the body was read to its end and the server allows keep-alive, else it closes.
        ``usable`` and ``is_complete`` inline, the origin's idle list kept on the connection:
        four Python calls per request fewer (bench/profile_call.py --by-function)."""
        conn: _Connection = response._conn  # type: ignore[assignment]
        conn.response = None
        conn.ready = None
        transport = conn.transport
        if (
            response._done
            and response._error is None
            and not conn.closed
            and transport is not None
            and not transport.is_closing()
            and not self._closed
        ):
            pool = conn.pool
            if not pool or len(pool) < MAX_IDLE:
                pool.append(conn)
                return
        conn.close()

    async def request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: Any = None,
    ) -> Response:
        async with self.stream(method, url, content=content, headers=headers, timeout=timeout) as response:
            await response.aread()
        return response

    async def post(self, url: str, **kwargs: Any) -> Response:
        return await self.request("POST", url, **kwargs)

    async def get(self, url: str, **kwargs: Any) -> Response:
        return await self.request("GET", url, **kwargs)

    async def delete(self, url: str, **kwargs: Any) -> Response:
        return await self.request("DELETE", url, **kwargs)

    async def aclose(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        for conn in list(self._conns):
            conn.close()
        self._conns.clear()

    # -- internals --------------------------------------------------------------------------------
    def _send(
        self,
        method: str,
        url: str,
        content: bytes | None,
        headers: dict[str, str] | list[tuple[str, str]],
        timeout: Any,
        host_header: str | None = None,
        with_body: bool = False,
    ) -> Coroutine[Any, Any, Response]:
        """The exchange to await: ``_send_once`` itself without auth (no coroutine level of its own)."""
        if self._auth is None:
            return self._send_once(method, url, content, headers, timeout, host_header, with_body)
        return self._send_auth(method, url, content, headers, timeout, host_header)

    async def _send_auth(
        self,
        method: str,
        url: str,
        content: bytes | None,
        headers: dict[str, str] | list[tuple[str, str]],
        timeout: Any,
        host_header: str | None,
    ) -> Response:
        assert self._auth is not None
        flow = self._auth.async_auth_flow(httpx.Request(method, url, headers=dict(headers)))
        try:
            request = await flow.__anext__()
            response = await self._send_once(method, url, content, _plain(request), timeout, host_header)
            if response.status_code != 401:
                return response
            await response.aread()  # a 401 body is small; the flow may want to see it
            try:
                request = await flow.asend(
                    httpx.Response(401, headers=response.raw_headers, content=response.content, request=request)
                )
            except StopAsyncIteration:
                response.replay()  # the caller reads the 401 as if untouched
                return response
            self.end(response)
            return await self._send_once(method, url, content, _plain(request), timeout, host_header)
        finally:
            await flow.aclose()

    async def _send_once(
        self,
        method: str,
        url: str,
        content: bytes | None,
        headers: dict[str, str] | list[tuple[str, str]],
        timeout: Any,
        host_header: str | None,
        with_body: bool = False,
    ) -> Response:
        if self._closed:
            raise httpx.ConnectError("client closed")
        if url is self._last_url:
            target = self._last_target
            assert target is not None
        else:
            target = self._targets.get(url)
            if target is None:
                target = self._targets[url] = _Target(url)
                if len(self._targets) > MAX_CACHED:
                    self._targets.clear()
                target.idle = self._idle.setdefault(target.origin, [])
            self._last_url, self._last_target = url, target
        origin = target.origin
        if timeout is self._last_timeout:
            connect_s, read_s = self._last_seconds
        else:
            connect_s, read_s = self._last_seconds = _seconds(timeout)
            self._last_timeout = timeout
        # >> inlined copy of _checkout's idle check (conn.usable() and not conn.stale()), without its
        # coroutine; to "if conn is None". test_inlined_equivalence.py holds it to the two methods.
        idle = target.idle
        conn = idle.pop() if idle else None
        if conn is not None:
            transport = conn.transport
            if conn.closed or transport is None or transport.is_closing():
                conn.close()
                conn = None
            elif conn.sock is not None:
                try:
                    stale = bool(select.select([conn.sock], [], [], 0)[0])
                except (OSError, ValueError):
                    stale = True
                if stale:
                    conn.close()
                    conn = None
        # << end of the copy of _checkout's idle check
        if conn is None:
            conn = await self._checkout(origin, target.secure, connect_s)
        # An upstream's own headers (a dict) repeat request after request: their head is kept.
        # Pairs (a transparent proxy's, its clients' headers) are written afresh each time.
        cached = headers.__class__ is dict or isinstance(headers, dict)
        last = target.last
        if (
            cached
            and last is not None
            and last[0] == method
            and last[1] == host_header
            and headers == last[3]
            and tuple(headers) == last[2]
        ):
            start: bytes | None = last[4]
            items: Any = None
        else:
            items = tuple(headers.items()) if cached else headers  # type: ignore[union-attr]
            key = (method, host_header, items) if cached else None
            start = target.heads.get(key) if cached else None
            if start is not None:
                target.last = (method, host_header, tuple(headers), dict(headers), start)  # type: ignore[arg-type]
        if start is None:
            head = [f"{method} {target.path} HTTP/1.1\r\nhost: {host_header or target.netloc}\r\n"]
            head.extend(f"{name}: {value}\r\n" for name, value in items)
            start = "".join(head).encode("latin-1")
            if cached:
                if len(target.heads) >= MAX_HEADS:
                    target.heads.clear()
                target.heads[key] = start
                target.last = (method, host_header, tuple(headers), dict(headers), start)  # type: ignore[arg-type]
        if content is not None or method in ("POST", "PUT", "PATCH"):
            start += b"content-length: %d\r\n" % len(content or b"")
        response = Response(conn, read_s)
        conn.response = response
        conn.raw_headers = response.raw_headers
        conn.with_body = with_body
        loop = conn.loop
        assert loop is not None
        ready = conn.ready = loop.create_future()
        assert conn.transport is not None
        conn.transport.write(start + b"\r\n" + content if content else start + b"\r\n")
        # A timer handle on the head's own future, not an asyncio.timeout context (cheaper per request).
        handle = loop.call_later(read_s, expire, ready) if read_s is not None else None
        try:
            await ready
        except TimeoutError:
            self._discard(conn)
            raise httpx.ReadTimeout(f"no response from {origin[1]}:{origin[2]} within {read_s:g} s") from None
        except BaseException:
            self._discard(conn)
            raise
        finally:
            if handle is not None:
                handle.cancel()
        return response

    async def _checkout(self, origin: tuple[str, str, int], secure: bool, connect_s: float | None) -> _Connection:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.usable() and not conn.stale():
                return conn
            conn.close()
        loop = running_loop()
        if secure and self._ssl is None:
            self._ssl = ssl.create_default_context()
        try:
            async with asyncio.timeout(connect_s):
                _, conn = await loop.create_connection(
                    _Connection, origin[1], origin[2], ssl=self._ssl if secure else None
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {origin[1]}:{origin[2]} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {origin[1]}:{origin[2]}: {exc.strerror or exc}") from None
        conn.origin = origin
        conn.loop = loop
        conn.pool = self._idle.setdefault(origin, [])
        conn.sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
        conn.conns = self._conns
        self._conns.add(conn)
        return conn

    def _release(self, conn: _Connection, response: Response) -> None:
        assert response._conn is conn
        self.end(response)

    def _discard(self, conn: _Connection) -> None:
        conn.close()


def _plain(request: httpx.Request) -> list[tuple[str, str]]:
    """A flow's request headers, less those this client writes itself."""
    return [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in request.headers.raw
        if k.lower() not in (b"host", b"content-length")
    ]
