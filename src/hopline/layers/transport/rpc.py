"""Request/response over one channel: the gateway's side of a backend session.

:class:`RpcPeer` sends requests with ids it mints (random integers below 2**53,
never a client's: :mod:`~hopline.layers.transport.wireids`), awaits their responses
on futures (an answer to an id not in flight is dropped and counted in
``stray_answers``), and hands everything the peer sends on its
own initiative to the owner: server→client requests to ``on_request`` (whose
answer goes back under the peer's id), notifications to ``on_notification``.
Progress notifications are matched by the token the gateway minted for the
request (``progress_token``) and delivered to that request's ``on_progress``.

Never raises out of the reader; a closed channel fails every waiting request
with :class:`UnavailableError`, and a request that outlives ``timeout`` gets
:class:`BackendTimeout` and a ``notifications/cancelled`` to the peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import BackendTimeout, InternalError, Message, UnavailableError, notification, request
from hopline.layers.transport.wireids import fresh_id
from hopline.layers.transport.channel import Channel, ChannelClosed, Settles

log = logging.getLogger("hopline.rpc")

CANCEL_SEND_TIMEOUT = 5.0  # seconds a notifications/cancelled may take to write
OnRequest = Callable[[Message], Awaitable[Message]]
OnNotification = Callable[[Message], None]


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


class RpcPeer:
    def __init__(
        self,
        channel: Channel,
        *,
        name: str,
        on_request: OnRequest | None = None,
        on_notification: OnNotification | None = None,
        on_closed: Callable[[], object] | None = None,
    ) -> None:
        self.channel = channel
        self.name = name
        self.on_request = on_request
        self.on_notification = on_notification
        self.on_closed = on_closed
        self.closed_reason: str | None = None
        self.stray_answers = 0  # answers to ids not in flight here: dropped
        self._waiting: dict[int, asyncio.Future[Message]] = {}
        self._progress: dict[str, Callable[[Message], None]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._reader = asyncio.create_task(self._read(), name=f"rpc-{name}")
        self._loop = self._reader.get_loop()  # a peer lives on the loop its reader runs on
        if isinstance(channel, Settles):  # an HTTP upstream: answers may skip its queue and our reader (inbound.py)
            channel.settle = self._settle

    def next_id(self) -> int:
        """A fresh unguessable id, not in flight on this peer."""
        msg_id = fresh_id()
        while msg_id in self._waiting:
            msg_id = fresh_id()
        return msg_id

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None = None,
        msg_id: int | None = None,
        on_progress: Callable[[Message], None] | None = None,
    ) -> Message:
        """Send a request and return the peer's response message (result or error)."""
        if self.closed_reason is not None:
            raise UnavailableError(self._unavailable(self.closed_reason), backend=self.name, reason="backend_closed")
        msg_id = self.next_id() if msg_id is None else msg_id
        token = None
        if on_progress is not None:
            token = f"hl-{self.name}-{msg_id}"
            params = dict(params or {})
            params["_meta"] = {**params.get("_meta", {}), "progressToken": token}
            self._progress[token] = on_progress
        loop = self._loop
        future: asyncio.Future[Message] = loop.create_future()
        self._waiting[msg_id] = future
        try:
            await self.channel.send(request(msg_id, method, params))
            if timeout is None:
                return await future
            # The deadline is a timer handle on the call's own future (no asyncio.timeout
            # context, no shield): bench/profile_call.py, ~15 Python calls fewer per call.
            handle = loop.call_later(timeout, _expire, future)
            try:
                return await future
            except TimeoutError:
                self._cancel_soon(msg_id, "timeout")
                raise BackendTimeout(
                    f"backend {self.name} did not answer {method} within {timeout:g} s", backend=self.name
                ) from None
            finally:
                handle.cancel()
        except ChannelClosed as exc:
            raise UnavailableError(self._unavailable(exc.reason), backend=self.name, reason="backend_closed") from None
        except asyncio.CancelledError:
            if (
                not future.done() or future.cancelled()
            ):  # our caller gave up (awaiting the future cancels it): tell the peer
                self._cancel_soon(msg_id, "cancelled")
            raise
        finally:
            self._waiting.pop(msg_id, None)
            if token is not None:
                self._progress.pop(token, None)

    def _cancel_soon(self, msg_id: int, reason: str) -> None:
        """Send ``notifications/cancelled`` without making the caller wait for the write:
        a backend that stopped reading (a black-holed connection, a full pipe) must not
        hold back the answer the client is owed. Bounded, owned by this peer."""

        async def send() -> None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CANCEL_SEND_TIMEOUT):
                    await self.notify("notifications/cancelled", {"requestId": msg_id, "reason": reason})

        task = asyncio.create_task(send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        with contextlib.suppress(ChannelClosed):
            await self.channel.send(notification(method, params))

    async def _read(self) -> None:
        reason = "closed"
        try:
            while True:
                self._dispatch(await self.channel.receive())
        except ChannelClosed as exc:
            reason = exc.reason
        except Exception as exc:  # a bug: fail this peer, never the process
            log.exception("%s: reader failed", self.name)
            reason = f"internal error: {type(exc).__name__}"
        self._fail(reason)
        if self.on_closed is not None:
            try:
                self.on_closed()
            except Exception:
                log.exception("%s: on_closed failed", self.name)

    def _settle(self, message: Message) -> bool:
        """Resolve the call an answer is for, straight from the channel; False: not one of ours (the reader decides)."""
        body = message.body
        if "method" in body:
            return False
        future = self._waiting.get(body.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            return False
        future.set_result(message)
        return True

    def _dispatch(self, message: Message) -> None:
        body = message.body
        if "method" not in body:
            future = self._waiting.get(body.get("id"))  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result(message)
            else:
                self.stray_answers += 1
                log.debug("%s: dropped a response for unknown id %r", self.name, body.get("id"))
            return
        if "id" in body:
            task = asyncio.create_task(self._answer(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        if body["method"] == "notifications/progress":
            callback = self._progress.get(message.params.get("progressToken"))
            if callback is not None:
                callback(message)
            return
        if self.on_notification is not None:
            self.on_notification(message)

    async def _answer(self, message: Message) -> None:
        try:
            if self.on_request is None:
                raise InternalError(f"no client can answer {message.method}")
            answer = await self.on_request(message)
            out = Message({**answer.body, "id": message.id})
        except Exception as exc:
            err = (
                exc
                if isinstance(exc, (InternalError, UnavailableError))
                else InternalError(f"could not relay {message.method}")
            )
            out = err.to_response(message.id)
        with contextlib.suppress(ChannelClosed):
            await self.channel.send(out)

    def _unavailable(self, reason: str) -> str:
        """``backend X unavailable: why``, naming the backend once (a channel's reason may name it too)."""
        prefix = f"{self.name}: "
        return f"backend {self.name} unavailable: {reason[len(prefix) :] if reason.startswith(prefix) else reason}"

    def _fail(self, reason: str) -> None:
        self.closed_reason = reason
        # One error for every call that was waiting: their answers share its ``data`` object,
        # which is how the breaker counts one lost connection as one failure, not one per call.
        err = UnavailableError(self._unavailable(reason), backend=self.name, reason="backend_closed")
        for msg_id, future in list(self._waiting.items()):
            if not future.done():
                future.set_result(err.to_response(msg_id))

    def is_closed(self) -> bool:
        return self.closed_reason is not None

    async def aclose(self) -> None:
        self._reader.cancel()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        if self.closed_reason is None:
            self._fail("closed")
        with contextlib.suppress(Exception):
            await self.channel.aclose()

    def __repr__(self) -> str:
        return f"<RpcPeer {self.name} waiting={len(self._waiting)} closed={self.closed_reason!r}>"
