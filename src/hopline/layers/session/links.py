"""A gateway session's backend sessions: opened per client (or shared), watched,
reconnected with backoff when they fail or go away, and replaced on hot reload.
Every change to what the session can reach clears its catalogues and, for a
stateful client, sends the CHANGE-SIGNAL (draft §6.7).

A backend session on a child from a stdio backend's pool (transports/child_pool.py)
can be **parked**: when it has been idle for the backend's ``idle_timeout``, or when
the pool needs its child for another session at the cap, it is closed and its child
reaped, with no reconnect loop and no CHANGE-SIGNAL; its catalogue entries stay
listed, and the next request that needs it reopens it (a fresh initialize with this
client's capabilities, its resource subscriptions renewed). A start refused at the
cap parks the backend too, so a session nobody uses any more holds no child and
retries nothing. Starts still under way when the client session closes are
cancelled (they are tracked with the reconnect tasks), so they leave no child.

A client's handshake (``handshake_backends``) is answered from the backends that are up
within ``routing.list_timeout`` and does not wait at all for one known to be slow
(``registry.slow``); the others join the session when their start ends (issue 29 item 9)."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol

from hopline.binding import Era
from hopline.jsonrpc import HoplineError, InvalidParams, Message, UnavailableError
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.routing.catalog import Entry
from hopline.layers.session import sharing
from hopline.layers.transport.channel import Pooled

if TYPE_CHECKING:
    from hopline.context import Principal
    from hopline.layers.session.client_end import ClientEnd
    from hopline.layers.routing.catalog import Catalog
    from hopline.layers.routing.namespace import Namespace
    from hopline.layers.session.hub import RoutingSettings

log = logging.getLogger("hopline.gateway")

CHANGE_SIGNALS = (
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/tools/list_changed",
)


class BackendSource(Protocol):
    """Layer 2's registry, as a session's links use it: the configured backends, the ones a
    handshake gave up waiting for, and a new backend session of the client's own."""

    connectors: Mapping[str, object]
    slow: set[str]

    async def connect(
        self,
        backend_id: str,
        *,
        era: Era,
        client_capabilities: dict[str, Any],
        on_request: Callable[[Message], Awaitable[Message]],
        on_notification: Callable[[Message], None],
        principal: Principal,
        chain: list[dict[str, Any]] | None = None,
    ) -> BackendSession: ...


class SharedBackends(Protocol):
    """The gateway's shared backend sessions (``sharing.Sharing``), as a session's links use them."""

    def shares(self, backend_id: str) -> bool: ...

    def ready(self, ids: list[str], owner: LinkClient) -> dict[str, BackendSession | BaseException] | None: ...

    async def sessions_for(self, ids: list[str], owner: LinkClient) -> dict[str, BackendSession | BaseException]: ...


class LinkSettings(Protocol):
    routing: RoutingSettings


class LinkRoutes(Protocol):
    """How a name not in the catalogue names its backend (``unlisted``)."""

    reverse: bool
    single: str | None
    namespace: Namespace


class LinkHub(Protocol):
    """What a session's links are handed (the gateway is one): read at each use, since a hot
    reload replaces the settings and the routes."""

    registry: BackendSource
    sharing: SharedBackends
    settings: LinkSettings
    routes: LinkRoutes


class LinkClient(Protocol):
    """What a session's backend links need of the client session they belong to: what it
    opens a backend session as (``client_capabilities``, ``principal``, ``arrival``), whether
    it is stateful and still open (``end``), the URIs it subscribed to, where a backend's
    requests and notifications go, and what it does when its surface changes. (The session
    itself is also what ``sharing`` hands shared backend sessions to.)"""

    stateful: bool
    end: ClientEnd
    client_capabilities: dict[str, Any]
    principal: Principal
    arrival: list[Any]
    subscriptions: dict[str, set[str]]

    def _server_request_from(self, backend_id: str) -> Callable[[Message], Awaitable[Message]]: ...

    def _backend_notification(self, backend_id: str) -> Callable[[Message], None]: ...

    def backend_changed(self, backend_id: str, method: str) -> None: ...

    def surface_changed(self) -> None: ...

    async def catalog(self, list_method: str) -> Catalog: ...


