"""One handshake-era client session behind an HTTP listener (the table of them: session_table.py).

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
without authentication): :meth:`~hopline.transports.session_table.SessionTable.get` finds it only for that owner.

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
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import Any, Callable

from hopline.jsonrpc import HoplineError, Id, Message, UnavailableError, notification, parse
from hopline.layers.transport.channel import Channel, ChannelClosed, Pooled, Settles
from hopline.transports.admission import Admission, BoundedLog, StreamLimits
from hopline.transports.shared_sessions import SharedSessions
from hopline.transports.sink import Sink

__all__ = ["ClientSession", "is_end"]

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
        shared: tuple[str, SharedSessions] | None = None,
    ) -> None:
        self.id = session_id
        self.shared = shared  # (its name in the shared store, the store) when sealed
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
        self._unlisten: Callable[[], None] | None = None

    def start(self) -> None:
        self._reader = asyncio.create_task(self._read_backend(), name=f"session-{self.id[:8]}")
        if isinstance(self.backend, Settles):  # the gateway's ClientEnd: answers may skip its outbox and our reader
            self.backend.settle = self._settle

    def _settle(self, message: Message) -> bool:
        """An answer for a POST whose stream holds nothing yet goes there at once (what the
        reader would do with it); anything else is left to the reader (False).
        Measured with bench/profile_call.py: one task step and an inbox put/get fewer per call."""
        body = message.body
        if self.stream_all or "method" in body:
            return False
        rid = body.get("id")
        sink = self.posts.get(rid)  # type: ignore[arg-type]
        if sink is None or not sink.inbox.empty():  # a put on an empty sink never overflows
            return False
        del self.posts[rid]  # type: ignore[arg-type]
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
        if self.progress:  # most requests name no progress token (bench/profile_call.py: 3 calls fewer)
            self._forget_progress(sink.request_id)
        if self.streams:
            self.streams.pop(sink.stream_no, None)

    def _forget_progress(self, request_id: Id | None) -> None:
        for token in [t for t, rid in self.progress.items() if rid == request_id]:
            del self.progress[token]

    async def send(self, message: Message) -> None:
        self.last_active = time.monotonic()
        await self.backend.send(message)

    async def exchange(self, method: str, params: dict[str, Any]) -> Message:
        """A request of hopline's own on this session (a resume's replay) and its answer."""
        self._stream_counter += 1
        request = Message(
            {"jsonrpc": "2.0", "id": f"hopline-resume-{self._stream_counter}", "method": method, "params": params}
        )
        sink = self.open_post(request)
        try:
            await self.send(request)
            return await sink.receive()
        finally:
            self.finish_post(sink)

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
        if self.shared is not None and self._unlisten is None:  # what other replicas' copies publish
            self._unlisten = self.shared[1].listen(self.shared[0], self._from_replica)
        while self.backlog:
            if sink.put(self.backlog.popleft()):
                self.cut(sink)
                break
        return sink

    def close_get(self, sink: Sink) -> None:
        sink.attached = False
        if self.get_sink is sink:
            self.get_sink = None
            if self._unlisten is not None:
                self._unlisten()
                self._unlisten = None
            while not sink.inbox.empty():  # undelivered: keep for the next GET
                message = sink.inbox.get_nowait()
                self.backlog.append(message, len(message.encode()))

    def _from_replica(self, data: bytes) -> None:
        """A message another replica's copy of this session had for our GET stream."""
        try:
            message = parse(data)
        except HoplineError:
            return
        sink = self.get_sink
        if sink is None:
            self.backlog.append(message, len(data))
        elif sink.put(message):
            self.cut(sink)

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
                elif self.shared is None or not await self.shared[1].publish(self.shared[0], message.encode()):
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
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
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
