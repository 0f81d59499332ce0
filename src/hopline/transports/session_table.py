"""The handshake-era sessions of one HTTP endpoint: :class:`SessionTable` (sessions: http_session.py).

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

Fail closed (issue 29): a DELETE whose end the store cannot record is refused (503: the
client retries), never answered 200 for an end no other replica will know. The id also
seals the store's epoch (shared_sessions.py): a resume under another epoch (the store
lost its memory, so the session's end may be forgotten) is refused as an unknown session
(404), and a store answer that is not what hopline wrote is 503, counted
(``store_invalid``), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import Id, Message, UnavailableError, notification
from hopline.layers.transport.channel import Channel, ChannelClosed
from hopline.transports.admission import Admission, Overloaded, Slot, StreamLimits
from hopline.transports.http_session import ClientSession
from hopline.transports.session_seal import SessionSeal
from hopline.transports.shared_sessions import (
    STANDING,
    MemorySessions,
    SharedSessions,
    StoreAnswerInvalid,
    StoreUnavailable,
)

__all__ = ["SessionTable"]

log = logging.getLogger("hopline.http")

MAX_REPLAYED = 64  # standing requests replayed into a resumed session


def _plain(owner: Any) -> Any:
    """An owner key as JSON keeps it (tuples become lists), to compare with a sealed one."""
    return list(owner) if isinstance(owner, tuple) else owner


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
        if self.shared is not None and self.shared.counters is None:  # forged messages counted with the rest
            self.shared.counters = self.admission

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
            epoch = await self.shared.epoch()
            if epoch is not None:  # the store's generation: checked on resume
                payload["g"] = epoch
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
        standing: list[dict[str, Any]] | None = []
        try:
            standing = await self.shared.resumable(sid, payload.get("g"))
            if standing is None:  # ended, or sealed under another epoch of the store
                return None
        except StoreUnavailable:
            if self.on_store_down == "refuse":
                self.admission.store_unavailable += 1
                raise Overloaded(
                    "this session was made on another replica and the session store is unreachable; retry shortly",
                    retry_after=1,
                    limit="session_store",
                ) from None
            standing = []
        except StoreAnswerInvalid as exc:
            self.admission.store_invalid += 1
            log.warning("session %s not resumed: %s", session_id[:8], exc)
            raise Overloaded(
                "this session was made on another replica and the session store answered what hopline did not write;"
                " it was not resumed",
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
        """The client ended ``session``: on every replica, for good. Overloaded (503) if the
        store cannot record it: the session stays as it was, and the client retries."""
        if session.shared is not None:
            try:
                await session.shared[1].end(session.shared[0], self.max_age)
            except (StoreUnavailable, StoreAnswerInvalid):
                raise Overloaded(
                    "the session store is unreachable; the session could not be ended, retry shortly",
                    retry_after=1,
                    limit="session_store",
                ) from None

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
        except (StoreUnavailable, StoreAnswerInvalid):
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
            with contextlib.suppress(StoreUnavailable, StoreAnswerInvalid):
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
