"""The Streamable HTTP listener (Layer 1, client side), both MCP eras, as ASGI.

The era is chosen per request from ``MCP-Protocol-Version`` exactly as the SDK
does (reference/mcp-wire.md §5 "SDK server era routing"): no header or a
handshake version → the handshake era; a 2026-07-28 header → the modern era.

Handshake era: ``initialize`` opens a session whose id hopline mints (never a
backend's); later requests must name it (400 without, 404 if unknown); GET opens
the standalone stream, with ``Last-Event-ID`` resumption; DELETE ends the
session and its backend. With ``stateless=True`` no session is kept and each
POST is a stateless exchange (the SDK's ``stateless_http`` variant).

Modern era: POST only (GET/DELETE → 405), routing headers checked against the
body (400/-32020), each request a stateless exchange whose client disconnect
cancels it at the backend, JSON-RPC errors mapped to HTTP statuses (-32601 → 404,
-32602/-32020/-32021/-32022 → 400).

Authentication runs before this listener (transports/app.py): the caller's principal
arrives with each request (None: no authentication configured), goes onto every
message it parsed (``message.principal``), and is what a handshake-era session is
bound to: a session id used by any other principal is answered exactly like an
unknown one (404), for POST, GET and DELETE alike, so a session id is neither a
credential nor an oracle.

A response is held until the backend's answer arrives and sent as plain JSON; if
the backend sends something first (progress, sampling, logs) the response turns
into an SSE stream. A request the backend does not answer within
``request_timeout`` gets a timeout error and the backend a cancellation.

Bounds (admission.py, http_session.py): an ``initialize`` that creates a session holds
an admission slot until its answer is written, and is refused at once with 503 and
``Retry-After`` past ``max_pending``/``max_sessions``; it is answered within
``handshake_timeout`` (a timeout error otherwise, the half-made session closed); a
client that leaves before the answer frees its slot and its session. A stream whose
buffer overflows is cut off: its writer ends the response (a last error event if the
socket takes it within ``CUT_GRACE`` seconds, else the connection is dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from hopline.binding import HANDSHAKE_VERSIONS, MODERN_VERSIONS, META_PROTOCOL_VERSION, NAME_HEADER_PARAM, Era, era_of_version
from hopline.jsonrpc import (
    BackendTimeout,
    HeaderMismatch,
    HoplineError,
    InvalidParams,
    InvalidRequest,
    Message,
    MethodNotAllowed,
    NotAcceptable,
    ProtocolError,
    SessionNotFound,
    SessionRequired,
    UnavailableError,
    UnsupportedProtocolVersion,
    notification,
    parse,
)
from hopline.layers.pipeline import Principal
from hopline.transports import http_util as hu
from hopline.transports.base import Backends, ChannelClosed, Source
from hopline.transports.header_codec import decode_header_value
from hopline.transports.admission import Slot, StreamOverflow
from hopline.transports.http_session import ClientSession, HandedOver, SessionTable, Sink, is_end
from hopline.transports.inbox import Interrupted
from hopline.transports.sse import KEEPALIVE, encode_event

log = logging.getLogger("hopline.http")

KNOWN_VERSIONS = frozenset(HANDSHAKE_VERSIONS + MODERN_VERSIONS)
MODERN_STATUS = {-32601: 404, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32600: 400, -32700: 400}
SESSION_HEADER = "mcp-session-id"
CUT_GRACE = 1.0  # seconds a cut-off stream's last event may take to leave


@dataclass
class ListenerOptions:
    max_body: int = hu.DEFAULT_MAX_BODY
    request_timeout: float = 300.0
    stateless: bool = False
    keepalive: float = 15.0


class StreamableHttpListener:
    """ASGI handler for one MCP endpoint (mount it at ``/mcp``)."""

    def __init__(self, backends: Backends, sessions: SessionTable, options: ListenerOptions | None = None) -> None:
        self.backends = backends
        self.sessions = sessions
        self.options = options or ListenerOptions()

    async def __call__(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send, headers: hu.Headers, principal: Principal | None = None) -> None:
        method = scope["method"]
        era = Era.HANDSHAKE
        try:
            version = headers.get(b"mcp-protocol-version")
            if version is not None and version not in KNOWN_VERSIONS:
                raise UnsupportedProtocolVersion(
                    f"Unsupported protocol version: {version[:40]}",
                    data={"supported": sorted(KNOWN_VERSIONS, reverse=True), "requested": version[:40]},
                )
            era = era_of_version(version)
            if method == "POST":
                await self._post(scope, receive, send, headers, era, principal)
            elif era is Era.MODERN or self.options.stateless or method not in ("GET", "DELETE"):
                raise MethodNotAllowed(f"{method} is not allowed on this endpoint")
            elif method == "GET":
                await self._get(receive, send, headers, principal)
            else:
                await self._delete(send, headers, principal)
        except MethodNotAllowed as exc:
            stateful = era is Era.HANDSHAKE and not self.options.stateless
            await hu.send_error(send, exc, headers={"allow": "GET, POST, DELETE" if stateful else "POST"})
        except HoplineError as exc:
            await hu.send_error(send, exc)
        except ConnectionResetError:
            pass

    # -- POST --------------------------------------------------------------------
    async def _post(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send, headers: hu.Headers, era: Era, principal: Principal | None) -> None:
        ctype = headers.get(b"content-type", "") or ""
        if not ctype.lower().startswith("application/json"):
            raise ProtocolError("Content-Type must be application/json", data=None)
        accept = (headers.get(b"accept") or "*/*").lower()
        if not any(t in accept for t in ("application/json", "text/event-stream", "*/*")):
            raise NotAcceptable("Accept must include application/json and text/event-stream")
        body = await hu.read_body(receive, headers, self.options.max_body)
        message = parse(body)
        if principal is not None:
            message.principal = principal
        if era is Era.MODERN:
            await self._modern(receive, send, headers, message)
        elif self.options.stateless:
            await self._exchange(receive, send, message, Era.HANDSHAKE, modern=False)
        else:
            await self._handshake(receive, send, headers, message, principal)

    async def _handshake(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers, message: Message, principal: Principal | None) -> None:
        session_id = headers.get(b"mcp-session-id")
        if message.method == "initialize" and message.is_request():
            with self.sessions.admit(message.id) as slot:  # Overloaded (503) past the bounds
                await self._initialize(receive, send, message, principal, slot)
            return
        if session_id is None:
            raise SessionRequired("Bad Request: Missing session ID", request_id=message.id)
        found = self.sessions.get(session_id, _owner(principal))
        if found is None:
            raise SessionNotFound("Session not found", request_id=message.id)
        session = found
        if not message.is_request():
            try:
                await session.send(message)
            except ChannelClosed as exc:
                raise SessionNotFound(f"Session ended: {exc.reason}") from None
            await hu.send_empty(send, 202)
            return
        sink = session.open_post(message)
        try:
            await session.send(message)
        except ChannelClosed as exc:
            session.finish_post(sink)
            raise UnavailableError(f"backend unavailable: {exc.reason}", reason="backend_closed", request_id=message.id) from None
        extra = {SESSION_HEADER: session.id}
        await self._respond(receive, send, sink, message, extra, session=session, sink=sink)

    async def _initialize(self, receive: hu.Receive, send: hu.Send, message: Message, principal: Principal | None, slot: Slot) -> None:
        """Create a session and answer its ``initialize`` within the handshake deadline.
        If the client leaves first, or the answer is not a result, the session is closed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(self.sessions.handshake_timeout, self.options.request_timeout)
        watcher = asyncio.ensure_future(hu.wait_disconnect(receive))
        session: ClientSession | None = None
        answer: Message | None = None
        try:
            session = await self._create(watcher, principal, message)
            if session is None:
                return
            session.protocol_version = message.params.get("protocolVersion")
            sink = session.open_post(message)
            try:
                await session.send(message)
            except ChannelClosed as exc:
                raise UnavailableError(f"backend unavailable: {exc.reason}", reason="start_failed", request_id=message.id) from None
            answer = await self._respond(
                receive, send, sink, message, {SESSION_HEADER: session.id}, session=session, sink=sink, timeout=deadline - loop.time(), watcher=watcher
            )
        finally:
            watcher.cancel()
            slot.release()
            if session is not None and (answer is None or "result" not in answer.body):
                counters = self.sessions.admission
                if answer is None:
                    counters.abandoned += 1
                elif answer.body.get("error", {}).get("code") == BackendTimeout.code:
                    counters.handshake_timeouts += 1
                await session.close("initialize did not succeed" if answer is not None else "the client left during initialize")

    async def _create(self, watcher: asyncio.Future, principal: Principal | None, message: Message) -> ClientSession | None:
        """A new session, or None if the client left (``watcher`` done) while it was made."""
        loop = asyncio.get_running_loop()

        def left(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # the guard has expired already
                guard.reschedule(loop.time())

        try:
            async with asyncio.timeout(None) as guard:
                watcher.add_done_callback(left)
                try:
                    return await self.sessions.create(lambda: self.backends.open_session(Era.HANDSHAKE), owner=_owner(principal))
                finally:
                    watcher.remove_done_callback(left)
        except ChannelClosed as exc:
            raise UnavailableError(f"backend unavailable: {exc.reason}", reason="start_failed", request_id=message.id) from None
        except TimeoutError:
            if not watcher.done():
                raise
            self.sessions.admission.abandoned += 1
            return None

    # -- the modern era and stateless exchanges -----------------------------------
    async def _modern(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers, message: Message) -> None:
        if message.is_response():
            raise InvalidRequest("a 2026-07-28 client must not POST a response")
        if message.is_notification():
            # No client→server notification exists in this era over HTTP; forwarding a
            # raw cancel onto a shared backend could cancel another client's work.
            await hu.send_empty(send, 202)
            return
        _check_modern_headers(headers, message)
        await self._exchange(receive, send, message, Era.MODERN, modern=True)

    async def _exchange(self, receive: hu.Receive, send: hu.Send, message: Message, era: Era, *, modern: bool) -> None:
        try:
            channel = await self.backends.open_exchange(era)
        except ChannelClosed as exc:
            raise UnavailableError(f"backend unavailable: {exc.reason}", reason="start_failed", request_id=message.id) from None
        try:
            await channel.send(message)
            if message.is_request():
                await self._respond(receive, send, channel, message, None, modern=modern)
            else:
                await hu.send_empty(send, 202)
        except ChannelClosed as exc:
            raise UnavailableError(f"backend unavailable: {exc.reason}", reason="backend_closed", request_id=message.id) from None
        finally:
            await channel.aclose()

    # -- writing one response -------------------------------------------------------
    async def _respond(
        self,
        receive: hu.Receive,
        send: hu.Send,
        source: Source,
        request: Message,
        headers: dict[str, str] | None,
        *,
        modern: bool = False,
        session: ClientSession | None = None,
        sink: Sink | None = None,
        timeout: float | None = None,
        watcher: asyncio.Future | None = None,
    ) -> Message | None:
        """Wait for the backend's answer to ``request`` and write it: JSON, or SSE if
        other messages come first; return the answer written (None if none was).
        Waits park on a future, not a task (inbox.py).

        Modern exchanges watch for the client leaving (that is their cancellation);
        handshake-era writers do not, because there a disconnect is not a cancel and
        the stream stays resumable. A caller passing its own ``watcher`` handles the
        client leaving itself. A session sink's writer runs under a guard its sink
        expires on overflow (http_session.py), even while ``send`` is blocked."""
        loop = asyncio.get_running_loop()
        if timeout is None:  # a listen stream is open-ended by design; everything else has a deadline
            timeout = self.options.request_timeout if request.method != "subscriptions/listen" else 10.0**9
        deadline = loop.time() + timeout
        caller_watches = watcher is not None
        own_watcher = not caller_watches and (modern or sink is None)
        if own_watcher:
            watcher = asyncio.ensure_future(hu.wait_disconnect(receive))
        if watcher is not None:
            watcher.add_done_callback(lambda _: source.interrupt(Interrupted()))
        generation = sink.generation if sink is not None else 0
        streaming = False
        answer: Message | None = None
        try:
            async with asyncio.timeout(None) if sink is not None else contextlib.nullcontext() as guard:
                if sink is not None:
                    sink.guard = guard
                try:
                    while True:
                        if sink is not None and sink.generation != generation:
                            return None  # the client resumed this stream on another response
                        remaining = deadline - loop.time()
                        try:
                            message = await source.receive(min(self.options.keepalive, remaining) if streaming else remaining)
                        except TimeoutError:
                            if loop.time() < deadline:
                                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                                continue
                            message = await self._timed_out(request, session, sink, timeout)
                        except HandedOver:
                            return None
                        except Interrupted:
                            if not caller_watches:
                                self._client_gone(session, sink)
                            return None
                        if sink is not None and sink.generation != generation:
                            sink.give_back(message)  # the stream was resumed elsewhere
                            return None
                        final = message.is_response()
                        if final and not streaming:
                            status = _modern_status(message) if modern else 200
                            await hu.send_json(send, status, message.encode(), headers)
                            answer = message
                            break
                        if not streaming:
                            await hu.start_sse(send, headers)
                            streaming = True
                        data = message.encode()
                        event_id = session.record(sink, data) if session is not None and sink is not None else None
                        await send({"type": "http.response.body", "body": encode_event(data, event_id=event_id), "more_body": not final})
                        if final:
                            answer = message
                            break
                finally:
                    if sink is not None:
                        sink.guard = None
            if session is not None and sink is not None:
                session.finish_post(sink)
            return answer
        except ChannelClosed as exc:
            err = UnavailableError(f"backend unavailable: {exc.reason}", reason="backend_closed")
            if streaming:
                await send({"type": "http.response.body", "body": encode_event(err.to_response(request.id).encode()), "more_body": False})
            else:
                await hu.send_error(send, err, request.id, headers, status=200)
            return None
        except (StreamOverflow, TimeoutError):
            if sink is None or not sink.overflowed:
                raise
            err = UnavailableError("response stream closed: the client did not read it; the request was cancelled", reason="stream_overflow")
            await _last_words(send, err.to_response(request.id).encode(), streaming, headers)
            return None
        finally:
            if own_watcher and watcher is not None:
                watcher.cancel()

    async def _timed_out(self, request: Message, session: ClientSession | None, sink: Sink | None, seconds: float) -> Message:
        cancel = notification("notifications/cancelled", {"requestId": request.id, "reason": "timeout"})
        if session is not None:
            with contextlib.suppress(ChannelClosed):
                await session.send(cancel)
            if sink is not None:
                session.finish_post(sink)
        # a stateless exchange is cancelled by closing its channel (done by the caller)
        if request.method == "initialize":  # ``seconds`` is what was left of the handshake's time
            seconds = min(self.sessions.handshake_timeout, self.options.request_timeout)
        what = "initialize" if request.method == "initialize" else "the request"
        return BackendTimeout(f"the backend did not answer {what} within {seconds:g} s").to_response(request.id)

    def _client_gone(self, session: ClientSession | None, sink: Sink | None) -> None:
        if session is not None and sink is not None:
            # Handshake era: a disconnect is not a cancellation; keep the stream for
            # resumption with Last-Event-ID. Modern exchanges are cancelled by the
            # caller closing the exchange channel.
            sink.attached = False
            session.streams[sink.stream_no] = sink
            while len(session.streams) > 256:
                session.streams.pop(next(iter(session.streams)))

    # -- GET / DELETE (handshake era) -------------------------------------------------
    async def _get(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers, principal: Principal | None) -> None:
        session = self._session_for(headers, principal)
        if "text/event-stream" not in (headers.get(b"accept") or ""):
            raise NotAcceptable("GET requires Accept: text/event-stream")
        replayed: list[tuple[str, bytes]] = []
        last = headers.get(b"last-event-id")
        sink: Sink | None = None
        standalone = True
        if last is not None:
            found = session.replay(last)
            if found is not None:
                replayed, sink = found
                standalone = sink is None
        if sink is None:
            sink = session.open_get()
        await hu.start_sse(send, {SESSION_HEADER: session.id})
        for event_id, data in replayed:
            await send({"type": "http.response.body", "body": encode_event(data, event_id=event_id), "more_body": True})
        watcher = asyncio.ensure_future(hu.wait_disconnect(receive))
        watcher.add_done_callback(lambda _: sink.interrupt(Interrupted()))
        generation = sink.generation
        try:
            async with asyncio.timeout(None) as guard:
                sink.guard = guard
                try:
                    while sink.generation == generation:
                        try:
                            message = await sink.receive(self.options.keepalive)
                        except TimeoutError:
                            await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                            continue
                        except (Interrupted, HandedOver):
                            break
                        if sink.generation != generation:
                            sink.give_back(message)
                            return
                        if is_end(message):
                            break
                        final = not standalone and message.is_response()
                        data = message.encode()
                        await send({"type": "http.response.body", "body": encode_event(data, event_id=session.record(sink, data)), "more_body": not final})
                        if final:
                            session.finish_post(sink)
                            return
                finally:
                    sink.guard = None
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except (StreamOverflow, TimeoutError):
            if not sink.overflowed:
                raise
            await _last_words(send, None, True, None)
        finally:
            watcher.cancel()
            if sink.generation == generation:
                if standalone:
                    session.close_get(sink)
                elif sink.request_id in session.posts:
                    self._client_gone(session, sink)

    async def _delete(self, send: hu.Send, headers: hu.Headers, principal: Principal | None) -> None:
        session = self._session_for(headers, principal)
        await session.close("client ended the session (DELETE)")
        await hu.send_empty(send, 200)

    def _session_for(self, headers: hu.Headers, principal: Principal | None) -> ClientSession:
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            raise SessionRequired("Bad Request: Missing session ID")
        session = self.sessions.get(session_id, _owner(principal))
        if session is None:
            raise SessionNotFound("Session not found")
        return session


async def _last_words(send: hu.Send, error: bytes | None, streaming: bool, headers: dict[str, str] | None) -> None:
    """End a cut-off response: a last error (event) if the client's socket takes it within
    CUT_GRACE seconds; otherwise return unfinished, and the server drops the connection."""
    try:
        async with asyncio.timeout(CUT_GRACE):
            if not streaming:
                await hu.send_json(send, 200, error or b"", headers)
            elif error is not None:
                await send({"type": "http.response.body", "body": encode_event(error), "more_body": False})
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
    except TimeoutError:
        log.debug("a cut-off stream's client did not take its last event; dropping the connection")


def _owner(principal: Principal | None) -> tuple[str | None, str] | None:
    """What a session is bound to: the principal's key (None without authentication)."""
    return None if principal is None else principal.key


def _modern_status(message: Message) -> int:
    err = message.body.get("error")
    return MODERN_STATUS.get(err.get("code"), 200) if isinstance(err, dict) else 200


def _check_modern_headers(headers: hu.Headers, message: Message) -> None:
    """2026-07-28 routing headers must mirror the body (-32020), and _meta must name the version."""
    method = message.method
    if headers.get(b"mcp-method") != method:
        raise HeaderMismatch("Mcp-Method header missing or different from the body's method", request_id=message.id)
    param = NAME_HEADER_PARAM.get(method or "")
    if param is not None:
        name = headers.get(b"mcp-name")
        if name is None or decode_header_value(name) != str(message.params.get(param)):
            raise HeaderMismatch(f"Mcp-Name header missing or different from params.{param}", request_id=message.id)
    version = message.meta.get(META_PROTOCOL_VERSION)
    if version is None:
        raise InvalidParams(f"params._meta must carry {META_PROTOCOL_VERSION}", request_id=message.id)
    if version != headers.get(b"mcp-protocol-version"):
        raise HeaderMismatch("MCP-Protocol-Version header differs from params._meta", request_id=message.id)
