"""A Streamable HTTP backend seen as a :class:`~hopline.transports.base.Channel`.

Contract
- In: ``send(message)`` takes whole JSON-RPC messages from the gateway: requests,
  notifications, and responses to server→client requests. Each is POSTed with its
  original bytes (``Message.encode()``), over one reusable ``httpx.AsyncClient``.
- Out: ``receive()`` yields every message the server sends back (responses,
  notifications, server→client requests) in arrival order, from JSON bodies, POST
  SSE streams and the standalone GET stream.
- A request is never left hanging: whatever goes wrong with its HTTP exchange
  (refused, reset, non-2xx, stream cut short) becomes a JSON-RPC error response
  for its id. ``receive()`` raises nothing but :class:`ChannelClosed`.
- The era is decided per message (reference/mcp-wire.md §5, §6):
  * handshake era (≤ 2025-11-25): ``Mcp-Session-Id`` and ``MCP-Protocol-Version``
    are captured from the ``initialize`` exchange and sent on every later request;
    the GET stream opens after ``notifications/initialized`` (405 tolerated) and
    reconnects with ``Last-Event-ID`` and capped backoff; a POST stream that ends
    early is resumed with GET + ``Last-Event-ID``. HTTP 404 on a request that
    carried a session id means the session is lost: unanswered requests get an
    ``UnavailableError`` (reason "session lost") and the channel closes with
    ``ChannelClosed("session lost (HTTP 404)")`` - unless ``reinitialize_on_404``,
    which replays the recorded handshake and retries the request once.
  * modern era (2026-07-28, ``_meta`` names the version): ``MCP-Protocol-Version``,
    ``Mcp-Method`` and ``Mcp-Name`` headers, no session, no GET stream;
    ``notifications/cancelled`` for an in-flight modern request closes its HTTP
    stream instead of being POSTed.
- Never: re-encode a message, forward hop-by-hop headers, follow redirects to
  another place, or leak a backend session id into a message.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
from typing import Any

import httpx

from hopline.binding import META_PROTOCOL_VERSION, NAME_HEADER_PARAM, Era, era_of_message
from hopline.jsonrpc import BackendTimeout, HoplineError, Id, Message, PeerError, ProtocolError, UnavailableError, parse
from hopline.transports.base import ChannelClosed
from hopline.transports.sse import SSEParser

log = logging.getLogger("hopline.http_upstream")

# Never forwarded from caller-supplied headers: hop-by-hop (RFC 9110 §7.6.1) and
# headers this module owns.
NOT_FORWARDED = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
        "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id",
    }
)  # fmt: skip
ACCEPT_BOTH = "application/json, text/event-stream"
_SAFE = re.compile(r"[\x20-\x7e]*")
_SENTINEL = re.compile(r"=\?base64\?.*\?=")
_EOF = object()


def encode_header_value(value: str) -> str:
    """mcp-wire §5: wrap values that would not survive an HTTP field as ``=?base64?…?=``."""
    if _SAFE.fullmatch(value) and value == value.strip() and not _SENTINEL.fullmatch(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode("ascii") + "?="


def clean_headers(headers: dict[str, str] | None) -> dict[str, str]:
    return {k.lower(): v for k, v in (headers or {}).items() if k.lower() not in NOT_FORWARDED}


def _ok(status: int) -> bool:
    return 200 <= status < 300


class _Flight:
    """One request waiting for its response."""

    __slots__ = ("message", "modern", "task")

    def __init__(self, message: Message, modern: bool) -> None:
        self.message, self.modern, self.task = message, modern, None


class _SessionGone(Exception):
    """HTTP 404 on a request that carried our session id."""


class StreamableHttpUpstream:
    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        read_timeout: float | None = None,
        name: str | None = None,
        reinitialize_on_404: bool = False,
        get_stream: bool = True,
        max_queue: int = 1024,
        max_resume_attempts: int = 3,
        backoff: tuple[float, float] = (0.05, 5.0),
    ) -> None:
        self.url = url
        self.name = name or url
        self._own_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(follow_redirects=False)
        self._timeout = httpx.Timeout(timeout, read=read_timeout)  # streams may idle long
        self._short = httpx.Timeout(timeout)  # one-way POSTs and DELETE
        self._base = {**clean_headers(headers), "accept": ACCEPT_BOTH, "content-type": "application/json"}
        self._reinit = reinitialize_on_404
        self._want_get = get_stream
        self._max_resume = max_resume_attempts
        self._backoff = backoff
        self._inbox: asyncio.Queue = asyncio.Queue(max_queue)
        self._flights: dict[Id, _Flight] = {}
        self._tasks: set[asyncio.Task] = set()
        self._closing = False  # no more sends
        self._closed = False  # receive() ends once the inbox drains
        self._shut = False  # aclose() ran
        self._reason = "closed"
        # handshake-era session state
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._session: dict[str, str] = {}
        self._generation = 0  # bumped whenever the session changes
        self._lost = False
        self._init: Message | None = None
        self._initialized: Message | None = None
        self._get_task: asyncio.Task | None = None
        self._reinit_lock = asyncio.Lock()

    @classmethod
    async def connect(cls, url: str, **kwargs: Any) -> StreamableHttpUpstream:
        """Same as the constructor; no I/O happens until the first ``send``."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {url!r}")
        return cls(url, **kwargs)

    # -- Channel ------------------------------------------------------------------
    async def send(self, message: Message) -> None:
        if self._closing:
            raise ChannelClosed(f"{self.name}: {self._reason}")
        body = message.body
        if "method" in body:
            if "id" in body:
                self._start(message)
                return
            if body["method"] == "notifications/cancelled" and self._consume_cancel(message):
                return
        await self._post_oneway(message)

    async def receive(self) -> Message:
        while True:
            if self._closed and self._inbox.empty():
                raise ChannelClosed(f"{self.name}: {self._reason}")
            item = await self._inbox.get()
            if item is not _EOF:
                return item

    async def aclose(self) -> None:
        if self._shut:
            return
        self._shut = self._closing = True
        await self._cancel_tasks()
        if self.session_id is not None and not self._lost:
            with contextlib.suppress(httpx.HTTPError):  # 405 and errors alike: nothing to do
                await self._client.delete(self.url, headers={**self._base, **self._session}, timeout=self._short)
        if self._own_client:
            await self._client.aclose()
        if not self._closed:
            self._finish("closed")

    def is_closed(self) -> bool:
        return self._closing

    def __repr__(self) -> str:
        return f"<StreamableHttpUpstream {self.name} session={self.session_id} in_flight={len(self._flights)} closed={self._closing}>"

    # -- requests -----------------------------------------------------------------
    def _start(self, message: Message) -> None:
        flight = _Flight(message, era_of_message(message.body) is Era.MODERN)
        if message.body["method"] == "initialize" and not flight.modern:
            self._init = message
        self._flights[message.id] = flight
        flight.task = self._spawn(self._run(flight))

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, flight: _Flight) -> None:
        msg_id = flight.message.id
        try:
            for attempt in (0, 1):
                generation = self._generation
                try:
                    await self._exchange(flight)
                    return
                except _SessionGone:
                    if attempt == 0 and self._reinit and await self._recover(generation):
                        continue
                    await self._lose_session()
                    return
        except httpx.HTTPError as exc:
            await self._fail(flight, self._transport_error(exc))
        except (ValueError, ProtocolError) as exc:  # an SSE event too large, garbage
            await self._fail(flight, PeerError(f"{self.name}: bad response: {exc}"))
        except Exception as exc:  # a bug: answer anyway so nobody waits forever
            log.exception("%s: request %r failed", self.name, msg_id)
            await self._fail(flight, PeerError(f"{self.name}: {type(exc).__name__}: {exc}"))
        finally:
            if self._flights.get(msg_id) is flight:
                del self._flights[msg_id]

    async def _exchange(self, flight: _Flight) -> None:
        """POST one request and deliver what comes back; raises _SessionGone on a session 404."""
        msg = flight.message
        headers = self._modern_headers(msg.body) if flight.modern else self._handshake_headers(msg)
        last_id: str | None = None
        retry: int | None = None
        async with self._client.stream("POST", self.url, content=msg.encode(), headers=headers, timeout=self._timeout) as resp:
            status = resp.status_code
            if status == 404 and "mcp-session-id" in headers:
                raise _SessionGone
            if not _ok(status):
                await self._deliver_http_error(flight, resp)
                return
            if msg.body["method"] == "initialize" and not flight.modern:
                self._set_session(resp.headers.get("mcp-session-id"), self.protocol_version)
            ctype = resp.headers.get("content-type", "").lower()
            if status == 202 or not (ctype.startswith("text/event-stream") or ctype.startswith("application/json")):
                await self._fail(flight, PeerError(f"{self.name}: answered a request with HTTP {status} {ctype or 'no body'}"))
                return
            if ctype.startswith("application/json"):
                await self._deliver(parse(await resp.aread()))
                return
            try:
                last_id, retry = await self._pump(resp, flight)
            except httpx.TransportError:
                if flight.modern:
                    raise
        if self._flights.get(msg.id) is flight:
            if not flight.modern and last_id:  # 2025-11-25: resume with GET + Last-Event-ID
                await self._resume(flight, last_id, retry)
            else:
                await self._fail(flight, UnavailableError(f"{self.name}: response stream ended before the response", backend=self.name, reason="disconnected"))

    async def _resume(self, flight: _Flight, last_id: str, retry: int | None) -> None:
        low, high = self._backoff
        for attempt in range(self._max_resume):
            await asyncio.sleep(min(retry / 1000 if retry is not None else low * 2**attempt, high))
            headers = {**self._base, **self._session, "accept": "text/event-stream", "last-event-id": last_id}
            try:
                async with self._client.stream("GET", self.url, headers=headers, timeout=self._timeout) as resp:
                    if resp.status_code == 404 and "mcp-session-id" in headers:
                        raise _SessionGone
                    if not _ok(resp.status_code) or not resp.headers.get("content-type", "").startswith("text/event-stream"):
                        break
                    new_id, new_retry = await self._pump(resp, flight)
            except httpx.TransportError:
                continue
            if self._flights.get(flight.message.id) is not flight:
                return
            last_id, retry = new_id or last_id, new_retry if new_retry is not None else retry
        await self._fail(flight, UnavailableError(f"{self.name}: response stream ended and could not be resumed", backend=self.name, reason="disconnected"))

    async def _pump(self, resp: httpx.Response, flight: _Flight | None) -> tuple[str | None, int | None]:
        """Deliver the messages of one SSE response; stop shortly after ``flight`` is answered."""
        parser = SSEParser()
        retry: int | None = None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(None) as deadline:
                async for chunk in resp.aiter_bytes():
                    for event in parser.feed(chunk):
                        if event.retry is not None:
                            retry = event.retry
                        if event.event != "message" or not event.data:
                            continue
                        try:
                            message = parse(event.data.encode())
                        except ProtocolError as exc:
                            log.warning("%s: dropped an SSE event that is not JSON-RPC: %s", self.name, exc.message)
                            continue
                        await self._deliver(message)
                        # Read on briefly so the server's end of stream keeps the connection reusable.
                        if flight is not None and message.is_response() and message.id == flight.message.id:
                            deadline.reschedule(loop.time() + 1.0)
        except TimeoutError:
            pass
        return parser.last_event_id, retry

    async def _deliver(self, message: Message) -> None:
        if "method" not in message.body:
            flight = self._flights.pop(message.id, None) if isinstance(message.id, (str, int)) else None
            if flight is not None and flight.message.body["method"] == "initialize" and not flight.modern:
                result = message.body.get("result")
                if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                    self._set_session(self.session_id, result["protocolVersion"])
        await self._inbox.put(message)

    async def _fail(self, flight: _Flight, error: HoplineError) -> None:
        msg_id = flight.message.id
        if self._flights.get(msg_id) is flight:
            del self._flights[msg_id]
            await self._inbox.put(error.to_response(msg_id))

    async def _deliver_http_error(self, flight: _Flight, resp: httpx.Response) -> None:
        status = resp.status_code
        body = await resp.aread()
        if resp.headers.get("content-type", "").lower().startswith("application/json"):
            with contextlib.suppress(ProtocolError):
                message = parse(body)
                if isinstance(message.body.get("error"), dict):
                    if message.id != flight.message.id:  # the server may say id:null
                        message = message.replace(id=flight.message.id)
                    await self._deliver(message)
                    return
        text = f"{self.name}: backend answered HTTP {status} {resp.reason_phrase}".rstrip()
        if status >= 500 or status in (401, 403, 408, 429):
            error: HoplineError = UnavailableError(text, backend=self.name, reason=f"http {status}")
        else:
            error = PeerError(text)
        await self._fail(flight, error)

    def _transport_error(self, exc: httpx.HTTPError) -> HoplineError:
        if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
            return BackendTimeout(f"{self.name}: backend timed out ({type(exc).__name__})", backend=self.name)
        return UnavailableError(f"{self.name}: backend unreachable: {exc or type(exc).__name__}", backend=self.name, reason="unreachable")

    # -- notifications and responses ------------------------------------------------
    def _consume_cancel(self, message: Message) -> bool:
        """True if the cancellation is handled here (modern: close the stream) and must not be POSTed."""
        request_id = message.params.get("requestId")
        flight = self._flights.get(request_id) if isinstance(request_id, (str, int)) else None
        if flight is not None:
            if not flight.modern:
                return False  # handshake era: the notification is the signal, a disconnect is not
            del self._flights[request_id]
            if flight.task is not None:
                flight.task.cancel()
            return True
        # Unmatched: only a handshake session has anything to cancel by notification.
        return self._init is None or era_of_message(message.body) is Era.MODERN

    async def _post_oneway(self, message: Message) -> None:
        body = message.body
        method = body.get("method")
        modern = method is not None and era_of_message(body) is Era.MODERN
        headers = self._modern_headers(body) if modern else self._handshake_headers(message)
        generation = self._generation
        try:
            resp = await self._client.post(self.url, content=message.encode(), headers=headers, timeout=self._short)
        except httpx.HTTPError as exc:
            log.warning("%s: could not deliver %s: %s", self.name, method or "a response", exc or type(exc).__name__)
            return
        if resp.status_code == 404 and "mcp-session-id" in headers:
            if not (self._reinit and await self._recover(generation)):
                await self._lose_session()
            return
        if not _ok(resp.status_code):
            log.warning("%s: backend refused %s with HTTP %d", self.name, method or "a response", resp.status_code)
            return
        if method == "notifications/initialized" and not modern:
            self._initialized = message
            if self._want_get and self._get_task is None:
                self._get_task = self._spawn(self._get_loop())

    # -- handshake-era session ------------------------------------------------------
    def _handshake_headers(self, message: Message) -> dict[str, str]:
        if message.body.get("method") == "initialize":
            return self._base
        return {**self._base, **self._session}

    def _modern_headers(self, body: dict[str, Any]) -> dict[str, str]:
        method = body["method"]
        params = body.get("params") or {}
        headers = {
            **self._base,
            "mcp-protocol-version": encode_header_value(str(params["_meta"][META_PROTOCOL_VERSION])),
            "mcp-method": encode_header_value(method),
        }
        key = NAME_HEADER_PARAM.get(method)
        if key is not None and isinstance(params.get(key), (str, int)):
            headers["mcp-name"] = encode_header_value(str(params[key]))
        return headers

    def _set_session(self, session_id: str | None, version: str | None) -> None:
        if session_id != self.session_id:
            self._generation += 1
        self.session_id, self.protocol_version = session_id, version
        session = {}
        if session_id is not None:
            session["mcp-session-id"] = session_id
        if version is not None:
            session["mcp-protocol-version"] = version
        self._session = session

    async def _recover(self, generation: int) -> bool:
        """Replay the recorded handshake for a fresh session; False if that is impossible."""
        async with self._reinit_lock:
            if self._closing:
                return False
            if generation != self._generation:
                return True  # another task already recovered
            if self._init is None:
                return False
            try:
                async with self._client.stream("POST", self.url, content=self._init.encode(), headers=self._base, timeout=self._timeout) as resp:
                    if not _ok(resp.status_code):
                        return False
                    session_id = resp.headers.get("mcp-session-id")
                    frames = [await resp.aread()]
                    if resp.headers.get("content-type", "").startswith("text/event-stream"):
                        frames = [e.data.encode() for e in SSEParser().feed(frames[0] + b"\n\n") if e.data]
                    answers = [m for m in map(parse, frames) if m.is_response() and m.id == self._init.id]
                    result = answers[0].body.get("result") if answers else None
                if not isinstance(result, dict):
                    return False
                self._set_session(session_id, result.get("protocolVersion"))
                self._generation += 1
                note = self._initialized or Message({"jsonrpc": "2.0", "method": "notifications/initialized"})
                resp = await self._client.post(self.url, content=note.encode(), headers={**self._base, **self._session}, timeout=self._short)
                log.info("%s: session expired; re-initialized as %s", self.name, self.session_id)
                return _ok(resp.status_code)
            except (httpx.HTTPError, ProtocolError, ValueError) as exc:
                log.warning("%s: re-initialize failed: %s", self.name, exc)
                return False

    async def _lose_session(self) -> None:
        if self._closing:
            return
        self._closing, self._lost = True, True
        self._reason = "session lost (HTTP 404)"
        flights = list(self._flights.values())
        self._flights.clear()
        await self._cancel_tasks()
        for flight in flights:
            error = UnavailableError(f"{self.name}: backend session lost (HTTP 404)", backend=self.name, reason="session lost")
            await self._inbox.put(error.to_response(flight.message.id))
        self._finish(self._reason)

    async def _get_loop(self) -> None:
        """The standalone GET stream: reconnect with Last-Event-ID and capped backoff; 405 ends it."""
        low, high = self._backoff
        delay, last_id, generation = low, None, self._generation
        while not self._closing:
            if generation != self._generation:  # a new session has its own cursor
                last_id, generation = None, self._generation
            headers = {**self._base, **self._session, "accept": "text/event-stream"}
            del headers["content-type"]
            if last_id:
                headers["last-event-id"] = last_id
            retry = None
            try:
                async with self._client.stream("GET", self.url, headers=headers, timeout=self._timeout) as resp:
                    if resp.status_code == 405:
                        log.debug("%s: no GET stream (405)", self.name)
                        return
                    if resp.status_code == 404 and "mcp-session-id" in headers:
                        raise _SessionGone
                    if _ok(resp.status_code) and resp.headers.get("content-type", "").startswith("text/event-stream"):
                        delay = low
                        new_id, retry = await self._pump(resp, None)
                        last_id = new_id or last_id
                    else:
                        log.warning("%s: GET stream refused with HTTP %d", self.name, resp.status_code)
            except _SessionGone:
                if not (self._reinit and await self._recover(generation)):
                    await self._lose_session()
                    return
            except (httpx.HTTPError, ValueError) as exc:
                log.debug("%s: GET stream dropped: %s", self.name, exc)
            await asyncio.sleep(min(retry / 1000, high) if retry is not None else delay)
            delay = min(delay * 2, high)

    # -- teardown ---------------------------------------------------------------------
    async def _cancel_tasks(self) -> None:
        me = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not me]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    def _finish(self, reason: str) -> None:
        self._closing = self._closed = True
        self._reason = reason
        with contextlib.suppress(asyncio.QueueFull):
            self._inbox.put_nowait(_EOF)
