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
socket takes it within a second, else the connection is dropped: streamable_http_writer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from hopline.binding import (
    HANDSHAKE_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    NAME_HEADER_PARAM,
    Era,
    era_of_version,
)
from hopline.context import Principal
from hopline.header_codec import ParamMaps, decode_header_value, param_problem, param_syntax_problem
from hopline.jsonrpc import (
    BackendTimeout,
    HeaderMismatch,
    HoplineError,
    Id,
    InvalidParams,
    InvalidRequest,
    Message,
    MethodNotAllowed,
    NotAcceptable,
    SessionNotFound,
    SessionRequired,
    UnavailableError,
    UnsupportedMediaType,
    UnsupportedProtocolVersion,
    parse,
)
from hopline.layers.transport.channel import Backends, ChannelClosed
from hopline.transports import http_util as hu
from hopline.transports.admission import Slot
from hopline.transports.http_session import ClientSession
from hopline.transports.session_table import SessionTable
from hopline.transports.shared_sessions import STANDING
from hopline.transports.streamable_http_writer import SESSION_HEADER, ResponseWriter
from hopline.layers.transport.loop import running_loop

log = logging.getLogger("hopline.http")

KNOWN_VERSIONS = frozenset(HANDSHAKE_VERSIONS + MODERN_VERSIONS)
ERAS = {version: era_of_version(version) for version in (None, *KNOWN_VERSIONS)}  # era_of_version's, looked up


@dataclass
class ListenerOptions:
    max_body: int = hu.DEFAULT_MAX_BODY
    request_timeout: float = 300.0
    stateless: bool = False
    keepalive: float = 15.0
    # What this endpoint's server/discover reports (None: a relay, whose backend answers it, and
    # judges the versions too: a 2026-07-28-shaped request at a version hopline does not know is
    # passed through, so that the client learns what the backend supports).
    discover_versions: tuple[str, ...] | None = None


