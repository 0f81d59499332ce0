"""One handshake-era client session behind an HTTP listener, and the sessions table.

A :class:`ClientSession` owns one backend channel and one reader task. Every
message the backend sends is put into exactly one :class:`Sink` (one per open
POST, plus the standalone GET stream), chosen by :meth:`ClientSession.route`:

1. a response goes to the POST that carries its id (unknown ids are dropped);
2. ``notifications/progress`` goes to the POST whose request named its token;
3. anything else related to a request (sampling, elicitation, logs) goes to the
   only POST in flight, else to the GET stream, else to the newest POST in flight;
4. with no POST in flight and no GET stream it waits in a bounded backlog that the
   next GET stream drains.

Rule 3 is the relay's honest limit: a protocol-unaware hop cannot know which of
several concurrent requests a log line belongs to. SDK clients read both kinds of
stream, so nothing is lost; a message is never delivered to another session.

A session is bound to its ``owner`` (the key of the principal that created it, None
without authentication): :meth:`SessionTable.get` finds it only for that owner.

Resumability (handshake era, 2025-11-25): each SSE event carries ``<stream>-<seq>``
as its id and is kept in a bounded per-session event log; a GET with
``Last-Event-ID`` replays that stream after the id and continues it. A client
disconnect is not a cancellation in this era, so a POST's sink survives it.

Bounds (admission.py): each sink holds at most ``StreamLimits`` of unread messages; the
backlog and the event log keep at most as many, oldest dropped. A sink that overflows
(its client stopped reading, or left a stream nobody resumes) is *cut off*: its writer
is woken (even from a ``send`` blocked on the client's full socket) and ends the
response; a POST's request is cancelled at the backend (``notifications/cancelled``
with the request's id as this session's backend channel knows it: the client's own)
and its later progress notifications are dropped; a GET stream just ends (the client
may open another); a legacy HTTP+SSE session, whose stream is the session, closes.

Session creation is admitted by the table (:meth:`SessionTable.admit`, a shared
:class:`~hopline.transports.admission.Admission`) and bounded in time
(``handshake_timeout``): a backend that does not start is a clear error, never a hang.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import time
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import Id, Message, UnavailableError, notification
from hopline.layers.transport.channel import Channel, ChannelClosed, Pooled
from hopline.transports.admission import Admission, BoundedLog, Overloaded, Slot, StreamLimits
from hopline.transports.sink import HandedOver, Sink

__all__ = ["ClientSession", "HandedOver", "SessionTable", "Sink", "is_end"]

log = logging.getLogger("hopline.http")

CUT_TOKENS = 64  # progress tokens of cut-off requests remembered, to drop what the backend still sends


class ClientSession:
    """A client's handshake-era session: its backend channel and its open streams."""

    def __init__(
        self,
        session_id: str,
        backend: Channel,
        *,
        on_close: Callable[[ClientSession], None],
        stream_all: bool = False,
        owner: Any = None,
        limits: StreamLimits = StreamLimits(),
        counters: Admission | None = None,
    ) -> None:
        self.id = session_id
        self.owner = owner  # the creating principal's key; nobody else may use this session
        self.stream_all = stream_all  # legacy HTTP+SSE: everything, responses included, on the GET stream
        self.backend = backend
        self.protocol_version: str | None = None
        self.posts: dict[Id, Sink] = {}
        self.progress: dict[Any, Id] = {}
        self.get_sink: Sink | None = None
        if isinstance(backend, Pooled):  # a child's lease: the pool asks whether our client still listens
            backend.listening = self._listening
        self.streams: dict[int, Sink] = {}  # detached POST streams awaiting resumption
        self.limits = limits
        self.counters = counters if counters is not None else Admission()
        self.events: BoundedLog[tuple[int, int, bytes]] = BoundedLog(limits, self.counters)
        self.backlog: BoundedLog[Message] = BoundedLog(limits, self.counters)
        self.cut_tokens: collections.deque[Any] | None = None  # made at the first cut (an empty deque is 624 bytes)
        self.closed_reason: str | None = None
        self.last_active = time.monotonic()
        self._stream_counter = 0
        self._on_close = on_close
        self._reader: asyncio.Task | None = None

    def start(self) -> None:
        self._reader = asyncio.create_task(self._read_backend(), name=f"session-{self.id[:8]}")
        if hasattr(self.backend, "settle"):  # the gateway's ClientEnd: answers may skip its outbox and our reader
            self.backend.settle = self._settle

    def _settle(self, message: Message) -> bool:
        """An answer for a POST whose stream holds nothing yet goes there at once (what the
        reader would do with it); anything else is left to the reader (False).
        Measured with bench/profile_call.py: one task step and an inbox put/get fewer per call."""
        body = message.body
        if self.stream_all or "method" in body:
            return False
        sink = self.posts.get(body.get("id"))  # type: ignore[arg-type]
        if sink is None or not sink.inbox.empty():  # a put on an empty sink never overflows
            return False
        del self.posts[body.get("id")]  # type: ignore[arg-type]
        sink.put(message)
        return True

    def _listening(self) -> bool:
        return self.get_sink is not None and self.get_sink.attached

    # -- client → backend ------------------------------------------------------
    def open_post(self, message: Message) -> Sink:
        self.last_active = time.monotonic()
        self._stream_counter += 1
        sink = Sink(self._stream_counter, message.id, self.limits)
        self.posts[message.id] = sink
        token = message.meta.get("progressToken")
        if token is not None:
            self.progress[token] = message.id
        return sink

    def finish_post(self, sink: Sink) -> None:
        if self.posts.get(sink.request_id) is sink:
            del self.posts[sink.request_id]
        self._forget_progress(sink.request_id)
        self.streams.pop(sink.stream_no, None)

    def _forget_progress(self, request_id: Id | None) -> None:
        for token in [t for t, rid in self.progress.items() if rid == request_id]:
            del self.progress[token]

    async def send(self, message: Message) -> None:
        self.last_active = time.monotonic()
        await self.backend.send(message)

    def open_get(self) -> Sink:
        """The standalone stream. A second GET takes it over from the first, which
        ends: a client reconnecting before we noticed its old connection drop must
        not be locked out (test-battery F8), and only one stream ever receives."""
        if self.get_sink is not None and self.get_sink.attached:
            self.get_sink.take_over()
            return self.get_sink
        self._stream_counter += 1
        sink = Sink(self._stream_counter, None, self.limits)
        self.get_sink = sink
        while self.backlog:
            if sink.put(self.backlog.popleft()):
                self.cut(sink)
                break
        return sink

    def close_get(self, sink: Sink) -> None:
        sink.attached = False
        if self.get_sink is sink:
            self.get_sink = None
            while not sink.inbox.empty():  # undelivered: keep for the next GET
                message = sink.inbox.get_nowait()
                self.backlog.append(message, len(message.encode()))

    def record(self, sink: Sink, data: bytes) -> str:
        event_id = sink.next_event_id()
        self.events.append((sink.stream_no, sink.seq, data), len(data))
        return event_id

    def cut(self, sink: Sink) -> Message | None:
        """Forget a sink that overflowed; the cancellation to send the backend, if any."""
        self.counters.overflows += 1
        limits = self.limits
        what = "session %s: stream %d cut off: its client left over %d messages or %d bytes unread"
        log.warning(what, self.id[:8], sink.stream_no, limits.messages, limits.bytes)
        sink.attached = False
        if sink is self.get_sink:
            self.get_sink = None
            return None
        if sink.request_id is None:
            return None
        if self.cut_tokens is None:
            self.cut_tokens = collections.deque(maxlen=CUT_TOKENS)
        self.cut_tokens.extend(t for t, rid in self.progress.items() if rid == sink.request_id)
        self.finish_post(sink)
        return notification(
            "notifications/cancelled",
            {"requestId": sink.request_id, "reason": "the client did not read its response stream"},
        )

    def replay(self, last_event_id: str) -> tuple[list[tuple[str, bytes]], Sink | None] | None:
        """Events after ``last_event_id`` and the sink to continue with, or None if unknown."""
        stream, _, seq = last_event_id.partition("-")
        if not (stream.isdigit() and seq.isdigit()):
            return None
        stream_no, after = int(stream), int(seq)
        sink = self.streams.pop(stream_no, None)
        if sink is None:
            # The POST's writer may not have noticed its client left yet: take the stream over.
            sink = next((p for p in self.posts.values() if p.stream_no == stream_no), None)
        if sink is not None:
            sink.take_over()
        events = [(f"{s}-{n}", data) for s, n, data in self.events if s == stream_no and n > after]
        return events, sink

    # -- backend → client ------------------------------------------------------
    def route(self, message: Message) -> Sink | None:
        if self.stream_all:
            return self.get_sink
        body = message.body
        if "method" not in body:
            return self.posts.pop(body.get("id"), None)  # type: ignore[arg-type]
        if body["method"] == "notifications/progress":
            token = message.params.get("progressToken")
            rid = self.progress.get(token)
            if rid is not None and rid in self.posts:
                return self.posts[rid]
            if self.cut_tokens and token in self.cut_tokens:
                return _DISCARD
        if len(self.posts) == 1:
            return next(iter(self.posts.values()))
        if self.get_sink is not None:
            return self.get_sink
        if self.posts:
            return next(reversed(self.posts.values()))
        return None

    async def _read_backend(self) -> None:
        reason = "backend closed"
        try:
            while True:
                message = await self.backend.receive()
                sink = self.route(message)
                if sink is not None:
                    if sink.put(message):
                        cancel = self.cut(sink)
                        if self.stream_all:
                            reason = "SSE stream cut off: the client did not read it"
                            break
                        if cancel is not None:
                            await self.backend.send(cancel)
                elif message.is_response():
                    log.debug("session %s: dropped a response for unknown id %r", self.id[:8], message.id)
                else:
                    self.backlog.append(message, len(message.encode()))
                # An idle session's reader waits here for its next message for as long as the
                # session lives: it must not keep the last one (an initialize answer: ~4 KB).
                del message, sink
        except ChannelClosed as exc:
            reason = exc.reason
        except Exception as exc:  # a bug: close the session, never the process
            log.exception("session %s: reader failed", self.id[:8])
            reason = f"internal error: {type(exc).__name__}"
        await self.close(reason)

    async def close(self, reason: str) -> None:
        if self.closed_reason is not None:
            return
        self.closed_reason = reason
        log.info("session %s closed: %s", self.id[:8], reason)
        for rid, sink in list(self.posts.items()):
            err = UnavailableError(f"backend unavailable: {reason}", reason="backend_closed")
            sink.put(err.to_response(rid))
        self.posts.clear()
        if self.get_sink is not None:
            self.get_sink.put(_END)
        self._on_close(self)
        if self._reader is not None and self._reader is not asyncio.current_task():
            self._reader.cancel()
        with contextlib.suppress(Exception):
            await self.backend.aclose()

    def __repr__(self) -> str:
        return f"<ClientSession {self.id[:8]} posts={len(self.posts)} closed={self.closed_reason!r}>"


