"""A Streamable HTTP backend seen as a :class:`~hopline.layers.transport.channel.Channel`.

Contract
- In: ``send(message)``: requests, notifications, and responses to server→client
  requests, each POSTed with its original bytes over one reusable httpx client. A
  request's exchange runs in a task the channel owns, so ``send`` returns at once;
  a notification or response is POSTed (202) before ``send`` returns.
- Out: ``receive()`` yields everything the server sends (responses, notifications,
  server→client requests) in arrival order, from JSON bodies, POST SSE streams and
  the GET stream. It raises nothing but :class:`ChannelClosed`.
- A request is never left hanging: whatever goes wrong with its HTTP exchange
  (refused, reset, non-2xx, stream cut short) becomes an error response for its id.
- The era is decided per message (reference/mcp-wire.md §5, §6):
  * handshake era (≤ 2025-11-25): ``Mcp-Session-Id`` and ``MCP-Protocol-Version``
    are captured from the ``initialize`` exchange and sent on every later request
    (messages sent before its answer wait for it: stdio clients pipeline);
    the GET stream opens after ``notifications/initialized`` (405 tolerated) and
    reconnects with ``Last-Event-ID`` and capped backoff; a POST stream that ends
    early is resumed with GET + ``Last-Event-ID``. HTTP 404 on a request that
    carried a session id means the session is lost: every unanswered request gets
    an ``UnavailableError`` (reason "session lost") and the channel closes with
    ``ChannelClosed("session lost (HTTP 404)")``, unless ``reinitialize_on_404``,
    which replays the recorded handshake and retries the request once.
  * modern era (2026-07-28, ``_meta`` names the version): ``MCP-Protocol-Version``,
    ``Mcp-Method`` and ``Mcp-Name`` headers, and on ``tools/call`` the ``Mcp-Param-*``
    headers its arguments call for, by the tool's inputSchema as the backend's last
    tools/list answer through this channel gave it (a tool not listed yet gets none);
    no session, no GET stream;
    ``notifications/cancelled`` for an in-flight modern request closes its HTTP
    stream instead of being POSTed, and nothing is delivered for it afterwards.
- Never: re-encode a message, forward hop-by-hop headers, follow redirects (with
  the client it creates; a shared client passed in decides), or put a backend
  session id into a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import httpx

from hopline.transports.h1client import LeanClient, lean_or_httpx
from hopline.transports.h1response import Response
from hopline.binding import META_PROTOCOL_VERSION, NAME_HEADER_PARAM, Era, era_of_message, era_of_version
from hopline.jsonrpc import (
    BackendTimeout,
    HoplineError,
    Id,
    Message,
    PeerError,
    ProtocolError,
    UnavailableError,
    malformed_answer,
    malformed_answer_error,
)
from hopline.jsonrpc import parse, recover_answer_id
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.inbound import Inbound
from hopline.header_codec import ACCEPT_BOTH, ParamMaps, clean_headers, modern_headers, param_headers
from hopline.transports.http_util import public_url
from hopline.transports.sse import SSEParser
from hopline.transports.streamable_http_session import SessionStreams, _ctype, _is_sse, _ok, _SessionGone
from hopline.layers.transport.loop import current_task, running_loop

log = logging.getLogger("hopline.http_upstream")

ANSWERED_GRACE = 1.0  # seconds an SSE response is read on after our answer came on it
MAX_MODERN_HEADS = 256  # 2026-07-28 header sets kept per upstream, by (version, method, name)


class _Flight:  # one request waiting for its response
    __slots__ = ("message", "modern", "task")

    def __init__(self, message: Message, modern: bool) -> None:
        self.message, self.modern, self.task = message, modern, None


class StreamableHttpUpstream(SessionStreams, Inbound):
    MAX_RESUME = 3  # GET + Last-Event-ID attempts for a POST stream cut short
    BACKOFF = (0.05, 5.0)  # reconnect delay: first, cap (the server's retry: wins, capped too)

    def __init__(
        self, url: str, *, headers: dict[str, str] | None = None, client: httpx.AsyncClient | None = None,
        timeout: float = 30.0, read_timeout: float | None = None, name: str | None = None,
        reinitialize_on_404: bool = False, get_stream: bool = True, max_queue: int = 1024,
    ) -> None:  # fmt: skip
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"not an http(s) URL: {public_url(url)!r}")
        self.url, self.name = (
            url,
            name or public_url(url),
        )  # never the URL's userinfo or query: names reach errors and logs
        self._own_client = client is None
        self._client = client if client is not None else lean_or_httpx(url)
        # The lean client hands a POST's response over with the first bytes of its body, not
        # at its head alone: one wake-up per exchange fewer (an SDK server writes them apart).
        self._lean = isinstance(self._client, LeanClient)
        self._timeout = httpx.Timeout(timeout, read=read_timeout)  # streams may idle for long
        self._short = httpx.Timeout(timeout)  # one-way POSTs and DELETE
        self._base = {**clean_headers(headers), "accept": ACCEPT_BOTH, "content-type": "application/json"}
        self._modern_heads: dict[tuple[Any, str, Any], dict[str, str]] = {}  # see _modern_headers
        self._reinit, self._want_get = reinitialize_on_404, get_stream
        Inbound.__init__(self, max_queue)
        self._flights: dict[Id, _Flight] = {}
        self.params = ParamMaps()  # the backend's tools' Mcp-Param-* maps, from its tools/list answers
        self._tasks: set[asyncio.Task] = set()
        # closing: no more sends; closed: receive() ends once the inbox drains; shut: aclose() ran
        self._closing = self._shut = False
        # The handshake-era session, and the headers naming it. The generation changes with it.
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._session: dict[str, str] = {}
        self._in_session = self._base  # {**_base, **_session}, made by _set_session
        self._generation, self._lost = 0, False
        self._init: Message | None = None  # recorded for reinitialize_on_404
        # Set while no initialize is unanswered. Handshake-era messages wait for it, so that a
        # client pipelining its handshake (stdio clients do) still sends the session id.
        self._init_done = asyncio.Event()
        self._init_done.set()
        self._init_waiting = False  # not _init_done.is_set(), read without a call
        self._loop: asyncio.AbstractEventLoop | None = None  # see _spawn
        self._initialized: Message | None = None
        self._get_task: asyncio.Task | None = None
        self._reinit_lock = asyncio.Lock()

    @classmethod
    async def connect(cls, url: str, **kwargs: Any) -> StreamableHttpUpstream:
        """Same as the constructor: no I/O happens until the first ``send``."""
        return cls(url, **kwargs)

    # -- Channel --------------------------------------------------------------------
    async def send(self, message: Message) -> None:
        if self._closing:
            raise ChannelClosed(f"{self.name}: {self._reason}")
        body = message.body
        if "method" in body and "id" in body:
            version = message.meta.get(META_PROTOCOL_VERSION)  # era_of_message's test, on the message's kept _meta
            flight = _Flight(message, version is not None and era_of_version(version) is Era.MODERN)
            if body["method"] == "initialize" and not flight.modern:
                self._init = message
                self._init_waiting = True
                self._init_done.clear()
            self._flights[message.id] = flight
            # Not _spawn: the task takes itself out of _tasks as it ends (_run's finally), instead
            # of a done-callback (a callback and its loop turn per request fewer); whoever cancels
            # it from outside adds the callback, for a task cancelled before it ever ran.
            loop = self._loop
            if loop is None:
                loop = self._loop = running_loop()
            task = flight.task = loop.create_task(self._run(flight))
            self._tasks.add(task)
        elif body.get("method") != "notifications/cancelled" or not self._consume_cancel(message):
            await self._post_oneway(message)

    async def aclose(self) -> None:
        if self._shut:
            return
        self._shut = self._closing = True
        await self._cancel_tasks()
        if self.session_id is not None and not self._lost:
            with contextlib.suppress(httpx.HTTPError):  # 405 or a dead server: nothing left to end
                await self._client.delete(self.url, headers={**self._base, **self._session}, timeout=self._short)
        if self._own_client:
            await self._client.aclose()
        if not self._closed:
            self._finish("closed")

    def is_closed(self) -> bool:
        return self._closing

    def __repr__(self) -> str:
        return (
            f"<StreamableHttpUpstream {self.name} session={self.session_id} "
            f"in_flight={len(self._flights)} closed={self._closing}>"
        )

    # -- requests -----------------------------------------------------------------------
    def _spawn(self, coro: Any) -> asyncio.Task:
        # The loop's own create_task (asyncio.create_task is two Python calls more), on the loop
        # remembered from the first one: the channel is bound to it anyway (its tasks, its
        # client's connections). bench/profile_call.py: a running_loop() (4 calls) per request fewer.
        loop = self._loop
        if loop is None:
            loop = self._loop = running_loop()
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, flight: _Flight) -> None:
        msg_id = flight.message.id
        is_init = flight.message is self._init
        try:
            if not flight.modern and not is_init and self._init_waiting:
                await self._init_done.wait()
            for attempt in (0, 1):
                generation = self._generation
                try:
                    return await self._exchange(flight)
                except _SessionGone:
                    if attempt or not await self._session_gone(generation):
                        return
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent: safe to retry
            await self._fail(
                flight, UnavailableError(self._unreachable(exc), backend=self.name, reason="connect_failed")
            )
        except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout) as exc:
            await self._fail(
                flight, BackendTimeout(f"{self.name}: backend timed out ({type(exc).__name__})", backend=self.name)
            )
        except httpx.HTTPError as exc:
            text = self._unreachable(exc)
            await self._fail(flight, UnavailableError(text, backend=self.name, reason="unreachable"))
        except (ValueError, ProtocolError) as exc:  # an oversized SSE event, a body that is not JSON-RPC
            await self._fail(flight, PeerError(f"{self.name}: bad response: {exc}"))
        except Exception as exc:  # a bug: answer anyway, so that nobody waits forever
            log.exception("%s: request %r failed", self.name, msg_id)
            await self._fail(flight, PeerError(f"{self.name}: {type(exc).__name__}: {exc}"))
        finally:
            flights = self._flights
            if msg_id in flights and flights[msg_id] is flight:
                del flights[msg_id]
            if is_init:
                self._init_set()
            self._tasks.discard(flight.task)

    def _init_set(self) -> None:
        self._init_waiting = False
        self._init_done.set()

    async def _exchange(self, flight: _Flight) -> None:
        """One POST and its answer. The lean client's exchange is awaited and ended here
        (``open``/``end``), not through its ``stream`` context manager: three coroutine levels
        fewer on each of the request's waits (bench/profile_call.py --sse)."""
        msg = flight.message
        if flight.modern:
            headers = self._modern_headers(msg.body)
        else:  # >> inlined copy of _handshake_headers; test_inlined_equivalence.py
            headers = self._base if msg.method == "initialize" else self._in_session
            # << end of the copy of _handshake_headers
        last_id = retry = None
        content, timeout = msg.encode(), self._timeout
        if self._lean:
            client = self._client
            resp = await client.open("POST", self.url, content, headers, timeout, with_body=True)
            try:
                ctype = self._sse_answer(flight, resp, headers)
                if ctype is None:
                    try:
                        last_id, retry = await self._pump(resp, flight)
                    except httpx.TransportError:
                        if flight.modern:  # 2026: a broken stream loses the request
                            raise
                else:
                    return await self._other_answer(flight, resp, ctype)
            finally:
                client.end(resp)
        else:
            async with self._client.stream("POST", self.url, content=content, headers=headers, timeout=timeout) as resp:
                ctype = self._sse_answer(flight, resp, headers)
                if ctype is None:
                    try:
                        last_id, retry = await self._pump(resp, flight)
                    except httpx.TransportError:
                        if flight.modern:
                            raise
                else:
                    return await self._other_answer(flight, resp, ctype)
        flights = self._flights
        if msg.id not in flights or flights[msg.id] is not flight:
            return  # answered (the common case)
        # 2025-11-25: a stream that ended before the answer is resumed with GET + Last-Event-ID.
        low, high = self.BACKOFF
        for attempt in range(self.MAX_RESUME if last_id and not flight.modern else 0):
            if self._flights.get(msg.id) is not flight:
                return
            await asyncio.sleep(min(retry / 1000 if retry is not None else low * 2**attempt, high))
            with contextlib.suppress(httpx.TransportError):
                async with self._get(last_id) as resp:
                    if not _is_sse(resp):
                        break
                    new_id, new_retry = await self._pump(resp, flight)
                    last_id, retry = new_id or last_id, new_retry if new_retry is not None else retry
        await self._fail(
            flight,
            UnavailableError(
                f"{self.name}: the exchange ended without a response", backend=self.name, reason="disconnected"
            ),
        )

    def _sse_answer(self, flight: _Flight, resp: Any, headers: dict[str, str]) -> str | None:
        """None if ``resp`` is an SSE stream to pump; for any other answer, its content type
        (lower-cased; "" for a status not 2xx), for ``_other_answer``: found once per exchange.
        Raises _SessionGone on a 404 for our session."""
        status = resp.status_code
        if status == 404 and "mcp-session-id" in headers:
            raise _SessionGone
        if 200 <= status < 300:
            if not flight.modern and flight.message.method == "initialize":
                self._set_session(resp.headers.get("mcp-session-id"), self.protocol_version)
            ctype = resp.content_type if resp.__class__ is Response else _ctype(resp)
            return None if status != 202 and ctype.startswith("text/event-stream") else ctype
        return ""

    async def _other_answer(self, flight: _Flight, resp: Any, ctype: str) -> None:
        """A JSON body, an HTTP error, or an answer that is neither (``ctype``: see ``_sse_answer``)."""
        status, msg = resp.status_code, flight.message
        if not 200 <= status < 300:
            return await self._deliver_http_error(flight, resp)
        if ctype.startswith("application/json") and status != 202:
            try:
                answer = parse(await resp.aread())
            except ProtocolError as exc:  # the body is this request's answer, however broken
                self.dropped(
                    "%s: answered id %r with an error: its response is not JSON-RPC: %s",
                    self.name,
                    msg.id,
                    exc.message,
                )
                return await self._fail(flight, malformed_answer_error(self.name))
            await self._deliver(answer)
            flights = self._flights
            if msg.id in flights and flights[msg.id] is flight:  # a body for another id: this one is still unanswered
                await self._fail(
                    flight,
                    UnavailableError(
                        f"{self.name}: the exchange ended without a response", backend=self.name, reason="disconnected"
                    ),
                )
            return
        await self._fail(flight, PeerError(f"{self.name}: answered a request with HTTP {status} {ctype or 'no body'}"))

    async def _pump(self, resp: httpx.Response, flight: _Flight | None) -> tuple[str | None, int | None]:
        """Deliver the messages of one SSE response; returns its last event id and retry.
        Once our answer has come, the stream is read on only briefly (ANSWERED_GRACE): the
        server's end of stream keeps the connection reusable; one that never ends the stream
        cannot hold us. The lean client's response keeps that deadline itself
        (``read_for``) and is read here, in this coroutine (two coroutine levels and an
        async generator fewer per request than ``_events``, bench/profile_call.py --sse);
        an httpx response goes through ``_events`` with an ``asyncio.timeout`` context."""
        parser = SSEParser(errors="surrogateescape")
        if resp.__class__ is not Response:
            state: list[int | None] = [None]  # the retry: field last seen
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None) as deadline:
                    await self._events(resp, flight, parser, state, deadline.reschedule)
            return parser.last_event_id, state[0]
        retry = None
        want = flight.message.id if flight is not None else None
        while data := await resp.read_some():  # type: ignore[attr-defined]
            for event in parser.feed(data):
                if event.retry is not None:
                    retry = event.retry
                message = self._message_of(event)
                if message is None:
                    continue
                await self._deliver(message)
                if flight is not None and message.id == want and "method" not in message.body:
                    resp.read_for(ANSWERED_GRACE)  # type: ignore[attr-defined]
        return parser.last_event_id, retry

    async def _events(
        self, resp: httpx.Response, flight: _Flight | None, parser: SSEParser, state: list[int | None], stop_at: Any
    ) -> None:
        loop = running_loop()
        async for chunk in resp.aiter_bytes():
            for event in parser.feed(chunk):
                if event.retry is not None:
                    state[0] = event.retry
                message = self._message_of(event)
                if message is None:
                    continue
                await self._deliver(message)
                if flight is not None and message.id == flight.message.id and message.is_response():
                    stop_at(loop.time() + ANSWERED_GRACE)

    def _message_of(self, event: Any) -> Message | None:
        """The JSON-RPC message an SSE event carries (a -31003 answer for a broken answer to a
        request in flight), or None: the priming event (an id, no data), another event type, or
        a frame dropped as not JSON-RPC. One place for the lean and the httpx read loops."""
        if event.event != "message" or not event.data:
            return None
        frame = event.data.encode("utf-8", "surrogateescape")
        try:
            return parse(frame)
        except ProtocolError as exc:
            return self._malformed(frame, exc)

    def _malformed(self, frame: bytes, exc: ProtocolError) -> Message | None:
        """A -31003 answer for the request in flight whose SSE answer is broken (invalid UTF-8,
        malformed JSON), if its id can be read safely; else None (the event is dropped)."""
        msg_id = recover_answer_id(frame)
        if msg_id is not None and msg_id in self._flights:
            self.dropped(
                "%s: answered id %r with an error: its response is not JSON-RPC: %s", self.name, msg_id, exc.message
            )
            return malformed_answer(self.name, msg_id)
        self.dropped("%s: dropped an SSE event that is not JSON-RPC: %s", self.name, exc.message)
        return None

    async def _deliver(self, message: Message) -> None:
        msg_id = message.id
        cls = msg_id.__class__
        if "method" not in message.body and (cls is int or cls is str or isinstance(msg_id, (str, int))):
            flight = self._flights.pop(msg_id, None)
            if flight is not None and flight.message.method == "tools/list":
                self.params.learn(message.body.get("result"))
            elif flight is not None and not flight.modern and flight.message.body["method"] == "initialize":
                result = message.body.get("result")
                if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                    self._set_session(self.session_id, result["protocolVersion"])
                self._init_set()
        await self.put(message)

    async def _fail(self, flight: _Flight, error: HoplineError) -> None:
        msg_id = flight.message.id
        if self._flights.get(msg_id) is flight:
            del self._flights[msg_id]
            await self.put(error.to_response(msg_id))

    async def _deliver_http_error(self, flight: _Flight, resp: httpx.Response) -> None:
        status, body = resp.status_code, await resp.aread()
        if _ctype(resp).startswith("application/json"):  # a JSON-RPC error body is the answer (400 -32022, 404 -32601)
            with contextlib.suppress(ProtocolError):
                message = parse(body)
                if isinstance(message.body.get("error"), dict):
                    if message.id != flight.message.id:  # the server may say id:null
                        message = message.replace(id=flight.message.id)
                    return await self._deliver(message)
        text = f"{self.name}: backend answered HTTP {status} {resp.reason_phrase}".rstrip()
        if status >= 500 or status in (401, 403, 408, 429):
            return await self._fail(flight, UnavailableError(text, backend=self.name, reason=f"http {status}"))
        await self._fail(flight, PeerError(text))

    def _unreachable(self, exc: BaseException) -> str:
        """The client-facing text of a failure to reach the backend. A network error's
        details (address, OS error) go to the log only: clients learn which backend, never
        where it lives. Other request errors (credentials that could not be had) are ours
        to explain and keep their text."""
        if not isinstance(exc, httpx.TransportError):
            return f"{self.name}: backend unreachable: {exc or type(exc).__name__}"
        log.warning("%s: backend unreachable: %s", self.name, exc or type(exc).__name__)
        return f"{self.name}: backend unreachable ({type(exc).__name__})"

    # -- notifications and responses ------------------------------------------------------
    def _consume_cancel(self, message: Message) -> bool:
        """True if the cancellation is carried out here and must not be POSTed."""
        request_id = message.params.get("requestId")
        flight = self._flights.get(request_id) if isinstance(request_id, (str, int)) else None
        if flight is not None:
            if not flight.modern:
                return False  # handshake era: the notification is the signal, a disconnect is not
            del self._flights[request_id]
            flight.task.cancel()  # closes the response stream: the 2026 cancellation
            flight.task.add_done_callback(self._tasks.discard)  # in case it never ran (see send)
            return True
        # Unmatched (answered already, or unknown): only a handshake session may want it.
        return self._init is None or era_of_message(message.body) is Era.MODERN

    async def _post_oneway(self, message: Message) -> None:
        body = message.body
        method = body.get("method")
        modern = method is not None and era_of_message(body) is Era.MODERN
        if not modern:
            await self._init_done.wait()
            if self._closing:
                raise ChannelClosed(f"{self.name}: {self._reason}")
        headers = self._modern_headers(body) if modern else self._handshake_headers(body)
        generation = self._generation
        try:
            resp = await self._client.post(self.url, content=message.encode(), headers=headers, timeout=self._short)
        except httpx.HTTPError as exc:
            log.warning("%s: could not deliver %s: %s", self.name, method or "a response", exc or type(exc).__name__)
            return
        if resp.status_code == 404 and "mcp-session-id" in headers:
            # In a task of its own: losing the session fills the inbox, which our caller drains.
            self._spawn(self._session_gone(generation))
        elif not _ok(resp.status_code):
            log.warning("%s: backend refused %s with HTTP %d", self.name, method or "a response", resp.status_code)
        elif method == "notifications/initialized" and not modern:
            self._initialized = message
            if self._want_get and self._get_task is None:
                self._get_task = self._spawn(self._get_loop())

    # -- headers ----------------------------------------------------------------------------
    def _handshake_headers(self, body: dict[str, Any]) -> dict[str, str]:
        """The base headers (``initialize``) or those and the session's, one dict made when the
        session changes (two Python calls and a dict per request fewer)."""
        return self._base if body.get("method") == "initialize" else self._in_session

    def _modern_headers(self, body: dict[str, Any]) -> dict[str, str]:
        """The base headers plus the 2026-07-28 mirror headers, one dict per (version, method,
        name) kept and reused (nobody changes it): checking and encoding the values is
        ~60 Python calls per request (bench/profile_call.py --era 2026). Only plain string
        values are keys (``True`` and ``1`` hash alike); anything else is built afresh."""
        method, params = body["method"], body["params"]
        version = params["_meta"][META_PROTOCOL_VERSION]
        param = NAME_HEADER_PARAM.get(method)
        name = None if param is None else params.get(param)
        # >> inlined copy of ParamMaps.get (two Python calls per request fewer); test_inlined_equivalence.py
        if method == "tools/call" and (
            mirrors := self.params.tools.get(name) if name.__class__ is str or isinstance(name, str) else None
        ):  # << end of the copy of ParamMaps.get
            return {**self._base, **modern_headers(body), **param_headers(mirrors, params.get("arguments"))}
        if version.__class__ is not str or not (name is None or name.__class__ is str):
            return {**self._base, **modern_headers(body)}
        key = (version, method, name)
        found = self._modern_heads.get(key)
        if found is None:
            if len(self._modern_heads) >= MAX_MODERN_HEADS:
                self._modern_heads.clear()
            found = self._modern_heads[key] = {**self._base, **modern_headers(body)}
        return found

    # -- teardown -----------------------------------------------------------------------------------
    async def _cancel_tasks(self) -> None:
        tasks = [t for t in self._tasks if t is not current_task()]
        for task in tasks:
            task.cancel()
            task.add_done_callback(self._tasks.discard)  # a request's task that never ran (see send)
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    def _finish(self, reason: str) -> None:
        self._closing = True
        Inbound._finish(self, reason)