class BackendLinks:
    """A gateway session's backends (owned by it: ``GatewaySession.links``): the sessions it
    reaches each backend by (``backends``; ``owned``: the ones of its own, not shared), their
    starts, reconnects and reopens (``tasks``, cancelled when the client session closes)."""

    def __init__(self, client: LinkClient, hub: LinkHub) -> None:
        self.client = client
        self.hub = hub
        self.backends: dict[str, BackendSession | BaseException] | None = None
        self.owned: list[BackendSession] = []
        self._connecting: asyncio.Future | None = None
        self.tasks: dict[str, asyncio.Task] = {}  # starts, reconnects and reopens, by backend ("": the first connect)
        self._starts: dict[str, asyncio.Future] = {}  # each backend's start in this session (set by _connect)
        # backends closed while idle (or refused at the cap), reopened on demand
        self.parked: frozenset[str] = frozenset()

    # -- backends ---------------------------------------------------------------------
    async def open_backend(self, backend_id: str) -> BackendSession:
        session = await self.hub.registry.connect(
            backend_id,
            era=Era.HANDSHAKE,
            client_capabilities=self.client.client_capabilities,
            on_request=self.client._server_request_from(backend_id),
            on_notification=self.client._backend_notification(backend_id),
            principal=self.client.principal,
            chain=self.client.arrival,
        )
        if self.client.end.is_closed():  # the client left while this backend started
            await session.aclose()
            raise UnavailableError(
                f"backend {backend_id}: the client session is closed", backend=backend_id, reason="client_closed"
            )
        session.on_changed = lambda s, method: self.client.backend_changed(s.id, method)
        session.on_closed = self._backend_lost
        self.owned.append(session)
        channel = session.peer.channel
        if isinstance(channel, Pooled):  # a child from the backend's pool: it may ask for it back
            channel.reclaim = lambda: self._park(backend_id, session, channel)
        return session

    async def live_backends(self) -> dict[str, BackendSession | BaseException]:
        if self.backends is None:
            if (
                not self.client.stateful and self._connecting is None
            ):  # a 2026-07-28 request: every shared session up, no task
                ready = self.hub.sharing.ready(list(self.hub.registry.connectors), self.client)
                if ready is not None:
                    self.backends = ready
                    return ready
            found = await asyncio.shield(self._connect())
            if self.backends is None:  # (not answered without the slow ones meanwhile: handshake_backends)
                self.backends = found
                self._started(found)
        elif any(isinstance(s, BackendSession) and s.is_closed() for s in self.backends.values()):
            await sharing.reacquire(self.client, self.backends)  # shared sessions that went away, taken afresh
        return self.backends

    def _connect(self) -> asyncio.Future:
        """This session's one start of every backend, concurrently (each bounded by
        ``routing.startup_timeout`` in ``sessions_for``); each backend's own start is kept
        in ``_starts`` so that the handshake can answer from the ones that are up."""
        if self._connecting is None:
            starts = {
                b: asyncio.ensure_future(self.hub.sharing.sessions_for([b], self.client))
                for b in list(self.hub.registry.connectors)
            }
            self._starts = starts

            async def every() -> dict[str, BackendSession | BaseException]:
                try:
                    found = await asyncio.gather(*starts.values())
                except BaseException:
                    for start in starts.values():
                        start.cancel()  # a closed session leaves no start (nor child) behind
                    raise
                return {b: s for one in found for b, s in one.items()}

            self._connecting = asyncio.ensure_future(every())
            if self.client.stateful:
                self._track("", self._connecting)  # cancelled with the reconnects when the client session closes
        return self._connecting

    def _started(self, found: dict[str, BackendSession | BaseException]) -> None:
        """Backends that did not start: a pool's child is parked (tried again when a request
        needs it), the others reconnected with backoff."""
        if not self.client.stateful:
            return
        for backend_id, one in found.items():
            if (isinstance(one, asyncio.TimeoutError) or getattr(one, "reason", None) == "at_capacity") and _pooled(
                self.hub.registry.connectors.get(backend_id)
            ):
                self.parked |= {backend_id}  # a pool's child: tried again when a request needs it, not in a loop
            elif not isinstance(one, BackendSession):
                self._schedule_reconnect(backend_id)
            else:
                self.hub.registry.slow.discard(backend_id)  # up: the next handshake waits for it again

    async def handshake_backends(self) -> dict[str, BackendSession | BaseException]:
        """The backends a client session's ``initialize`` is composed from: the ones up within
        ``routing.list_timeout`` (one that failed or is down answers at once; one a handshake
        already gave up on and that has not come up since is not waited for at all). A backend
        still starting then does not hold the handshake: it stands as unavailable ("still
        starting"), its start goes on (up to ``routing.startup_timeout``), and when it comes up
        it joins the session with the CHANGE-SIGNAL, as a backend that reconnects does.
        Reverse and Sidecar (one backend, ``routes.single``): the handshake *is* that backend's
        (its name, version, instructions), so it is waited for up to ``routing.startup_timeout``,
        as a client talking to the server directly waits for it to start."""
        if self.backends is not None or not self.client.stateful:
            return await self.live_backends()
        connecting = self._connect()
        slow = self.hub.registry.slow
        single = self.hub.routes.single is not None
        routing = self.hub.settings.routing
        waited = [start for b, start in self._starts.items() if single or b not in slow]
        if waited:
            await asyncio.wait(waited, timeout=routing.startup_timeout if single else routing.list_timeout)
        else:
            await asyncio.sleep(0)  # (a start that fails at once still answers for itself)
        if connecting.done() or self.backends is not None:
            return await self.live_backends()
        now: dict[str, BackendSession | BaseException] = {}
        late: list[str] = []
        for backend_id, start in self._starts.items():
            if start.done() and not start.cancelled() and start.exception() is None:
                now.update(start.result())
                if isinstance(now.get(backend_id), BackendSession):
                    slow.discard(backend_id)
            else:
                slow.add(backend_id)
                now[backend_id] = UnavailableError(
                    f"backend {backend_id} is unavailable: still starting", backend=backend_id, reason="starting"
                )
                late.append(backend_id)
        self.backends = now
        self._started({b: s for b, s in now.items() if b not in late})
        self._track("", asyncio.ensure_future(self._join_late(connecting, late)))
        return now

    async def _join_late(self, connecting: asyncio.Future, late: list[str]) -> None:
        """The backends the handshake did not wait for, once their start is over: one that came
        up joins (the CHANGE-SIGNAL), one that did not is treated as any failed start."""
        found = await connecting  # cancelled with the session: its starts are cancelled too
        if self.backends is None:
            return
        if any([self._join(b, found[b]) for b in late if b in found]):  # (every one joined, then one signal)
            self.client.surface_changed()

    def _join(self, backend_id: str, found: BackendSession | BaseException) -> bool:
        """One backend the handshake did not wait for, its start over: put in its place (unless
        reloaded away or replaced meanwhile); True if it came up and joined."""
        backends = self.backends
        if backends is None or not still_starting(backends.get(backend_id)):
            return False
        backends[backend_id] = found
        if not isinstance(found, BackendSession):
            self._started({backend_id: found})
            return False
        self.hub.registry.slow.discard(backend_id)
        log.info("backend %s: up, joined a client session after its handshake", backend_id)
        return True

    async def starts_within(self, limit: float) -> None:
        """Backends still starting (their handshake did not wait for them), waited for at most
        ``limit`` seconds more, as a list waits for a backend's list; those that came up join."""
        backends, starts = self.backends, getattr(self, "_starts", None)
        if not backends or not starts:
            return
        waiting = {b: starts[b] for b, found in backends.items() if still_starting(found) and b in starts}
        if not waiting:
            return
        await asyncio.wait(waiting.values(), timeout=limit)
        joined = [
            self._join(b, start.result().get(b, backends[b]))
            for b, start in waiting.items()
            if start.done() and not start.cancelled() and start.exception() is None
        ]
        if any(joined):
            self.client.surface_changed()

    async def _started_late(self, backend_id: str, placeholder: Any) -> Any:
        """A call to a backend still starting waits for its start (bounded by
        ``routing.startup_timeout`` there, and by the exchange's deadline here, which cancels
        this wait, never the start), then finds it as the session does."""
        start = self._starts.get(backend_id)
        if start is None:
            return placeholder
        await asyncio.wait([start])
        if start.cancelled() or start.exception() is not None:
            return placeholder
        found = start.result().get(backend_id, placeholder)
        if self._join(backend_id, found):
            self.client.surface_changed()
        return (self.backends or {}).get(backend_id, found)

    def _track(self, key: str, task: asyncio.Future) -> None:
        """Keep a start of this session's (initial connect "", reconnect or reopen of a
        backend) where closing the session cancels and awaits it (``cancel_tasks``)."""
        self.tasks[key] = task  # type: ignore[assignment]
        task.add_done_callback(lambda t, k=key: self.tasks.pop(k, None) if self.tasks.get(k) is t else None)

    async def cancel_tasks(self) -> None:
        """The client session closed: every start, reconnect and reopen of its backends is
        cancelled and awaited, so none outlives the session that owns it."""
        current = asyncio.current_task()
        pending = [task for task in self.tasks.values() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # -- parking ---------------------------------------------------------------------------
    async def _park(self, backend_id: str, session: BackendSession, lease: Pooled) -> bool:
        """The pool asks for this session's child back (idle timeout, or cap pressure)."""
        if lease.busy():
            return False
        current = (self.backends or {}).get(backend_id)
        if current is session or current is None:
            self.parked |= {backend_id}
        session.on_closed = None  # not a loss: no reconnect loop, no CHANGE-SIGNAL
        if session in self.owned:
            self.owned.remove(session)
        log.info("backend %s: parked an idle session (child %s reaped)", backend_id, lease.pid)
        await session.aclose()
        return True

    async def _unpark(self, backend_id: str) -> BackendSession:
        """Reopen a parked backend for this client (one reopen shared by concurrent requests)."""
        task = self.tasks.get(backend_id)
        if task is None:
            task = asyncio.ensure_future(self._reopen(backend_id))
            self._track(backend_id, task)
        return await asyncio.shield(task)

    async def _reopen(self, backend_id: str) -> BackendSession:
        shared = self.hub.sharing.shares(backend_id)  # refused at the cap: its shared session, asked again
        try:
            if shared:
                (found,) = (await self.hub.sharing.sessions_for([backend_id], self.client)).values()
                if isinstance(found, BaseException):
                    raise found
                session = found
            else:
                session = await asyncio.wait_for(
                    self.open_backend(backend_id), self.hub.settings.routing.startup_timeout
                )
        except HoplineError:
            raise
        except Exception as exc:
            limit = self.hub.settings.routing.startup_timeout
            why = (
                sharing.describe(exc, limit=limit)
                if isinstance(exc, asyncio.TimeoutError)
                else getattr(exc, "reason", None) or type(exc).__name__
            )
            raise UnavailableError(
                f"backend {backend_id} is unavailable: {why}", backend=backend_id, reason="start_failed"
            ) from None
        self.parked -= {backend_id}
        if self.backends is not None:
            self.backends[backend_id] = session
        if not shared:  # a shared session's subscriptions are refcounted there (sharing.subscription)
            await self._resubscribe(session)
        return session

    async def listable(self, method: str) -> dict[str, BackendSession]:
        """The backend sessions a list is composed from: the live ones and the parked ones
        (their cached lists stand; one without this list cached is reopened first)."""
        backends = await self.live_backends()
        parked = self.parked
        if parked:
            reopen = [
                b
                for b in parked
                if isinstance(backends.get(b), BackendSession) and backends[b].cached_list(method) is None
            ]  # type: ignore[union-attr]
            if reopen:
                limit = self.hub.settings.routing.list_timeout
                await asyncio.gather(
                    *(asyncio.wait_for(self._unpark(b), limit) for b in reopen), return_exceptions=True
                )
        return {
            b: s
            for b, s in backends.items()
            if isinstance(s, BackendSession) and (not s.is_closed() or b in self.parked)
        }

    async def unlisted(self, list_method: str, kind: str, name: str, request_id: Any) -> tuple[Any, Any]:
        """A name not in the composed catalogue. When its ``{backend}{delimiter}`` prefix names
        (or in Reverse and Sidecar mode, when the one backend is) a configured backend this session cannot reach
        now (parked and failing to start,
        reconnecting, failed), the answer is that backend's -31001, not an unknown name;
        a parked backend is reopened first and the name looked up again. In Reverse and
        Sidecar mode a name the backend does not list goes to it as is (its own answer)."""
        g = self.hub
        if g.routes.reverse:  # Reverse/Sidecar: every name is the one backend's
            backend_id = g.routes.single
        else:
            head = g.routes.namespace.split(name)
            backend_id = head[0] if head is not None else None
        if backend_id is not None and backend_id in g.registry.connectors:
            found = (self.backends or {}).get(backend_id)
            if backend_id in self.parked:
                await self._unpark(backend_id)
                catalog = await self.client.catalog(list_method)
                entry = catalog.resolve(name)
                if entry is not None:
                    return entry, catalog
            elif not isinstance(found, BackendSession) or found.is_closed():
                raise _unavailable(backend_id, found, request_id)
            if g.routes.reverse:  # the client believes it talks to the server: the server answers
                return Entry(name, backend_id, name), await self.client.catalog(list_method)
        raise InvalidParams(f"Unknown {kind}: {name!r}", request_id=request_id)

    def _schedule_reconnect(self, backend_id: str) -> None:
        """Keep trying a backend that failed or went away; when it answers, its
        capabilities reappear and the client gets the CHANGE-SIGNAL (draft §6.7)."""
        if backend_id in self.tasks or self.client.end.is_closed():
            return
        task = asyncio.create_task(self._reconnect(backend_id), name=f"reconnect-{backend_id}")
        self.tasks[backend_id] = task
        task.add_done_callback(lambda _t, b=backend_id: self.tasks.pop(b, None))

    async def _reconnect(self, backend_id: str) -> None:
        delay = self.hub.settings.routing.retry_after
        while not self.client.end.is_closed() and backend_id in self.hub.registry.connectors:
            await asyncio.sleep(random.uniform(delay / 2, delay))  # jittered: sessions do not reconnect in lockstep
            try:
                (found,) = (await self.hub.sharing.sessions_for([backend_id], self.client)).values()
            except Exception as exc:  # never let a reconnect loop die silently
                found = exc
            if isinstance(found, BackendSession):
                if self.backends is not None:
                    self.backends[backend_id] = found
                log.info("backend %s is back", backend_id)
                await self._resubscribe(found)
                self.client.surface_changed()
                return
            delay = min(delay * 2, 60.0)

    async def _resubscribe(self, session: BackendSession) -> None:
        """A new backend session knows none of this client's resource subscriptions: renew them."""
        for uri in sorted(self.client.subscriptions.get(session.id, ())):
            try:
                await session.call("resources/subscribe", {"uri": uri})
            except Exception as exc:
                log.warning("backend %s: could not renew the subscription to %s: %s", session.id, uri, exc)

    def _backend_lost(self, backend: BackendSession) -> None:
        if self.backends is not None and self.backends.get(backend.id) is backend:
            self.backends[backend.id] = UnavailableError(f"backend {backend.id} went away", backend=backend.id)
            self.client.surface_changed()
            self._schedule_reconnect(backend.id)

    async def reloaded(self, gone: list[str], added: list[str]) -> None:
        """The configuration changed under this session: drop what went, connect what came."""
        if self.backends is None:
            return  # not connected yet: the next request sees the new configuration
        self.parked -= set(gone)
        for backend_id in gone:
            found = self.backends.pop(backend_id, None)
            task = self.tasks.pop(backend_id, None)
            if task is not None:
                task.cancel()
            if isinstance(found, BackendSession) and found in self.owned:
                self.owned.remove(found)
                await found.aclose()
        if added:
            self.backends.update(await self.hub.sharing.sessions_for(added, self.client))
            for backend_id in added:
                if not isinstance(self.backends.get(backend_id), BackendSession):
                    self._schedule_reconnect(backend_id)
        self.client.surface_changed()

    async def backend(self, backend_id: str) -> BackendSession:
        backends = self.backends
        if backends is not None and backend_id not in self.parked:
            # live_backends' own test, without its coroutine and generator: when no session is
            # closed it hands the table back untouched (bench/profile_call.py: 7 calls fewer per call)
            for session in backends.values():
                if isinstance(session, BackendSession) and session.peer.closed_reason is not None:
                    break
            else:
                found = backends.get(backend_id)
                if isinstance(found, BackendSession):
                    return found
        found = (await self.live_backends()).get(backend_id)
        if still_starting(found):  # a start the handshake did not wait for: a call to it waits for it
            found = await self._started_late(backend_id, found)
        if backend_id in self.parked:
            return await self._unpark(backend_id)
        if not isinstance(found, BackendSession) or found.is_closed():
            raise _unavailable(backend_id, found)
        return found


def still_starting(found: Any) -> bool:
    """Whether a session's entry for a backend stands for a start its handshake did not wait for."""
    return isinstance(found, UnavailableError) and (found.data or {}).get("reason") == "starting"


def _pooled(connector: Any) -> bool:
    return getattr(connector, "children", None) is not None  # StdioBackends: its children come from a ChildPool


def _unavailable(backend_id: str, found: Any, request_id: Any = None) -> UnavailableError:
    """-31001 naming the backend; the reason it failed with, when it said one (a fresh
    error each time: the stored one is never re-raised)."""
    error = UnavailableError(
        f"backend {backend_id} is unavailable", backend=backend_id, reason="backend_unavailable", request_id=request_id
    )
    if isinstance(found, UnavailableError):
        error.message, error.data = found.message, dict(found.data or {})
        error.args = (found.message,)
    return error
