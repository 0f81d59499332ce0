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

Replicas (``seal`` and ``shared`` given): the id a session gets is sealed
(session_seal.py: what its ``initialize`` asked, its owner, its age), so a replica
that does not hold the session can :meth:`SessionTable.resume` it: it opens a backend
channel of its own, replays the ``initialize`` (and ``notifications/initialized``)
and the client's standing requests (shared_sessions.py), and serves it under the
same id, as if it had been there all along. A DELETE ends it on every replica; what
the backend sends for a GET stream held by another replica is published there.
Concurrent requests for one id resume it once. Resuming is admitted and bounded in
time exactly as creating is.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import time
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import HoplineError, Id, Message, UnavailableError, notification, parse
from hopline.layers.transport.channel import Channel, ChannelClosed, Pooled
from hopline.transports.admission import Admission, BoundedLog, Overloaded, Slot, StreamLimits
from hopline.transports.session_seal import SessionSeal
from hopline.transports.shared_sessions import STANDING, MemorySessions, SharedSessions, StoreUnavailable
from hopline.transports.sink import HandedOver, Sink

__all__ = ["ClientSession", "HandedOver", "SessionTable", "Sink", "is_end"]

log = logging.getLogger("hopline.http")

CUT_TOKENS = 64  # progress tokens of cut-off requests remembered, to drop what the backend still sends
MAX_REPLAYED = 64  # standing requests replayed into a resumed session