# Sentinel put on a GET sink when the session ends.
_END = Message({"jsonrpc": "2.0", "method": "$/hopline/end"})
# Where route() sends what nobody must receive (progress of a cut-off request).
_DISCARD = Sink(0)
_DISCARD.overflowed = True


def is_end(message: Message) -> bool:
    return message is _END


class SessionTable:
    """Live sessions by id, with an idle TTL and a hard cap (test-battery LOAD-03, BAD-16),
    the admission of new ones and the bounds their streams keep (module docstring).

    Lookup of an unknown id allocates nothing. Ids are 128 random bits in hex.
    ``sibling()`` is another table (another endpoint's) with the same bounds, sharing
    this one's admission slots and counters.
    """

    def __init__(
        self,
        *,
        max_sessions: int = 10_000,
        idle_ttl: float = 1800.0,
        max_pending: int = 16,
        handshake_timeout: float = 20.0,
        stream_limits: StreamLimits = StreamLimits(),
        admission: Admission | None = None,
    ) -> None:
        self.sessions: dict[str, ClientSession] = {}
        self.max_sessions = max_sessions
        self.idle_ttl = idle_ttl
        self.handshake_timeout = handshake_timeout
        self.stream_limits = stream_limits
        self.admission = admission if admission is not None else Admission(max_pending)
        self.pending = 0  # this table's creations in flight (they count against max_sessions)
        self._sweeper: asyncio.Task | None = None

    def sibling(self) -> SessionTable:
        return SessionTable(
            max_sessions=self.max_sessions,
            idle_ttl=self.idle_ttl,
            handshake_timeout=self.handshake_timeout,
            stream_limits=self.stream_limits,
            admission=self.admission,
        )

    def is_full(self) -> bool:
        return len(self.sessions) + self.pending >= self.max_sessions

    def admit(self, request_id: Id | None = None) -> Slot:
        """A slot for one session creation (``with table.admit(id):``), or Overloaded at once."""
        admission = self.admission
        if self.is_full():
            admission.shed_full += 1
            raise Overloaded(
                f"too many sessions (at most {self.max_sessions}); retry later",
                retry_after=5,
                limit="max_sessions",
                request_id=request_id,
            )
        if admission.pending >= admission.max_pending:
            admission.shed_busy += 1
            message = f"too many sessions being created at once (at most {admission.max_pending}); retry shortly"
            raise Overloaded(message, retry_after=1, limit="max_pending_sessions", request_id=request_id)
        return Slot(admission, self)

    def get(self, session_id: str, owner: Any = None) -> ClientSession | None:
        """The live session ``session_id`` if ``owner`` created it; None otherwise, so that
        another caller's session looks exactly like an unknown one."""
        session = self.sessions.get(session_id)
        if session is None or session.owner != owner:
            return None
        if session.backend.is_closed():  # its reader has yet to notice: it is gone all the same (404)
            return None
        return session

    async def create(
        self, open_backend: Callable[[], Awaitable[Channel]], *, stream_all: bool = False, owner: Any = None
    ) -> ClientSession:
        """A new session on a new backend channel; ChannelClosed if that does not open
        within ``handshake_timeout`` seconds."""
        try:
            async with asyncio.timeout(self.handshake_timeout):
                backend = await open_backend()
        except TimeoutError:
            self.admission.handshake_timeouts += 1
            raise ChannelClosed(f"the backend did not start within {self.handshake_timeout:g} s") from None
        sid = secrets.token_hex(16)
        session = ClientSession(
            sid,
            backend,
            on_close=self._forget,
            stream_all=stream_all,
            owner=owner,
            limits=self.stream_limits,
            counters=self.admission,
        )
        self.sessions[session.id] = session
        session.start()
        self._ensure_sweeper()
        return session

    def _forget(self, session: ClientSession) -> None:
        self.sessions.pop(session.id, None)

    def _ensure_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="session-sweeper")

    async def _sweep(self) -> None:
        period = max(0.05, min(60.0, self.idle_ttl / 4))
        while self.sessions:
            await asyncio.sleep(period)
            cutoff = time.monotonic() - self.idle_ttl
            for session in [
                s for s in self.sessions.values() if s.last_active < cutoff and not s.posts and s.get_sink is None
            ]:
                await session.close("idle timeout")

    async def close_all(self, reason: str = "gateway shutting down") -> None:
        await asyncio.gather(*(s.close(reason) for s in list(self.sessions.values())), return_exceptions=True)
        if self._sweeper is not None:
            self._sweeper.cancel()
