"""The gateway's end of one client connection, as a channel a listener can hold.

A listener treats the gateway like any backend: it ``send``s the client's
messages and ``receive``s what goes back. :class:`ClientEnd` turns that into
calls: each client request runs ``handler`` in its own task (so a slow call
never blocks a fast one), its answer is queued for the listener, and a client
``notifications/cancelled`` cancels that task. The gateway can ask the client
things (sampling, elicitation, roots) with :meth:`ask`, under ids it mints.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import HoplineError, InternalError, Message, UnavailableError, request
from hopline.layers.transport.channel import ChannelClosed
from hopline.layers.transport.inbox import Inbox
from hopline.layers.transport.loop import running_loop

log = logging.getLogger("hopline.session")

Handler = Callable[[Message, "ClientEnd"], Awaitable[Message | None]]
NotificationHandler = Callable[[Message, "ClientEnd"], Awaitable[None]]

_CLOSED = Message({"jsonrpc": "2.0", "method": "$/hopline/closed"})


class ClientEnd:
    def __init__(
        self,
        handler: Handler,
        *,
        on_notification: NotificationHandler | None = None,
        on_close: Callable[[ClientEnd], Awaitable[None]] | None = None,
        name: str = "client",
    ) -> None:
        self.handler = handler
        self.on_notification = on_notification
        self.on_close = on_close
        self.name = name
        self.outbox: Inbox[Message] = Inbox()
        self.state: dict[str, Any] = {}  # what the gateway remembers about this client (era, capabilities…)
        self._running: dict[Any, asyncio.Task] = {}
        self._asked: dict[str, asyncio.Future[Message]] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop its first request ran on
        # The listener's reader may take answers straight from here (http_session.py routes
        # one to its POST's stream), skipping the outbox and a hop through that reader's
        # task; only while the outbox is empty, so nothing queued before (a notification)
        # is overtaken. False: not taken, it is queued as usual.
        self.settle: Callable[[Message], bool] | None = None
        # The listener names the session as all replicas know it (a sealed session's shared
        # id): what tasks and list cursors are bound to, so they work on any replica.
        self.rename: Callable[[str], None] | None = None

    # -- the listener's side (Channel + Source) ---------------------------------------
    async def send(self, message: Message) -> None:
        if self._closed:
            raise ChannelClosed(f"{self.name}: closed")
        body = message.body
        if "method" not in body:
            future = self._asked.pop(body.get("id"), None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result(message)
            return
        if "id" not in body:
            if body["method"] == "notifications/cancelled":
                task = self._running.get(message.params.get("requestId"))
                if task is not None:
                    task.cancel()
                return
            if self.on_notification is not None:
                await self.on_notification(message, self)
            return
        loop = self._loop
        if loop is None or not loop.is_running():  # remembered: running_loop() is 4 calls, twice per request
            loop = self._loop = running_loop()
        # The loop's own create_task: asyncio.create_task is two Python calls more.
        task = loop.create_task(self._run(message, loop))
        self._running[body["id"]] = task

    async def _run(self, message: Message, loop: asyncio.AbstractEventLoop) -> None:
        msg_id = message.id
        try:
            answer = await self.handler(message, self)
        except asyncio.CancelledError:
            return  # cancelled by the client: it expects no answer
        except HoplineError as exc:
            answer = exc.to_response(msg_id)
        except Exception:
            log.exception("%s: %s failed", self.name, message.method)
            answer = InternalError(f"internal error while handling {message.method}").to_response(msg_id)
        finally:
            if self._running.get(msg_id) is asyncio.current_task(loop):
                del self._running[msg_id]
        if answer is not None and not self._closed:
            out = Message({**answer.body, "id": msg_id})
            settle = self.settle
            if settle is None or not self.outbox.empty() or not settle(out):
                self.outbox.put_nowait(out)

    async def receive(self, timeout: float | None = None) -> Message:
        message = await self.outbox.get(timeout)
        if message is _CLOSED:
            self.outbox.push_front(_CLOSED)
            raise ChannelClosed(f"{self.name}: closed")
        return message

    @property
    def buffer(self) -> Inbox[Message]:
        """What the client has not read yet (a stream writer bounds it)."""
        return self.outbox

    def interrupt(self, exc: BaseException) -> None:
        self.outbox.interrupt(exc)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._running:  # (a 2026-07-28 exchange's end closes with none: no calls for it)
            for task in list(self._running.values()):
                task.cancel()
        for future in self._asked.values():
            if not future.done():
                future.set_exception(ChannelClosed("client went away"))
        self.outbox.put_nowait(_CLOSED)
        if self.on_close is not None:
            with contextlib.suppress(Exception):
                await self.on_close(self)

    def is_closed(self) -> bool:
        return self._closed

    # -- the gateway's side -------------------------------------------------------------
    def notify(self, message: Message) -> None:
        if not self._closed:
            self.outbox.put_nowait(message)

    async def ask(self, method: str, params: dict[str, Any] | None, timeout: float = 300.0) -> Message:
        """Send a request to the client (sampling, elicitation, roots) and await its answer."""
        if self._closed:
            raise UnavailableError("the client is gone", reason="client_closed")
        msg_id = f"hl-{next(self._ids)}"
        future: asyncio.Future[Message] = running_loop().create_future()
        self._asked[msg_id] = future
        self.outbox.put_nowait(request(msg_id, method, params))
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._asked.pop(msg_id, None)

    def __repr__(self) -> str:
        return f"<ClientEnd {self.name} running={len(self._running)} closed={self._closed}>"
