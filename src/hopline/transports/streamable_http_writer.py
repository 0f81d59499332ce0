"""How the Streamable HTTP listener writes a response: one answer as JSON or an SSE
stream, and the handshake era's standalone GET stream with ``Last-Event-ID`` resumption.

A mixin of :class:`~hopline.transports.streamable_http_server.StreamableHttpListener`,
kept apart so the listener's routing reads on its own (and each stays one sitting).

Every wait parks on a future, not a task (inbox.py), and the client leaving is a callback
from the front door where it can give one (``http_util.on_disconnect``), else a task. An
answer that comes first is written as one JSON body. A response that becomes an SSE stream
is written under an ``asyncio.timeout`` guard that the sink (or a stateless exchange's
inbox) expires when its buffer overflows (http_session.py), because a client that does not
read blocks ``send`` itself; before the stream starts an overflow wakes the wait instead.
The cut stream then ends with a last error event if the client's socket takes it within
``CUT_GRACE`` seconds, else the writer returns unfinished and the server drops the
connection.

Each response moves through the state table of response_state.py (waiting → JSON sent |
streaming → done | cut | resumed elsewhere); a move off its edges raises. Its deadline is
the exchange's one (``request.deadline``, made by the listener as the request arrived),
not one of the writer's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Protocol

from hopline.context import Principal
from hopline.jsonrpc import BackendTimeout, Message, NotAcceptable, UnavailableError, notification
from hopline.layers.transport.channel import ChannelClosed, Source
from hopline.layers.transport.inbox import Interrupted
from hopline.transports import http_util as hu
from hopline.transports.admission import StreamOverflow
from hopline.transports.http_session import ClientSession, is_end
from hopline.transports.response_state import (
    CUT,
    DONE,
    JSON_SENT,
    RESUMED,
    STREAMING,
    WAITING,
    ResponseState,
    move,
)
from hopline.transports.session_table import SessionTable
from hopline.transports.sink import HandedOver, Sink
from hopline.transports.sse import KEEPALIVE, encode_event
from hopline.layers.transport.loop import running_loop

log = logging.getLogger("hopline.http")

MODERN_STATUS = {-32601: 404, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32600: 400, -32700: 400}
SESSION_HEADER = "mcp-session-id"
CUT_GRACE = 1.0  # seconds a cut-off stream's last event may take to leave


class WriterOptions(Protocol):
    """The listener's options read here (``streamable_http_server.ListenerOptions`` has them)."""

    request_timeout: float  # seconds an answer may take
    keepalive: float  # seconds between SSE keep-alive comments


