"""Many client-side channels ("views") over one shared backend channel.

Used where a backend connection is shared: 2026-07-28 requests (no session, so
any connection of that era may serve them) and ``hopline relay --shared``. Every
view is a :class:`~hopline.layers.transport.channel.Channel`; ids and progress tokens are
remapped through :class:`IdMap`, so no client ever receives another's response.

Routing of what the backend sends that is not a response:
- progress → the view whose request carries the (rewritten) token;
- a notification tagged ``_meta["io.modelcontextprotocol/subscriptionId"]`` with the backend
  id of a ``subscriptions/listen`` in flight (2026-07-28: its acknowledgement and every change
  it delivers) → that listen's view alone, the tag restored to the client's id (as on the
  listen's result), so each listen stream gets its own frames even with several open;
- ``notifications/*/list_changed`` and ``resources/updated`` → every view (shared
  state changed for everyone);
- anything else (logs, sampling, elicitation) → the one view with requests in
  flight; if several have, it cannot be attributed without reading content, so a
  notification is dropped and a request refused, and the count is kept in
  ``unattributed``. The default relay (one backend per session) never needs this.

Handshake sharing (``share_handshake=True``): the first ``initialize`` goes to the
backend; later views get its result under their own id and their
``notifications/initialized`` is not repeated. Closing a view with requests in
flight sends ``notifications/cancelled`` for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from hopline.binding import META_SUBSCRIPTION_ID
from hopline.jsonrpc import InternalError, Message, UnavailableError, notification
from hopline.layers.session.idmap import IdMap
from hopline.layers.transport.channel import Channel, ChannelClosed
from hopline.layers.transport.inbox import Inbox

log = logging.getLogger("hopline.mux")

BROADCAST = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


class Multiplexer:
    def __init__(self, backend: Channel, *, name: str = "backend", share_handshake: bool = False) -> None:
        self.backend = backend
        self.name = name
        self.ids = IdMap()
        self.views: set[MuxView] = set()
        self.share_handshake = share_handshake
        self.unattributed = 0
        self.stray_answers = 0  # answers to backend ids not in flight on this connection: dropped
        self.listens: set[int] = set()  # backend ids of the subscriptions/listen requests in flight
        self.closed_reason: str | None = None
        self._init_result: asyncio.Future[dict[str, Any]] | None = None
        self._init_backend_id: int | None = None
        self._initialized_sent = False
        self._reader = asyncio.create_task(self._read(), name=f"mux-{name}")

    def view(self) -> MuxView:
        if self.closed_reason is not None:
            raise ChannelClosed(self.closed_reason)
        v = MuxView(self)
        self.views.add(v)
        return v

    def is_closed(self) -> bool:
        return self.closed_reason is not None

    # -- view → backend -------------------------------------------------------------
    async def _send(self, view: MuxView, message: Message) -> None:
        body = message.body
        if "method" not in body:  # the client's answer to a server→client request
            backend_id = self.ids.server_request_answered(view, body.get("id"))
            if backend_id is not None:
                await self.backend.send(Message({**body, "id": backend_id}))
            return
        method = body["method"]
        if "id" not in body:
            await self._send_notification(view, message, method)
            return
        if method == "initialize" and self.share_handshake:
            if self._init_result is not None:
                view.inbox.put_nowait(await self._cached_init(message))
                return
            self._init_result = asyncio.get_running_loop().create_future()
        token = message.meta.get("progressToken")
        backend_id, new_token = self.ids.outbound(view, body["id"], token)
        if method == "initialize" and self.share_handshake:
            self._init_backend_id = backend_id
        elif method == "subscriptions/listen":
            self.listens.add(backend_id)
        out = {**body, "id": backend_id}
        if new_token is not None:
            params = dict(body["params"])
            params["_meta"] = {**params["_meta"], "progressToken": new_token}
            out["params"] = params
        await self.backend.send(Message(out))

    async def _cached_init(self, message: Message) -> Message:
        assert self._init_result is not None
        try:
            result = await asyncio.shield(self._init_result)
        except Exception as exc:
            return UnavailableError(f"backend initialize failed: {exc}", backend=self.name).to_response(message.id)
        return Message({"jsonrpc": "2.0", "id": message.id, "result": result})

    async def _send_notification(self, view: MuxView, message: Message, method: str) -> None:
        if method == "notifications/cancelled":
            backend_id = self.ids.backend_id_for(view, message.params.get("requestId"))
            if backend_id is None:
                return  # unknown or finished: never forward a raw id onto a shared connection
            params = {**message.params, "requestId": backend_id}
            await self.backend.send(notification(method, params))
            return
        if method == "notifications/initialized" and self.share_handshake:
            if self._initialized_sent:
                return
            self._initialized_sent = True
        await self.backend.send(message)

    async def _close_view(self, view: MuxView) -> None:
        self.views.discard(view)
        for backend_id in self.ids.forget_owner(view):
            self.listens.discard(backend_id)
            if self.closed_reason is None:
                with contextlib.suppress(ChannelClosed):
                    await self.backend.send(
                        notification("notifications/cancelled", {"requestId": backend_id, "reason": "client went away"})
                    )

    # -- backend → views --------------------------------------------------------------
    async def _read(self) -> None:
        reason = "backend closed"
        try:
            while True:
                self._dispatch(await self.backend.receive())
        except ChannelClosed as exc:
            reason = exc.reason
        except Exception as exc:
            log.exception("%s: multiplexer failed", self.name)
            reason = f"internal error: {type(exc).__name__}"
        self._fail_all(reason)

    def _dispatch(self, message: Message) -> None:
        body = message.body
        if "method" not in body:
            backend_id = body.get("id")
            entry = self.ids.answered(backend_id)
            if entry is None:
                self.stray_answers += 1
                log.debug("%s: dropped a response for unknown id %r", self.name, backend_id)
                return
            if backend_id == self._init_backend_id and self._init_result is not None and not self._init_result.done():
                if isinstance(body.get("result"), dict):
                    self._init_result.set_result(body["result"])
                else:
                    self._init_result.set_exception(RuntimeError(str(body.get("error"))))
                    self._init_result = None
            if self.listens and backend_id in self.listens:
                self.listens.discard(backend_id)
                body = _retagged(body, "result", entry.client_id)
            entry.owner.inbox.put_nowait(Message({**body, "id": entry.client_id}))
            return
        method = body["method"]
        if method == "notifications/progress":
            entry = self.ids.progress_owner(message.params.get("progressToken"))
            if entry is not None:
                params = {**message.params, "progressToken": entry.progress_token}
                entry.owner.inbox.put_nowait(notification(method, params))
            return
        if self.listens and "id" not in body:
            listen_id = message.meta.get(META_SUBSCRIPTION_ID)
            found = listen_id.__class__ is int and listen_id in self.listens
            entry = self.ids.by_backend_id.get(listen_id) if found else None
            if entry is not None:
                entry.owner.inbox.put_nowait(Message(_retagged(body, "params", entry.client_id)))
                return
        if method in BROADCAST and "id" not in body:
            for view in self.views:
                view.inbox.put_nowait(message)
            return
        owners = {entry.owner for entry in self.ids.by_backend_id.values()}
        if len(owners) != 1:
            self.unattributed += 1
            if "id" in body:
                err = InternalError("cannot attribute a server request to one client on a shared backend connection")
                asyncio.ensure_future(self._answer_backend(err.to_response(body["id"])))
            return
        owner: MuxView = owners.pop()  # type: ignore[assignment]
        if "id" in body:
            our_id = self.ids.server_request(owner, body["id"])
            owner.inbox.put_nowait(Message({**body, "id": our_id}))
        else:
            owner.inbox.put_nowait(message)

    async def _answer_backend(self, message: Message) -> None:
        with contextlib.suppress(ChannelClosed):
            await self.backend.send(message)

    def _fail_all(self, reason: str) -> None:
        self.closed_reason = reason
        self.listens.clear()
        for backend_id, entry in list(self.ids.by_backend_id.items()):
            err = UnavailableError(f"backend unavailable: {reason}", backend=self.name, reason="backend_closed")
            entry.owner.inbox.put_nowait(err.to_response(entry.client_id))
            self.ids.answered(backend_id)
        if self._init_result is not None and not self._init_result.done():
            self._init_result.set_exception(RuntimeError(reason))
        for view in self.views:
            view.inbox.put_nowait(_CLOSED)

    async def aclose(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        if self.closed_reason is None:
            self._fail_all("closed")
        await self.backend.aclose()

    def __repr__(self) -> str:
        return (
            f"<Multiplexer {self.name} views={len(self.views)} in_flight={len(self.ids.by_backend_id)} "
            f"closed={self.closed_reason!r}>"
        )


def _retagged(body: dict[str, Any], key: str, listen_id: Any) -> dict[str, Any]:
    """``body`` with ``body[key]["_meta"][subscriptionId]`` set to the client's ``listen_id``,
    where that tag is present (copies, never changes, what it was given)."""
    part = body.get(key)
    meta = part.get("_meta") if isinstance(part, dict) else None
    if not isinstance(meta, dict) or META_SUBSCRIPTION_ID not in meta:
        return body
    return {**body, key: {**part, "_meta": {**meta, META_SUBSCRIPTION_ID: listen_id}}}


_CLOSED = Message({"jsonrpc": "2.0", "method": "$/hopline/closed"})


class MuxView:
    """One client's channel onto a :class:`Multiplexer`."""

    __slots__ = ("mux", "inbox", "_closed")

    def __init__(self, mux: Multiplexer) -> None:
        self.mux = mux
        self.inbox: Inbox[Message] = Inbox()
        self._closed = False

    async def send(self, message: Message) -> None:
        if self._closed or self.mux.closed_reason is not None:
            raise ChannelClosed(self.mux.closed_reason or "view closed")
        await self.mux._send(self, message)

    async def receive(self, timeout: float | None = None) -> Message:
        """The next message; TimeoutError after ``timeout``; ChannelClosed when the backend is gone."""
        message = await self.inbox.get(timeout)
        if message is _CLOSED:
            self.inbox.push_front(_CLOSED)
            raise ChannelClosed(self.mux.closed_reason or "closed")
        return message

    def interrupt(self, exc: BaseException) -> None:
        self.inbox.interrupt(exc)

    @property
    def buffer(self) -> Inbox[Message]:
        """What the client has not read yet (a stream writer bounds it)."""
        return self.inbox

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self.mux._close_view(self)

    def is_closed(self) -> bool:
        return self._closed or self.mux.closed_reason is not None

    def __repr__(self) -> str:
        return f"<MuxView of {self.mux.name} closed={self._closed}>"
