"""Change signals and resource updates *from* the shared backend sessions, for
2026-07-28 clients' ``subscriptions/listen`` streams (reference/mcp-wire.md §5).

A 2026-07-28 backend sends nothing outside a request: its list changes and resource
updates only travel on a ``subscriptions/listen`` stream the client opens. So for each
shared backend session in that era the gateway holds **one** listen of its own,
asking for the list-change kinds the backend advertises plus the union of the resource
URIs that clients' listen streams want from it; when that union changes, the backend
listen is reopened with the new set. A handshake-era shared session gets
``resources/subscribe``/``unsubscribe`` for the same union instead (its change signals
arrive unasked).

What arrives is routed, never broadcast blindly: a list change invalidates the caches
and reaches the clients through the gateway's usual CHANGE-SIGNAL path; a
``notifications/resources/updated`` reaches exactly the client listen streams that asked
for that URI, rewritten to the gateway's form and tagged with *their* subscription id.
Updates during a reopen may be missed (the spec's listen has no replay either).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Protocol

from hopline.binding import Era
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.session.listen import Listener

if TYPE_CHECKING:
    from hopline.layers.routing.tables import Routes

log = logging.getLogger("hopline.gateway")

KIND_KEYS = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}
REOPEN_BACKOFF = (0.2, 30.0)


class ListensHub(Protocol):
    """What the gateway's own listens need of it: the routes their resource URIs are exposed by
    (read at each use: a hot reload replaces them)."""

    routes: Routes


class BackendListens:
    def __init__(self, hub: ListensHub) -> None:
        self.hub = hub
        self.sessions: dict[str, BackendSession] = {}
        self.wanted: dict[tuple[str, str], set[Listener]] = {}  # (backend, original uri) → client listens
        self._tasks: dict[str, asyncio.Task] = {}
        self._subscribed: dict[str, set[str]] = {}  # handshake-era backends: URIs subscribed
        self._ready: dict[str, asyncio.Future[None]] = {}  # backend → its current subscription is in place
        # backend → the JSON-RPC id of the gateway's current listen there: its acknowledgement is
        # tagged with it (``_meta`` subscriptionId), so another listen's (a task listen's, arriving
        # after its own wait gave up) is not taken for ours
        self._listen_ids: dict[str, int] = {}

    # -- backend sessions ---------------------------------------------------------------
    def attach(self, backend_id: str, session: BackendSession) -> None:
        """A shared backend session came up: listen to it (2026-07-28) or re-subscribe."""
        self.sessions[backend_id] = session
        self._subscribed.pop(backend_id, None)
        self._refresh(backend_id)

    def detach(self, backend_id: str) -> None:
        self.sessions.pop(backend_id, None)
        self._subscribed.pop(backend_id, None)
        self._listen_ids.pop(backend_id, None)
        task = self._tasks.pop(backend_id, None)
        if task is not None:
            task.cancel()

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- client listen streams -------------------------------------------------------------
    async def subscribe(self, listener: Listener, targets: list[tuple[str, str]], *, wait: float = 5.0) -> None:
        """Add ``listener``'s URIs and wait (bounded) until every shared backend has its
        subscription in place, so what the client is acknowledged is then delivered."""
        touched = set()
        for target in targets:
            self.wanted.setdefault(target, set()).add(listener)
            touched.add(target[0])
        for backend_id in touched:
            self._refresh(backend_id)
        # Every backend's listen (list changes too), not only the ones this call touched.
        pending = [f for f in self._ready.values() if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=wait)

    def unsubscribe(self, listener: Listener) -> None:
        touched = set()
        for target, listeners in list(self.wanted.items()):
            if listener in listeners:
                listeners.discard(listener)
                if not listeners:
                    del self.wanted[target]
                    touched.add(target[0])
        for backend_id in touched:
            self._refresh(backend_id)

    def updated(self, backend_id: str, uri: str, params: dict[str, Any]) -> None:
        """A backend's ``notifications/resources/updated``: to the listens that asked."""
        exposed = self.hub.routes.uris.expose(backend_id, uri)
        for listener in list(self.wanted.get((backend_id, uri), ())):
            listener.send(
                "notifications/resources/updated", {**{k: v for k, v in params.items() if k != "_meta"}, "uri": exposed}
            )

    # -- keeping each backend's subscription equal to what is wanted ---------------------------
    def uris_for(self, backend_id: str) -> list[str]:
        return sorted(uri for (b, uri) in self.wanted if b == backend_id)

    def acknowledged(self, backend_id: str, listen_id: Any = None) -> None:
        """The backend acknowledged the gateway's listen: its subscription is in place.
        ``listen_id``: the subscription id the acknowledgement names, if it names one; an
        acknowledgement of another listen on that backend changes nothing."""
        if listen_id is not None and listen_id != self._listen_ids.get(backend_id):
            return
        ready = self._ready.get(backend_id)
        if ready is not None and not ready.done():
            ready.set_result(None)

    def _refresh(self, backend_id: str) -> asyncio.Future[None] | None:
        session = self.sessions.get(backend_id)
        if session is None or session.is_closed():
            return None
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ready[backend_id] = ready
        if session.info.era is Era.MODERN:
            task = self._tasks.pop(backend_id, None)
            if task is not None:
                task.cancel()
            self._listen_ids.pop(backend_id, None)  # the old listen's acknowledgement no longer counts
            self._tasks[backend_id] = asyncio.ensure_future(self._listen(backend_id, session))
        else:
            old = self._subscribed.get(backend_id, set())
            new = set(self.uris_for(backend_id))
            self._subscribed[backend_id] = new
            if new != old and _can_subscribe(session):
                task = asyncio.ensure_future(self._resubscribe(session, new - old, old - new))
                task.add_done_callback(lambda _t: self.acknowledged(backend_id))
            else:
                ready.set_result(None)
        return ready

    async def _listen(self, backend_id: str, session: BackendSession) -> None:
        caps = session.info.capabilities
        notifications: dict[str, Any] = {
            key: True
            for kind, key in KIND_KEYS.items()
            if isinstance(caps.get(kind), dict) and caps[kind].get("listChanged")
        }
        uris = self.uris_for(backend_id)
        if uris and _can_subscribe(session):
            notifications["resourceSubscriptions"] = uris
        if not notifications:
            self.acknowledged(backend_id)
            return
        delay = REOPEN_BACKOFF[0]
        while not session.is_closed():
            params = {"notifications": notifications, "_meta": session.meta_for(None)}
            listen_id = self._listen_ids[backend_id] = session.peer.next_id()
            try:
                answer = await session.peer.call(
                    "subscriptions/listen", params, timeout=None, msg_id=listen_id
                )  # the answer ends the stream
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("backend %s: listen stream ended: %s", backend_id, exc)
            else:
                if "error" in answer.body:
                    log.info(
                        "backend %s refused subscriptions/listen: %s", backend_id, answer.body["error"].get("message")
                    )
                    self.acknowledged(backend_id)  # nothing to wait for
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, REOPEN_BACKOFF[1])

    async def _resubscribe(self, session: BackendSession, add: set[str], drop: set[str]) -> None:
        # Refcounted with the handshake clients' own subscriptions on the same shared session
        # (Owners): the backend hears only the first subscribe and the last unsubscribe of a URI.
        owners = session.owners
        for method, uris, change in (
            ("resources/subscribe", add, owners.subscribe),
            ("resources/unsubscribe", drop, owners.unsubscribe),
        ):
            for uri in sorted(uris):
                if change(uri, self):
                    with contextlib.suppress(Exception):
                        await session.call(method, {"uri": uri})


def _can_subscribe(session: BackendSession) -> bool:
    resources = session.info.capabilities.get("resources")
    return isinstance(resources, dict) and bool(resources.get("subscribe"))