class ResponseWriter:
    """Mixin: writing responses and the GET stream (see the module docstring)."""

    if TYPE_CHECKING:  # provided by StreamableHttpListener
        sessions: SessionTable
        options: WriterOptions

        async def _session_for(self, headers: hu.Headers, principal: Principal | None) -> ClientSession: ...  # noqa: E704

    # -- writing one response -------------------------------------------------------
    async def _respond(
        self,
        receive: hu.Receive,
        send: hu.Send,
        source: Source,
        request: Message,
        headers: dict[str, str] | None,
        fast: hu.FastPath | None = None,
        *,
        modern: bool = False,
        session: ClientSession | None = None,
        sink: Sink | None = None,
        timeout: float | None = None,
        watcher: asyncio.Future | None = None,
        sse: bool = False,
    ) -> Message | None:
        """Wait for the backend's answer to ``request`` and write it: JSON, or SSE if
        other messages come first or the client takes only SSE (``sse``: its Accept names
        text/event-stream but not JSON); return the answer written (None if none was).
        Waits park on a future, not a task (inbox.py).

        Modern exchanges watch for the client leaving (that is their cancellation);
        handshake-era writers do not, because there a disconnect is not a cancel and
        the stream stays resumable. A caller passing its own ``watcher`` handles the
        client leaving itself. A stream (SSE) is written under a guard its sink expires on
        overflow (http_session.py), even while ``send`` is blocked; the JSON answer needs none.
        The deadline is the exchange's (``request.deadline``, the listener's); ``timeout`` only
        names the seconds in the timeout error, and makes a deadline where the request has none."""
        # ``fast``: the server's declared side door (http_util.FastPath), None on a plain ASGI server.
        loop = fast.loop if fast is not None else running_loop()  # (no running_loop() look-up per request)
        if timeout is None:  # a listen stream is open-ended by design; everything else has a deadline
            timeout = self.options.request_timeout if request.method != "subscriptions/listen" else 10.0**9
        deadline = request.deadline
        if deadline is None:
            deadline = loop.time() + timeout
        caller_watches = watcher is not None
        unwatch = None
        if not caller_watches and (modern or sink is None):  # we watch for the client leaving ourselves
            unwatch = hu.on_disconnect(fast, lambda: source.interrupt(Interrupted()))
            if unwatch is None:  # a server that cannot tell us: a task parked in receive()
                watcher = asyncio.ensure_future(hu.wait_disconnect(receive))
        if watcher is not None:
            watcher.add_done_callback(lambda _: source.interrupt(Interrupted()))
        own_watcher = watcher is not None and not caller_watches
        generation = sink.generation if sink is not None else 0
        state = WAITING  # response_state.py's table
        answer: Message | None = None
        guard: asyncio.Timeout | None = None
        # A stateless exchange's channel (2026-07-28, or --stateless-http) has an inbox of its
        # own: bound it by the same message count, and let its overflow cut this writer too.
        inbox = None
        if sink is None:
            try:  # (an attribute look-up rather than getattr() with a default: one Python call fewer)
                inbox = source.buffer  # type: ignore[attr-defined]
            except AttributeError:
                pass
        if inbox is not None:
            inbox.limit = self.sessions.stream_limits.messages

            def overflowed() -> None:  # wake the writer: blocked in send (its guard), or waiting
                if guard is not None:
                    guard.reschedule(loop.time())
                else:
                    inbox.interrupt(StreamOverflow())

            inbox.on_overflow = overflowed
        try:
            # The first message, with no guard: nothing is being written yet, so an overflow
            # wakes the wait itself (the sink's or inbox's interrupt). An answer that comes
            # first is the whole response, one JSON body: no asyncio.timeout context for it
            # (bench/profile_call.py: one per request fewer).
            # >> inlined copy of _next's first wait (bench/profile_call.py: its coroutine costs two
            # calls when the answer comes, its loop look-up three); what ends the wait otherwise,
            # _next handles. Held to _next by tests/transports/test_inlined_equivalence.py.
            try:
                message = await source.receive(deadline - loop.time())
            except (TimeoutError, HandedOver, Interrupted) as exc:
                message = await self._next(
                    source, request, session, sink, generation, deadline, timeout, False, send, caller_watches,
                    loop, exc,
                )  # fmt: skip
            else:
                if sink is not None and sink.generation != generation:
                    sink.give_back(message)  # the stream was resumed elsewhere
                    message = None
            # << end of the copy of _next's first wait
            if message is None:
                state = move(state, _stopped(sink, generation))
                return None
            if "error" in message.body and headers is not None and request.method == "initialize":
                headers = None  # a failed initialize leaves no session (its id would name a closed one)
            if message.is_response() and not sse:
                status = _modern_status(message) if modern and "error" in message.body else 200
                state = move(state, JSON_SENT)
                await hu.send_bytes(send, status, message.encode(), b"application/json", headers, fast)  # send_json's
                answer = message
            else:  # something else first: the response becomes an SSE stream, written under a guard
                async with asyncio.timeout(None) as guard:
                    if sink is not None:
                        sink.guard = guard
                    try:
                        await hu.start_sse(send, headers)
                        state = move(state, STREAMING)
                        while True:
                            final = message.is_response()
                            data = message.encode()
                            event_id = session.record(sink, data) if session is not None and sink is not None else None
                            await send(
                                {
                                    "type": "http.response.body",
                                    "body": encode_event(data, event_id=event_id),
                                    "more_body": not final,
                                }
                            )
                            if final:
                                state = move(state, DONE)
                                answer = message
                                break
                            message = await self._next(
                                source,
                                request,
                                session,
                                sink,
                                generation,
                                deadline,
                                timeout,
                                True,
                                send,
                                caller_watches,
                                loop,
                            )
                            if message is None:
                                state = move(state, _stopped(sink, generation))
                                return None
                    finally:
                        if sink is not None:
                            sink.guard = None
            if session is not None and sink is not None:
                session.finish_post(sink)
            return answer
        except ChannelClosed as exc:
            err = UnavailableError(f"backend unavailable: {exc.reason}", reason="backend_closed")
            if state is STREAMING:
                state = move(state, CUT)
                await send(
                    {
                        "type": "http.response.body",
                        "body": encode_event(err.to_response(request.id).encode()),
                        "more_body": False,
                    }
                )
            else:
                state = move(state, JSON_SENT)  # the error is the answer
                await hu.send_error(send, err, request.id, headers, status=200, fast=fast)
            return None
        except (StreamOverflow, TimeoutError):
            if not (sink.overflowed if sink is not None else inbox is not None and inbox.overflowed):
                raise
            if state is DONE:  # the overflow came as the stream's last event left: nothing was cut
                return answer
            if sink is None:
                self.sessions.admission.overflows += 1
                log.warning(
                    "a stateless exchange's stream was cut off: its client did not read it (request %r cancelled)",
                    request.id,
                )
            err = UnavailableError(
                "response stream closed: the client did not read it; the request was cancelled",
                reason="stream_overflow",
            )
            streaming = state is STREAMING
            state = move(state, CUT)
            await _last_words(send, err.to_response(request.id).encode(), streaming, headers)
            return None
        finally:
            if unwatch is not None:
                unwatch()
            elif own_watcher:
                watcher.cancel()  # type: ignore[union-attr]

    async def _next(
        self, source: Source, request: Message, session: ClientSession | None, sink: Sink | None, generation: int,
        deadline: float, timeout: float, streaming: bool, send: hu.Send, caller_watches: bool,
        loop: asyncio.AbstractEventLoop, failed: BaseException | None = None,
    ) -> Message | None:  # fmt: skip
        """The next message for this response (a timeout error at the deadline), keep-alive
        comments meanwhile while streaming; None when the writer must stop without one
        (the stream was resumed elsewhere, or the client left). ``failed``: what ended the
        caller's own wait (TimeoutError, HandedOver, Interrupted), handled as if this one's."""
        while True:
            if failed is None:
                if sink is not None and sink.generation != generation:
                    return None  # the client resumed this stream on another response
                remaining = deadline - loop.time()
                try:
                    message = await source.receive(min(self.options.keepalive, remaining) if streaming else remaining)
                except (TimeoutError, HandedOver, Interrupted) as exc:
                    failed = exc
            if failed is not None:
                exc, failed = failed, None
                if isinstance(exc, TimeoutError):
                    if loop.time() < deadline:
                        await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                        continue
                    message = await self._timed_out(request, session, sink, timeout)
                elif isinstance(exc, HandedOver):
                    return None
                else:  # Interrupted: the client left
                    if not caller_watches:
                        self._client_gone(session, sink)
                    return None
            if sink is not None and sink.generation != generation:
                sink.give_back(message)  # the stream was resumed elsewhere
                return None
            return message

    async def _timed_out(
        self, request: Message, session: ClientSession | None, sink: Sink | None, seconds: float
    ) -> Message:
        cancel = notification("notifications/cancelled", {"requestId": request.id, "reason": "timeout"})
        if session is not None:
            if request.method != "initialize":  # never cancelled (MCP); its session is closed instead
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

    # -- the GET stream (handshake era) ----------------------------------------------------
    async def _get(self, receive: hu.Receive, send: hu.Send, headers: hu.Headers, principal: Principal | None) -> None:
        session = await self._session_for(headers, principal)
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
                        await send(
                            {
                                "type": "http.response.body",
                                "body": encode_event(data, event_id=session.record(sink, data)),
                                "more_body": not final,
                            }
                        )
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


def _stopped(sink: Sink | None, generation: int) -> ResponseState:
    """Why a writer stopped without a message: its stream resumed on another response, or its client left."""
    return RESUMED if sink is not None and sink.generation != generation else CUT


def _modern_status(message: Message) -> int:
    err = message.body.get("error")
    return MODERN_STATUS.get(err.get("code"), 200) if isinstance(err, dict) else 200
