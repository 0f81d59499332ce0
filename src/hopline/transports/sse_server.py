"""The legacy HTTP+SSE listener (MCP 2024-11-05), for clients that predate Streamable HTTP.

``GET /sse`` opens a session: the first event is ``endpoint`` naming the POST URL
(``/messages?session_id=…``, a hopline-minted id); every message from the backend,
responses included, then travels on that stream as a ``message`` event. ``POST
/messages?session_id=…`` forwards one message and answers 202. The stream is the
session: when it closes, the backend session ends.

The caller's principal (authentication ran before, in transports/app.py; None without
it) owns the session the stream opens: a POST naming that session from anyone else
is answered like one naming an unknown session.

Bounds (admission.py): opening the stream holds an admission slot until the session
exists (503 with ``Retry-After`` past ``max_pending``/``max_sessions``, a 502 error if
the backend does not start within ``handshake_timeout``); a stream whose buffer
overflows (its client does not read) is cut off, and with it the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import parse_qs

from hopline.binding import Era
from hopline.jsonrpc import HoplineError, NotAcceptable, SessionNotFound, SessionRequired, UnavailableError, parse
from hopline.context import Principal
from hopline.transports import http_util as hu
from hopline.layers.transport.channel import Backends, ChannelClosed
from hopline.transports.admission import StreamOverflow
from hopline.transports.http_session import is_end
from hopline.transports.session_table import SessionTable
from hopline.layers.transport.inbox import Interrupted
from hopline.transports.sse import KEEPALIVE, encode_event


CUT_GRACE = 1.0  # seconds a cut-off stream's end may take to leave


class SseListener:
    def __init__(
        self,
        backends: Backends,
        sessions: SessionTable,
        *,
        messages_path: str = "/messages",
        max_body: int = hu.DEFAULT_MAX_BODY,
        keepalive: float = 15.0,
    ) -> None:
        self.backends = backends
        self.sessions = sessions
        self.messages_path = messages_path
        self.max_body = max_body
        self.keepalive = keepalive

    async def stream(
        self,
        scope: hu.Scope,
        receive: hu.Receive,
        send: hu.Send,
        headers: hu.Headers,
        principal: Principal | None = None,
    ) -> None:
        if scope["method"] != "GET":
            await hu.send_error(
                send, HoplineError("use GET to open the SSE stream"), status=405, headers={"allow": "GET"}
            )
            return
        accept = headers.get(b"accept")
        if accept is not None and "text/event-stream" not in accept and "*/*" not in accept:
            await hu.send_error(send, NotAcceptable("Accept must include text/event-stream"))
            return
        try:
            with self.sessions.admit():
                owner = None if principal is None else principal.key
                session = await self.sessions.create(
                    lambda: self.backends.open_session(Era.HANDSHAKE), stream_all=True, owner=owner
                )
        except HoplineError as exc:  # Overloaded: 503 with Retry-After
            await hu.send_error(send, exc)
            return
        except ChannelClosed as exc:
            await hu.send_error(
                send, UnavailableError(f"backend unavailable: {exc.reason}", reason="start_failed"), status=502
            )
            return
        sink = session.open_get()
        root = scope.get("root_path", "")
        await hu.start_sse(send)
        endpoint = f"{root}{self.messages_path}?session_id={session.id}".encode()
        await send({"type": "http.response.body", "body": encode_event(endpoint, event="endpoint"), "more_body": True})
        watcher = asyncio.ensure_future(hu.wait_disconnect(receive))
        watcher.add_done_callback(lambda _: sink.interrupt(Interrupted()))
        try:
            async with asyncio.timeout(None) as guard:
                sink.guard = guard  # expired by the sink when it overflows, even while send blocks
                try:
                    while True:
                        try:
                            message = await sink.receive(self.keepalive)
                        except TimeoutError:
                            await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                            continue
                        except Interrupted:
                            break
                        if is_end(message):
                            await send({"type": "http.response.body", "body": b"", "more_body": False})
                            break
                        await send(
                            {"type": "http.response.body", "body": encode_event(message.encode()), "more_body": True}
                        )
                finally:
                    sink.guard = None
        except (StreamOverflow, TimeoutError):
            if not sink.overflowed:
                raise
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CUT_GRACE):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            await session.close("SSE stream closed")

    async def post(
        self,
        scope: hu.Scope,
        receive: hu.Receive,
        send: hu.Send,
        headers: hu.Headers,
        principal: Principal | None = None,
    ) -> None:
        try:
            if scope["method"] != "POST":
                await hu.send_error(
                    send, HoplineError("use POST to send a message"), status=405, headers={"allow": "POST"}
                )
                return
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            session_id = (query.get("session_id") or query.get("sessionId") or [None])[0]
            if session_id is None:
                raise SessionRequired("session_id is required")
            session = self.sessions.get(session_id, None if principal is None else principal.key)
            if session is None:
                raise SessionNotFound("Could not find session")
            message = parse(await hu.read_body(receive, headers, self.max_body, hu.fastpath(scope)))
            if principal is not None:
                message.principal = principal
            try:
                await session.send(message)
            except ChannelClosed as exc:
                raise SessionNotFound(f"Session ended: {exc.reason}") from None
            await hu.send_bytes(send, 202, b"Accepted", b"text/plain")
        except HoplineError as exc:
            await hu.send_error(send, exc)
        except ConnectionResetError:
            pass