def _plain(owner: Any) -> Any:
    """An owner key as JSON keeps it (tuples become lists), to compare with a sealed one."""
    return list(owner) if isinstance(owner, tuple) else owner


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
        seal: SessionSeal | None = None,
        shared: SharedSessions | None = None,
        max_age: float = 86_400.0,
        on_store_down: str = "refuse",
        endpoint: str = "",
    ) -> None:
        self.sessions: dict[str, ClientSession] = {}
        self.max_sessions = max_sessions
        self.idle_ttl = idle_ttl
        self.handshake_timeout = handshake_timeout
        self.stream_limits = stream_limits
        self.admission = admission if admission is not None else Admission(max_pending)
        self.pending = 0  # this table's creations in flight (they count against max_sessions)
        self._sweeper: asyncio.Task | None = None
        # Replicas: sealed ids, the shared mutable part, how old a sealed id may be, and
        # what a resume does while the store is down ("refuse": 503; "resume": without it).
        self.seal = seal
        self.shared: SharedSessions | None = (shared or MemorySessions()) if seal is not None else None
        self.max_age = max_age
        self.on_store_down = on_store_down
        self.endpoint = endpoint  # sealed into the ids: one endpoint's session is no other's
        self._resuming: dict[str, asyncio.Future[ClientSession | None]] = {}
        self._watching = False
        self._owns_shared = True

    def sibling(self, endpoint: str | None = None) -> SessionTable:
        """Another endpoint's table (``endpoint``: its path, when its sessions are sealed)."""
        table = SessionTable(
            max_sessions=self.max_sessions,
            idle_ttl=self.idle_ttl,
            handshake_timeout=self.handshake_timeout,
            stream_limits=self.stream_limits,
            admission=self.admission,
            seal=self.seal,
            shared=self.shared,
            max_age=self.max_age,
            on_store_down=self.on_store_down,
            endpoint=self.endpoint if endpoint is None else endpoint,
        )
        table._owns_shared = False
        return table

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
        self,
        open_backend: Callable[[], Awaitable[Channel]],
        *,
        stream_all: bool = False,
        owner: Any = None,
        initialize: dict[str, Any] | None = None,
    ) -> ClientSession:
        """A new session on a new backend channel; ChannelClosed if that does not open
        within ``handshake_timeout`` seconds. With a seal, the id carries ``initialize``
        (the request's params) so that another replica can resume the session."""
        backend = await self._open(open_backend)
        sid = secrets.token_hex(16)
        token = None
        if self.seal is not None and initialize is not None and not stream_all:
            assert self.shared is not None
            await self.shared.ready(min(1.0, self.handshake_timeout))  # once: subscribed to what replicas announce
            payload = {"s": sid, "o": _plain(owner), "p": initialize, "t": int(time.time()), "e": self.endpoint}
            token = self.seal.seal(payload)
        return self._add(token or sid, backend, stream_all, owner, sid if token else None)

    async def _open(self, open_backend: Callable[[], Awaitable[Channel]]) -> Channel:
        try:
            async with asyncio.timeout(self.handshake_timeout):
                return await open_backend()
        except TimeoutError:
            self.admission.handshake_timeouts += 1
            raise ChannelClosed(f"the backend did not start within {self.handshake_timeout:g} s") from None

    def _add(
        self, session_id: str, backend: Channel, stream_all: bool, owner: Any, shared: str | None
    ) -> ClientSession:
        session = ClientSession(
            session_id,
            backend,
            on_close=self._forget,
            stream_all=stream_all,
            owner=owner,
            limits=self.stream_limits,
            counters=self.admission,
            shared=(shared, self.shared) if shared is not None and self.shared is not None else None,
        )
        self.sessions[session.id] = session
        rename = getattr(backend, "rename", None)
        if shared is not None and rename is not None:  # the gateway binds tasks and cursors to it
            rename(shared)
        session.start()
        self._ensure_sweeper()
        if session.shared is not None and not self._watching:
            self._watching = True
            session.shared[1].on_end(self._ended_elsewhere)
        return session

    # -- replicas ------------------------------------------------------------------
    def _sealed(self, session_id: str, owner: Any) -> dict[str, Any] | None:
        """The sealed part of ``session_id`` if it is ours, ``owner``'s, and young enough."""
        payload = self.seal.open(session_id) if self.seal is not None else None
        if payload is None or payload.get("o") != _plain(owner) or not isinstance(payload.get("p"), dict):
            return None
        if payload.get("e") != self.endpoint:
            return None
        if time.time() - float(payload.get("t", 0)) > self.max_age:
            return None
        return payload

    async def resume(
        self, session_id: str, owner: Any, open_backend: Callable[[], Awaitable[Channel]]
    ) -> ClientSession | None:
        """``session_id``, made by another replica (or by this one before it restarted), served
        here from now on; None if it is not a session this replica could serve (unknown,
        another owner's, too old, ended). Overloaded (503) while the shared store is down
        (``on_store_down: refuse``) or past the admission bounds; ChannelClosed if no
        backend opens; UnavailableError if the backend refuses the replayed initialize."""
        payload = self._sealed(session_id, owner)
        if payload is None:
            return None
        pending = self._resuming.get(session_id)
        if pending is not None:  # the same client's concurrent requests: one resume
            return await asyncio.shield(pending)
        future: asyncio.Future[ClientSession | None] = asyncio.get_running_loop().create_future()
        self._resuming[session_id] = future
        try:
            session = await self._resume(session_id, payload, owner, open_backend)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        else:
            future.set_result(session)
            return session
        finally:
            del self._resuming[session_id]

    async def _resume(
        self, session_id: str, payload: dict[str, Any], owner: Any, open_backend: Callable[[], Awaitable[Channel]]
    ) -> ClientSession | None:
        sid = str(payload["s"])
        assert self.shared is not None
        standing: list[dict[str, Any]] = []
        try:
            if await self.shared.is_ended(sid):
                return None
            standing = await self.shared.standing(sid)
        except StoreUnavailable:
            if self.on_store_down == "refuse":
                self.admission.store_unavailable += 1
                raise Overloaded(
                    "this session was made on another replica and the session store is unreachable; retry shortly",
                    retry_after=1,
                    limit="session_store",
                ) from None
        with self.admit():
            await self.shared.ready(min(1.0, self.handshake_timeout))
            backend = await self._open(open_backend)
            session = self._add(session_id, backend, False, owner, sid)
            try:
                async with asyncio.timeout(self.handshake_timeout):
                    answer = await session.exchange("initialize", payload["p"])
                    if "result" not in answer.body:
                        reason = str(answer.body.get("error", {}).get("message", "refused"))[:200]
                        raise UnavailableError(
                            f"the session could not be resumed: initialize answered {reason}", reason="start_failed"
                        )
                    session.protocol_version = payload["p"].get("protocolVersion")
                    await session.send(notification("notifications/initialized"))
                    for request in standing[:MAX_REPLAYED]:
                        await session.exchange(request["method"], request.get("params") or {})
            except BaseException as exc:
                await session.close("resume failed")
                if isinstance(exc, TimeoutError):
                    self.admission.handshake_timeouts += 1
                    raise ChannelClosed(f"the session was not resumed within {self.handshake_timeout:g} s") from None
                raise
        self.admission.resumed += 1
        log.info("session %s resumed on this replica", session_id[:8])
        return session

    async def end(self, session: ClientSession) -> None:
        """The client ended ``session``: on every replica, for good."""
        if session.shared is not None:
            with contextlib.suppress(StoreUnavailable):  # ends here; elsewhere its copies idle out
                await session.shared[1].end(session.shared[0], self.max_age)

    async def end_elsewhere(self, session_id: str, owner: Any) -> bool:
        """A DELETE for a session this replica does not hold: ended everywhere if it is
        ``owner``'s sealed session (True), without opening anything."""
        payload = self._sealed(session_id, owner)
        if payload is None or self.shared is None:
            return False
        try:
            if await self.shared.is_ended(str(payload["s"])):
                return False
            await self.shared.end(str(payload["s"]), self.max_age)
        except StoreUnavailable:
            raise Overloaded(
                "the session store is unreachable; the session could not be ended, retry shortly",
                retry_after=1,
                limit="session_store",
            ) from None
        return True

    def _ended_elsewhere(self, sid: str) -> None:
        for session in list(self.sessions.values()):
            if session.shared is not None and session.shared[0] == sid:
                asyncio.get_running_loop().create_task(session.close("the client ended the session on another replica"))

    async def remember(self, session: ClientSession, message: Message) -> None:
        """Keep a standing request (``resources/subscribe``, ``logging/setLevel``) for the
        replicas that resume this session later; best effort while the store is down."""
        if session.shared is not None and message.method in STANDING:
            with contextlib.suppress(StoreUnavailable):
                await session.shared[1].record(session.shared[0], message.method, message.params, self.max_age)

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
        if self.shared is not None and self._owns_shared:
            await self.shared.aclose()