class StreamableHttpListener(ResponseWriter):
    """ASGI handler for one MCP endpoint (mount it at ``/mcp``)."""

    def __init__(self, backends: Backends, sessions: SessionTable, options: ListenerOptions | None = None) -> None:
        self.backends = backends
        self.sessions = sessions
        self.options = options or ListenerOptions()
        self.params = ParamMaps()  # the tools' Mcp-Param-* maps, from the tools/list answers written

    async def __call__(
        self,
        scope: hu.Scope,
        receive: hu.Receive,
        send: hu.Send,
        headers: hu.Headers,
        principal: Principal | None = None,
    ) -> None:
        method = scope["method"]
        era = Era.HANDSHAKE
        fast = hu.fastpath(scope)  # the server's declared side door (hopline's front door), or None
        try:
            version = headers.get(b"mcp-protocol-version")
            if version is not None and version not in KNOWN_VERSIONS:  # a known one has no spaces to trim
                version = version.strip(" \t")  # RFC 9110 §5.5: OWS is not part of the value
                if version not in KNOWN_VERSIONS:
                    passed = await self._unsupported(receive, headers, version, method)
                    if principal is not None:
                        passed.principal = principal
                    self._deadline(passed, fast)
                    return await self._modern(receive, send, headers, passed, fast)
            era = ERAS[version]
            if method == "POST":
                # The POST itself, inline rather than a coroutine of its own (bench/profile_call.py:
                # every coroutine on the stack costs a call when the response's wait resumes).
                # Content-Type and Accept are read as sent first, parsed only if that fails.
                ctype = headers.get(b"content-type") or ""
                if ctype != "application/json" and not _is_json_type(ctype):
                    raise UnsupportedMediaType("Unsupported Media Type: Content-Type must be application/json")
                accept = headers.get(b"accept") or "*/*"
                sse = False  # the client takes SSE but not JSON: even a lone answer is an SSE stream
                if "application/json" not in accept:
                    accept = accept.lower()
                    if not ("application/json" in accept or "*/*" in accept or "application/*" in accept):
                        if "text/event-stream" not in accept and "text/*" not in accept:
                            raise NotAcceptable("Accept must include application/json and text/event-stream")
                        sse = True
                message = parse(await hu.read_body(receive, headers, self.options.max_body, fast))
                if principal is not None:
                    message.principal = principal
                # The exchange's one deadline, made here as it arrives: the writer, the gateway's
                # context (so the pipeline's timeouts and the RPC peer) read it.
                # >> inlined copy of _deadline (a Python call per request fewer); test_inlined_equivalence.py
                mname = message.method
                if mname != "subscriptions/listen":  # a listen stream is open-ended by design
                    message.deadline = (fast.loop if fast is not None else running_loop()).time() + (
                        self.options.request_timeout
                        if mname != "initialize"
                        else min(self.sessions.handshake_timeout, self.options.request_timeout)
                    )
                # << end of the copy of _deadline
                if era is Era.MODERN:
                    # >> inlined copy of _modern (one coroutine fewer); test_inlined_equivalence.py
                    if _modern_request(headers, message, self.params):
                        answer = await self._exchange(receive, send, message, Era.MODERN, fast, modern=True, sse=sse)
                        if message.method == "tools/list" and answer is not None:
                            self.params.learn(answer.body.get("result"))
                    else:
                        await hu.send_empty(send, 202, None, fast)
                    # << end of the copy of _modern
                elif self.options.stateless:
                    await self._exchange(receive, send, message, Era.HANDSHAKE, fast, modern=False, sse=sse)
                else:
                    await self._handshake(receive, send, headers, message, principal, fast, sse)
            elif era is Era.MODERN or self.options.stateless or method not in ("GET", "DELETE"):
                raise MethodNotAllowed(f"{method} is not allowed on this endpoint")
            elif method == "GET":
                await self._get(receive, send, headers, principal)
            else:
                await self._delete(send, headers, principal)
        except MethodNotAllowed as exc:
            stateful = era is Era.HANDSHAKE and not self.options.stateless
            await hu.send_error(send, exc, headers={"allow": "GET, POST, DELETE" if stateful else "POST"}, fast=fast)
        except HoplineError as exc:
            await hu.send_error(send, exc, fast=fast)
        except ConnectionResetError:
            pass

    def _deadline(self, message: Message, fast: hu.FastPath | None) -> None:
        """Put the exchange's one deadline on ``message`` as it arrives (``listen.request_timeout``
        from now; an ``initialize``, the handshake's time if shorter; none for a listen stream)."""
        name = message.method
        if name != "subscriptions/listen":
            seconds = self.options.request_timeout
            if name == "initialize":
                seconds = min(self.sessions.handshake_timeout, seconds)
            message.deadline = (fast.loop if fast is not None else running_loop()).time() + seconds

    async def _unsupported(self, receive: hu.Receive, headers: hu.Headers, version: str, method: str) -> Message:
        """An unknown ``MCP-Protocol-Version``: -32022 to the request's own id (its body is read,
        within the usual bounds), listing the versions this endpoint's ``server/discover``
        reports to a 2026-07-28 request (all it speaks to anything else). A relay returns a
        request whose ``_meta`` names that same version instead: its backend is the one to judge."""
        request_id = None
        supported = sorted(KNOWN_VERSIONS, reverse=True)
        if method == "POST":
            with contextlib.suppress(HoplineError):
                message = parse(await hu.read_body(receive, headers, self.options.max_body))
                request_id = message.id
                named = message.meta.get(META_PROTOCOL_VERSION)
                if self.options.discover_versions is None:
                    if named == version and message.is_request() and _is_json(headers):
                        return message
                elif named is not None:
                    supported = list(self.options.discover_versions)
        raise UnsupportedProtocolVersion(
            f"Unsupported protocol version: {version[:40]}",
            data={"supported": supported, "requested": version[:40]},
            request_id=request_id,
        )

    # -- POST (its checks and body: __call__) --------------------------------------
    async def _handshake(
        self,
        receive: hu.Receive,
        send: hu.Send,
        headers: hu.Headers,
        message: Message,
        principal: Principal | None,
        fast: hu.FastPath | None = None,
        sse: bool = False,
    ) -> None:
        session_id = headers.get(b"mcp-session-id")
        if message.method == "initialize" and message.is_request():
            with self.sessions.admit(message.id) as slot:  # Overloaded (503) past the bounds
                await self._initialize(receive, send, message, principal, slot, fast, sse)
            return
        if session_id is None:
            raise SessionRequired("Bad Request: Missing session ID", request_id=message.id)
        session = self.sessions.get(session_id, None if principal is None else principal.key)  # _owner's
        if session is None:
            session = await self._resume(session_id, principal, message.id)
        if not message.is_request():
            try:
                await session.send(message)
            except ChannelClosed as exc:
                raise SessionNotFound(f"Session ended: {exc.reason}") from None
            await hu.send_empty(send, 202, None, fast)
            return
        if message.method in STANDING:
            await self.sessions.remember(session, message)
        sink = session.open_post(message)  # (it marks the session active: session.send's work but the backend's)
        try:
            await session.backend.send(message)
        except ChannelClosed as exc:
            session.finish_post(sink)
            raise UnavailableError(
                f"backend unavailable: {exc.reason}", reason="backend_closed", request_id=message.id
            ) from None
        extra = {SESSION_HEADER: session.id}
        await self._respond(receive, send, sink, message, extra, fast, session=session, sink=sink, sse=sse)

    async def _initialize(
        self,
        receive: hu.Receive,
        send: hu.Send,
        message: Message,
        principal: Principal | None,
        slot: Slot,
        fast: hu.FastPath | None = None,
        sse: bool = False,
    ) -> None:
        """Create a session and answer its ``initialize`` within the handshake deadline (the
        message's: the listener made it as the request arrived). If the client leaves first,
        or the answer is not a result, the session is closed."""
        if message.deadline is None:
            self._deadline(message, fast)
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
                raise UnavailableError(
                    f"backend unavailable: {exc.reason}", reason="start_failed", request_id=message.id
                ) from None
            answer = await self._respond(
                receive,
                send,
                sink,
                message,
                {SESSION_HEADER: session.id},
                fast,
                session=session,
                sink=sink,
                watcher=watcher,
                sse=sse,
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
                await session.close(
                    "initialize did not succeed" if answer is not None else "the client left during initialize"
                )

    async def _create(
        self, watcher: asyncio.Future, principal: Principal | None, message: Message
    ) -> ClientSession | None:
        """A new session, or None if the client left (``watcher`` done) while it was made."""
        loop = running_loop()

        def left(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # the guard has expired already
                guard.reschedule(loop.time())

        try:
            async with asyncio.timeout(None) as guard:
                watcher.add_done_callback(left)
                try:
                    return await self.sessions.create(
                        lambda: self.backends.open_session(Era.HANDSHAKE),
                        owner=_owner(principal),
                        initialize=message.params,
                    )
                finally:
                    watcher.remove_done_callback(left)
        except ChannelClosed as exc:
            raise UnavailableError(
                f"backend unavailable: {exc.reason}", reason="start_failed", request_id=message.id
            ) from None
        except HoplineError as exc:  # e.g. a backend at its child cap (503): answered to this request's id
            if exc.request_id is None:
                exc.request_id = message.id
            raise
        except TimeoutError:
            if not watcher.done():
                raise
            self.sessions.admission.abandoned += 1
            return None

    # -- the modern era and stateless exchanges -----------------------------------
    async def _modern(
        self, receive: hu.Receive, send: hu.Send, headers: hu.Headers, message: Message, fast: hu.FastPath | None
    ) -> None:
        """A 2026-07-28 message (the POST path in __call__ does the same inline)."""
        if not _modern_request(headers, message, self.params):
            await hu.send_empty(send, 202, None, fast)
            return
        answer = await self._exchange(receive, send, message, Era.MODERN, fast, modern=True)
        if message.method == "tools/list" and answer is not None:
            self.params.learn(answer.body.get("result"))

    async def _exchange(
        self,
        receive: hu.Receive,
        send: hu.Send,
        message: Message,
        era: Era,
        fast: hu.FastPath | None,
        *,
        modern: bool,
        sse: bool = False,
    ) -> Message | None:
        try:
            channel = await self.backends.open_exchange(era)
        except ChannelClosed as exc:
            raise UnavailableError(
                f"backend unavailable: {exc.reason}", reason="start_failed", request_id=message.id
            ) from None
        try:
            await channel.send(message)
            if message.is_request():
                return await self._respond(receive, send, channel, message, None, fast, modern=modern, sse=sse)
            await hu.send_empty(send, 202, None, fast)
            return None
        except ChannelClosed as exc:
            raise UnavailableError(
                f"backend unavailable: {exc.reason}", reason="backend_closed", request_id=message.id
            ) from None
        finally:
            await channel.aclose()

    # -- DELETE (handshake era) ---------------------------------------------------------
    async def _delete(self, send: hu.Send, headers: hu.Headers, principal: Principal | None) -> None:
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            raise SessionRequired("Bad Request: Missing session ID")
        session = self.sessions.get(session_id, _owner(principal))
        if session is not None:
            await self.sessions.end(session)
            await session.close("client ended the session (DELETE)")
        elif not await self.sessions.end_elsewhere(session_id, _owner(principal)):
            raise SessionNotFound("Session not found")
        await hu.send_empty(send, 200)

    async def _session_for(self, headers: hu.Headers, principal: Principal | None) -> ClientSession:
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            raise SessionRequired("Bad Request: Missing session ID")
        return self.sessions.get(session_id, _owner(principal)) or await self._resume(session_id, principal, None)

    async def _resume(self, session_id: str, principal: Principal | None, request_id: Id | None) -> ClientSession:
        """A session this replica does not hold, resumed if another made it (session_table.py)."""
        try:
            session = await self.sessions.resume(
                session_id, _owner(principal), lambda: self.backends.open_session(Era.HANDSHAKE)
            )
        except ChannelClosed as exc:
            raise UnavailableError(
                f"backend unavailable: {exc.reason}", reason="start_failed", request_id=request_id
            ) from None
        except HoplineError as exc:
            if exc.request_id is None:
                exc.request_id = request_id
            raise
        if session is None:
            raise SessionNotFound("Session not found", request_id=request_id)
        return session


def _owner(principal: Principal | None) -> tuple[str | None, str] | None:
    """What a session is bound to: the principal's key (None without authentication)."""
    return None if principal is None else principal.key


def _is_json(headers: hu.Headers) -> bool:
    return _is_json_type(headers.get(b"content-type") or "")


def _is_json_type(ctype: str) -> bool:
    """The media type is ``application/json`` (any case, any parameters; not ``application/jsonp``)."""
    return ctype.partition(";")[0].strip(" \t").lower() == "application/json"


def _modern_request(headers: hu.Headers, message: Message, params: ParamMaps) -> bool:
    """True for a 2026-07-28 request to exchange (its headers checked: _check_modern_headers),
    False for a notification (answered 202, not forwarded); a response is refused."""
    if message.is_response():
        raise InvalidRequest("a 2026-07-28 client must not POST a response")
    if message.is_notification():
        # No client→server notification exists in this era over HTTP; forwarding a
        # raw cancel onto a shared backend could cancel another client's work.
        return False
    _check_modern_headers(headers, message, params)
    return True


def _check_modern_headers(headers: hu.Headers, message: Message, params: ParamMaps | None = None) -> None:
    """2026-07-28 routing headers must mirror the body (-32020), and _meta must name the version and
    the client's capabilities (-32602: both are required on every request, RequestMetaObject).
    ``Mcp-Param-*`` headers: well-formed always; equal to the arguments where ``params`` knows
    the tool (from a tools/list this listener answered); otherwise the backend judges them."""
    # Header values are trimmed of spaces and tabs first (RFC 9110 §5.5: OWS is not part of them).
    method = message.method
    mirrored = headers.get(b"mcp-method")
    if (None if mirrored is None else mirrored.strip(" \t")) != method:
        raise HeaderMismatch("Mcp-Method header missing or different from the body's method", request_id=message.id)
    param = NAME_HEADER_PARAM.get(method or "")
    if param is not None:
        name = headers.get(b"mcp-name")
        if name is None or decode_header_value(name.strip(" \t")) != str(message.params.get(param)):
            raise HeaderMismatch(f"Mcp-Name header missing or different from params.{param}", request_id=message.id)
    version = message.meta.get(META_PROTOCOL_VERSION)
    if version is None:
        raise InvalidParams(f"params._meta must carry {META_PROTOCOL_VERSION}", request_id=message.id)
    mirrored = headers.get(b"mcp-protocol-version")
    if mirrored is None or version != mirrored.strip(" \t"):
        raise HeaderMismatch("MCP-Protocol-Version header differs from params._meta", request_id=message.id)
    if message.meta.get(META_CLIENT_CAPABILITIES).__class__ is not dict:  # required, an object ({}: none)
        raise InvalidParams(f"params._meta must carry {META_CLIENT_CAPABILITIES} (an object)", request_id=message.id)
    if method == "tools/call":
        problem = param_syntax_problem(headers)
        found = params.get(message.params.get("name")) if params is not None and problem is None else None
        if found:
            problem = param_problem(found, message.params.get("arguments"), headers)
        if problem is not None:
            raise HeaderMismatch(problem, request_id=message.id)
