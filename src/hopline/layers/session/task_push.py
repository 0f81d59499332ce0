"""Task status pushed on a client's ``subscriptions/listen`` (2026-07-28 Tasks extension,
SEP-2663; reference/mcp-wire.md §5, §8).

A client opts in to a task's updates by naming it in its listen's ``notifications.taskIds``;
the backend pushes ``notifications/tasks`` (the whole task, as ``tasks/get`` answers it) on
that listen. Through the gateway:

- Only the caller's own tasks are subscribed: each id goes through
  :func:`~.task_calls.lookup` (owner, expiry, backend still configured), must be a
  2026-07-28 task on a backend this replica reaches, and one the caller's policy lets it
  ``tasks/get``. Any other id (unknown, another caller's, a backend's own id) is left out
  of the acknowledgement, exactly as an unknown one: nothing is subscribed for it.
- For each backend holding some of them the gateway opens a listen of its own (one per
  client listen and backend, naming only those tasks, under the backend's ids) on the
  backend session the caller's ``tasks/get`` would use, and waits (bounded) for its
  acknowledgement. The client's acknowledgement names the exposed ids of the tasks the
  backends acknowledged.
- What such a backend listen delivers is routed by its subscription id (the JSON-RPC id
  the gateway gave it), never by content: a ``notifications/tasks`` for one of the tasks
  it acknowledged reaches that client listen alone, the task under its exposed id and
  tagged with the client's subscription id; anything else on it, and any
  ``notifications/tasks`` not on one of these listens, is dropped (counted in
  ``dropped``). Updates a backend sends before the client is acknowledged wait (bounded)
  and follow the acknowledgement, in order.
- When the client's listen ends, its routes go first (nothing more is relayed), then its
  backend listens are cancelled. A backend listen that the backend ends on its own while
  the client's is open is reopened under a fresh id, with capped backoff (the backend then
  pushes those tasks' state again). One whose backend session went away is not: those
  tasks' updates stop there, and ``tasks/get`` still answers.

Sans-io: it holds routes and runs the backend calls through the sessions it is handed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hopline.binding import META_CLIENT_CAPABILITIES, META_SUBSCRIPTION_ID, Era
from hopline.jsonrpc import Message
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.session import task_calls
from hopline.layers.session.listen import Listener
from hopline.layers.session.task_store import TaskRecord

if TYPE_CHECKING:
    from hopline.context import Context

log = logging.getLogger("hopline.gateway")

TASKS_PUSHED = "notifications/tasks"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
REOPEN_BACKOFF = (0.2, 30.0)  # seconds before a backend listen that ended is reopened: first, cap
EARLY_LIMIT = 256  # updates held per backend listen until the client is acknowledged; past it the oldest go


@dataclass(eq=False)
class Route:
    """One backend listen opened for one client listen."""

    listener: Listener
    backend: str
    session: BackendSession
    listen_id: int
    ids: dict[str, str]  # backend's task id → exposed id (after the ack: only the acknowledged ones)
    acked: asyncio.Future[list[str]]
    runner: asyncio.Future[None] | None = None
    early: list[dict[str, Any]] | None = field(default_factory=list)  # None once the client is acknowledged


class TaskPush:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, int], Route] = {}  # (backend id, backend listen id) → route
        self.dropped = 0
        self.reopened = 0  # backend listens reopened after the backend ended them

    # -- a client listen -------------------------------------------------------------------
    async def subscribe(
        self, gs: task_calls.TaskClient, ctx: Context, listener: Listener, asked: object, *, wait: float
    ) -> list[Route]:
        """Subscribe the caller's own tasks among ``asked`` at their backends; the routes
        opened (their acknowledged tasks: :func:`acknowledged`)."""
        if not isinstance(asked, list):
            return []
        wanted: dict[str, dict[str, str]] = {}  # backend → backend's id → exposed
        for exposed in dict.fromkeys(t for t in asked if isinstance(t, str)):
            record = await task_calls.lookup(gs, ctx, exposed)
            if record is None or record.era != "modern" or not _here(gs, record):
                continue
            if not task_calls.may(gs, record, "tasks/get"):
                continue
            wanted.setdefault(record.backend, {})[record.task_id] = exposed
        routes: list[Route] = []
        try:
            for backend_id, ids in wanted.items():
                try:
                    session = await gs.backend(backend_id)
                except Exception as exc:
                    log.debug("backend %s: no task listen (%s)", backend_id, exc)
                    continue
                if session.info.era is not Era.MODERN:
                    continue
                routes.append(self._open(listener, backend_id, session, ids))
            if routes:
                await asyncio.wait([r.acked for r in routes], timeout=wait)
        except BaseException:  # the client went away meanwhile: what was opened for it goes
            self.unsubscribe(routes)
            raise
        for route in routes:
            if route.acked.done():
                acked = set(route.acked.result())
                route.ids = {t: e for t, e in route.ids.items() if t in acked}
            else:
                route.ids = {}
            if not route.ids:
                self._close(route)
        return [r for r in routes if r.ids]

    def start(self, routes: list[Route]) -> None:
        """The client has its acknowledgement: what waited follows it."""
        for route in routes:
            early, route.early = route.early or [], None
            for params in early:
                self._relay(route, params)

    def unsubscribe(self, routes: list[Route]) -> None:
        for route in routes:
            self._close(route)

    # -- what the backends send -----------------------------------------------------------
    def deliver(self, backend_id: str, session: BackendSession | None, message: Message) -> bool:
        """True when ``message`` is for a task listen (handled or dropped here), or is a
        ``notifications/tasks`` at all (which reaches nobody outside a task listen)."""
        method = message.method
        if method != TASKS_PUSHED and method != ACKNOWLEDGED:
            return False
        meta = message.params.get("_meta")
        listen_id = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        route = self.routes.get((backend_id, listen_id)) if listen_id.__class__ is int else None
        if route is None or (session is not None and route.session is not session):
            if method == ACKNOWLEDGED:
                return False  # another listen's (backend_listens.py)
            self.dropped += 1
            return True
        if method == ACKNOWLEDGED:
            notifications = message.params.get("notifications")
            acked = notifications.get("taskIds") if isinstance(notifications, dict) else None
            if not route.acked.done():
                route.acked.set_result([t for t in acked if isinstance(t, str)] if isinstance(acked, list) else [])
            return True
        if route.early is not None:  # the client is not acknowledged yet
            route.early.append(message.params)
            del route.early[:-EARLY_LIMIT]
            return True
        self._relay(route, message.params)
        return True

    def _relay(self, route: Route, params: dict[str, Any]) -> None:
        exposed = route.ids.get(params.get("taskId"))  # type: ignore[arg-type]
        if exposed is None:
            self.dropped += 1
            return
        value = {k: v for k, v in params.items() if k != "_meta"}
        route.listener.send(TASKS_PUSHED, task_calls.renamed(value, exposed))

    # -- backend listens --------------------------------------------------------------------
    def _open(self, listener: Listener, backend_id: str, session: BackendSession, ids: dict[str, str]) -> Route:
        listen_id = session.peer.next_id()
        while (backend_id, listen_id) in self.routes:
            listen_id = session.peer.next_id()
        acked: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        route = Route(listener, backend_id, session, listen_id, dict(ids), acked)
        self.routes[(backend_id, listen_id)] = route
        route.runner = asyncio.ensure_future(self._run(route))
        return route

    async def _run(self, route: Route) -> None:
        """The backend listen, reopened (under a fresh id, with backoff) while the client's
        listen is acknowledged and open, when the backend ends it on its own; not when the
        backend refuses it, nor once its session is gone."""
        session = route.session
        meta = session.meta_for(None)
        caps = meta.get(META_CLIENT_CAPABILITIES)
        caps = dict(caps) if isinstance(caps, dict) else {}
        extensions = caps.get("extensions")
        caps["extensions"] = {**(extensions if isinstance(extensions, dict) else {}), task_calls.TASKS_EXTENSION: {}}
        meta = {**meta, META_CLIENT_CAPABILITIES: caps}
        delay = REOPEN_BACKOFF[0]
        try:
            while True:
                params = {"notifications": {"taskIds": list(route.ids)}, "_meta": meta}
                try:
                    answer = await session.peer.call(
                        "subscriptions/listen", params, timeout=None, msg_id=route.listen_id
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.debug("backend %s: task listen ended: %s", route.backend, exc)
                else:
                    if "error" in answer.body:
                        message = answer.body["error"].get("message")
                        log.info("backend %s refused a task listen: %s", route.backend, message)
                        return
                key = (route.backend, route.listen_id)
                if route.early is not None or not route.ids or session.is_closed() or self.routes.get(key) is not route:
                    return  # not acknowledged to the client yet, nothing left to follow, or closed
                await asyncio.sleep(delay)
                delay = min(delay * 2, REOPEN_BACKOFF[1])
                if self.routes.get(key) is not route or session.is_closed():
                    return
                del self.routes[key]
                route.listen_id = session.peer.next_id()
                while (route.backend, route.listen_id) in self.routes:
                    route.listen_id = session.peer.next_id()
                self.routes[(route.backend, route.listen_id)] = route
                self.reopened += 1
        finally:
            if self.routes.get((route.backend, route.listen_id)) is route:
                del self.routes[(route.backend, route.listen_id)]
            if not route.acked.done():
                route.acked.set_result([])

    def _close(self, route: Route) -> None:
        self.routes.pop((route.backend, route.listen_id), None)
        if route.runner is not None and not route.runner.done():
            route.runner.cancel()

    async def aclose(self) -> None:
        runners = [r.runner for r in self.routes.values() if r.runner is not None]
        self.routes.clear()
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)


def acknowledged(routes: list[Route], asked: Any) -> list[str]:
    """The exposed ids of the tasks the backends acknowledged, in the client's order."""
    acked = {exposed for route in routes for exposed in route.ids.values()}
    return [t for t in dict.fromkeys(t for t in asked if isinstance(t, str)) if t in acked] if acked else []


class _Replica(Protocol):
    replica: str | None


class _ReplicasHub(Protocol):
    replicas: _Replica | None


class ReplicaAware(Protocol):
    """A client session, as far as where its tasks' backends run goes."""

    hub: _ReplicasHub


def _here(gs: ReplicaAware, record: TaskRecord) -> bool:
    """Not a task in another replica's own child (its backend listen cannot be opened here)."""
    replicas = gs.hub.replicas
    return not (record.replica and replicas is not None and record.replica != replicas.replica)
