"""Shared backend sessions (issue 12): one backend session serves many client sessions,
and no client can tell it from a session of its own.

Who shares (``share``, :meth:`Sharing.base_key`): ``shared`` backends, every client
session; ``principal`` backends (the default for ``command``), the client sessions of one
principal (a child per principal: nothing a backend holds in memory reaches another);
an anonymous client on a listener that is not loopback is a principal of its own (its
session's :meth:`Sharing.sharer`) unless ``routing.share_anonymous``. Per-principal
children are given back to the pool when idle (``idle_timeout``, or another principal
needs the slot at the cap, :meth:`Sharing._reclaim`); the next call starts one afresh.

Which session a caller gets (:meth:`Sharing.key`):

- a **2026-07-28 backend** gets the client's capabilities with every request
  (``BackendSession.meta_for``), so one session serves every capability set: the
  *base* key (the backend id, or ``(backend id, principal)`` where credentials depend
  on the caller);
- a **handshake-era backend** fixes the client's capabilities at ``initialize`` (servers
  register tools by them), so there is one session per distinct capability set,
  keyed ``(backend id, principal or None, canonical JSON of the capabilities)``.
  Handshake clients bring what they sent in ``initialize``, 2026-07-28 clients what
  their ``_meta`` declares. At most ``routing.shared_capability_sets`` such sessions
  per backend beyond the one declaring none; past that a caller gets the open session
  of the largest capability set it declared a superset of (else the one declaring
  none), counted as ``capability_fallback``.

The era is learnt from the first session and remembered (``only``): a backend that
answered a 2026-07-28 probe with the handshake is handshake-only, and one that refused
``initialize`` is modern-only. Handshake clients prefer a handshake-era session (as
their own would be), except on ``stateless: true`` backends, which keep one session in
the 2026-07-28 era where the backend speaks it (there a handshake client gets
``input_required`` mediated, README "Version mediation").

Traffic the backend starts goes by :class:`~hopline.layers.discovery.shared.Owners`:
server→client requests and unowned notifications to the one client with a call in
flight, else refused (requests, with a JSON-RPC error) or dropped (notifications),
and counted; ``resources/updated`` to the clients subscribed to that URI there; list
changes to every client.

A shared session that goes away is replaced once: every client using it is told (the
CHANGE-SIGNAL, as for a session of its own), one respawn task per key retries with
backoff, and the next call re-acquires it through the backend's lock (never one
reconnect per client). The replacement renews the union of the subscriptions once and
the logging level.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

import orjson

from hopline.binding import META_SUBSCRIPTION_ID, Era
from hopline.context import ANONYMOUS, Principal
from hopline.jsonrpc import Message, UnavailableError, notification
from hopline.jsonrpc import result as reply
from hopline.layers.discovery.backend import CHANGED, BackendSession
from hopline.layers.session import task_calls
from hopline.layers.transport.channel import Pooled

if TYPE_CHECKING:
    from hopline.layers.discovery.registry import Registry
    from hopline.layers.session.hub import Hub

log = logging.getLogger("hopline.gateway")
NONE = b"{}"
RENEW_TIMEOUT = 10.0  # seconds each renewed subscription (or level) may take on a replacement


def describe(
    exc: BaseException, backend_id: str | None = None, *, limit: float | None = None, said: str | None = None
) -> str:
    """Why a backend failed, for a line that names it already: without the backend's
    own ``backend X unavailable:`` and ``X:`` prefixes (once, not twice or three times).
    ``limit``: the ``routing.startup_timeout`` a start outlasted; ``said``: what its child
    said outside the protocol (``StdioChild.said``), for serve's log and status."""
    if isinstance(exc, asyncio.TimeoutError):
        text = "did not start in time"
        if limit is not None:
            text = f"did not start within {limit:g} s (routing.startup_timeout; cold npx servers often need more)"
    else:
        text = getattr(exc, "reason", None) or getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    if backend_id is not None:
        for prefix in (
            f"backend {backend_id} unavailable: ",
            f"backend {backend_id} is unavailable: ",
            "backend unavailable: ",
            f"{backend_id}: ",
        ):
            if text.startswith(prefix):
                text = text[len(prefix) :]
    return f"{text}; {said}" if said else text


def unavailable_line(
    backend_id: str, exc: BaseException, *, limit: float | None = None, said: str | None = None
) -> str:
    """``backend X unavailable: why``, naming the backend once."""
    why = describe(exc, backend_id, limit=limit, said=said)
    return why if why.startswith(f"backend {backend_id} ") else f"backend {backend_id} unavailable: {why}"


def canonical(caps: dict[str, Any] | None) -> bytes:
    """The capability set as a key: sorted-key JSON (``{}`` for none)."""
    return orjson.dumps(caps, option=orjson.OPT_SORT_KEYS) if caps else NONE


def request(method: str, params: dict[str, Any] | None = None) -> Message:
    """A request of the gateway's own (its id is mapped on the way out)."""
    return Message({"jsonrpc": "2.0", "id": 0, "method": method, "params": params or {}})


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def intersect_roots(lists: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The roots inside some root of every list (of two nested ones, the narrower): what
    every declarer grants. Nothing for no lists."""
    if not lists:
        return []
    kept = lists[0]
    for other in lists[1:]:
        narrowed: dict[str, dict[str, Any]] = {}
        for a in kept:
            for b in other:
                if _within(a["uri"], b["uri"]):
                    narrowed.setdefault(a["uri"], a)
                elif _within(b["uri"], a["uri"]):
                    narrowed.setdefault(b["uri"], b)
        kept = list(narrowed.values())
    return list({r["uri"]: r for r in kept}.values())


def _subset(have: dict[str, Any], want: dict[str, Any]) -> bool:
    return all(k in want and want[k] == v for k, v in have.items())


MAX_FAILED = 4096  # failed starts remembered (one per backend, or per backend and caller)


class Sharing:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        # base key (backend id, or (backend id, principal key)), or (backend id, principal key | None, capability set)
        self.shared: dict[Any, BackendSession] = {}
        self.locks: dict[str, asyncio.Lock] = {}  # backend → the lock its shared sessions start under
        # backend (or (backend, caller) where credentials are per caller) → (retry at, error, failed at)
        self.failed: dict[Any, tuple[float, BaseException, float]] = {}
        self.only: dict[str, Era] = {}  # backend → the one era it speaks, once learnt
        self.counts: Counter[tuple[str, str]] = Counter()  # (backend, event) → times
        self.caps: dict[Any, dict[str, Any]] = {}  # key → the capabilities its session declared
        self._respawning: dict[Any, asyncio.Task] = {}
        self._starting: dict[str, asyncio.Future[BackendSession]] = {}  # backend → its session start in progress

    def shares(self, backend_id: str) -> bool:
        """Whether client sessions share this backend's sessions (``share``/``stateless``)."""
        return self.hub.settings.backends[backend_id].shares()

    def sharer(self, owner: ShareOwner) -> Principal:
        """Who ``owner`` shares backend sessions as: its principal; an anonymous client on a
        listener that is not loopback, a principal of its own (unless ``routing.share_anonymous``)."""
        principal = owner.principal
        settings = self.hub.settings
        if principal != ANONYMOUS or settings.routing.share_anonymous or settings.listen.loopback():
            return principal
        own = getattr(owner, "sharer", None)
        if own is None:
            own = owner.sharer = Principal(ANONYMOUS.subject, issuer=f"hopline-session:{secrets.token_hex(12)}")
        return own

    def ready(self, ids: list[str], owner: ShareOwner) -> dict[str, BackendSession | BaseException] | None:
        """The open shared sessions a stateless ``owner`` uses, without waiting; None if one is not up."""
        caps = owner.client_capabilities
        principal = self.sharer(owner)
        out: dict[str, BackendSession | BaseException] = {}
        for backend_id in ids:
            found = self.lookup(backend_id, principal, caps, Era.MODERN)
            if found is None:
                return None
            out[backend_id] = found
        return out

    async def sessions_for(self, ids: list[str], owner: ShareOwner) -> dict[str, BackendSession | BaseException]:
        """Connect ``owner`` to every backend in ``ids`` concurrently: to the shared session of
        each backend it shares, else to one of its own. One that fails or is slow (past
        ``routing.startup_timeout``) does not block the rest; its error stands in for it."""
        startup = self.hub.settings.routing.startup_timeout
        caps = owner.client_capabilities
        principal = self.sharer(owner)
        if not owner.stateful:  # the common case for 2026-07-28 requests: every shared session is up
            ready = self.ready(ids, owner)
            if ready is not None:
                return ready

        async def one(backend_id: str) -> BackendSession:
            if not owner.stateful or self.shares(backend_id):
                return await self.session(
                    backend_id, principal, owner.arrival, caps, self.prefer(backend_id, owner.stateful), owner
                )
            return await owner.links.open_backend(backend_id)

        results = await asyncio.gather(*(asyncio.wait_for(one(b), startup) for b in ids), return_exceptions=True)
        out: dict[str, BackendSession | BaseException] = {}
        for backend_id, result in zip(ids, results):
            if isinstance(result, BaseException):
                said = self.hub.registry.said(backend_id)
                log.warning("%s", unavailable_line(backend_id, result, limit=startup, said=said))
            out[backend_id] = result
        return out

    async def remove(self, backend_id: str) -> None:
        """A backend left the configuration: close its shared sessions."""
        gone = [
            self.shared.pop(k)
            for k in list(self.shared)
            if k == backend_id or (isinstance(k, tuple) and k[0] == backend_id)
        ]
        for k in [k for k in self.failed if k == backend_id or (isinstance(k, tuple) and k[0] == backend_id)]:
            del self.failed[k]
        await asyncio.gather(*(s.aclose() for s in gone), return_exceptions=True)

    def count(self, backend_id: str, event: str) -> None:
        self.counts[(backend_id, event)] += 1
        metrics = self.hub.observability.metrics
        if metrics is not None:
            metrics.shared_event(backend_id, event)

    def prefer(self, backend_id: str, stateful: bool) -> Era:
        if not stateful or self.hub.settings.backends[backend_id].stateless:
            return Era.MODERN
        return Era.HANDSHAKE

    def base_key(self, backend_id: str, principal: Principal) -> Any:
        """What callers of a backend share: the backend, or ``(backend, principal key)`` where
        the credentials depend on the caller or the backend is shared per principal."""
        base = self.hub.registry.share_key(backend_id, principal)
        if not isinstance(base, tuple) and self.hub.settings.backends[backend_id].per_principal():
            return (backend_id, principal.key)
        return base

    def key(
        self, backend_id: str, principal: Principal, caps: dict[str, Any] | None, prefer: Era
    ) -> tuple[Any, dict[str, Any]]:
        """The key of the session this caller shares, and the capabilities it declares (a
        2026-07-28 session drops them once it knows its era: they travel per request)."""
        base = self.base_key(backend_id, principal)
        only = self.only.get(backend_id)
        if only is Era.MODERN or (prefer is Era.MODERN and only is not Era.HANDSHAKE):
            return base, caps or {}
        return (backend_id, principal.key if isinstance(base, tuple) else None, canonical(caps)), caps or {}

    def lookup(
        self, backend_id: str, principal: Principal, caps: dict[str, Any] | None, prefer: Era
    ) -> BackendSession | None:
        """The open session this caller shares, without waiting (None: see :meth:`session`)."""
        found = self.shared.get(self.key(backend_id, principal, caps, prefer)[0])
        return found if found is not None and not found.is_closed() else None

    def _bounded(self, key: Any, caps: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Within ``routing.shared_capability_sets``: ``key`` itself, or the fallback."""
        if not isinstance(key, tuple) or len(key) != 3 or key[2] == NONE:
            return key, caps
        shared = self.shared
        open_sets = [
            k
            for k, s in shared.items()
            if isinstance(k, tuple) and len(k) == 3 and k[:2] == key[:2] and k[2] != NONE and not s.is_closed()
        ]
        if key in open_sets or len(open_sets) < self.hub.settings.routing.shared_capability_sets:
            return key, caps
        subsets = [k for k in open_sets if _subset(self.caps.get(k, {}), caps)]
        self.count(key[0], "capability_fallback")
        if subsets:
            best = max(subsets, key=lambda k: len(self.caps.get(k, {})))
            return best, self.caps.get(best, {})
        return (*key[:2], NONE), {}

    async def session(
        self,
        backend_id: str,
        principal: Principal = ANONYMOUS,
        chain: list[Any] | None = None,
        caps: dict[str, Any] | None = None,
        prefer: Era = Era.MODERN,
        owner: Any = None,
    ) -> BackendSession:
        """The shared session of this caller (started if need be; ``owner``: the client
        session it starts for, which what the backend asks while no call is in flight may
        go to)."""
        key, declared = self.key(backend_id, principal, caps, prefer)
        found = self.shared.get(key)
        if found is not None and not found.is_closed():
            return found
        # one start at a time per backend (per backend and principal where each has its own)
        fail_key = self.base_key(backend_id, principal)
        if len(self.locks) >= MAX_FAILED:  # per-principal locks: bounded, the idle ones dropped
            self.locks = {k: lock for k, lock in self.locks.items() if lock.locked()}
        async with self.locks.setdefault(fail_key, asyncio.Lock()):
            pending = self._starting.get(fail_key)
            if (
                pending is not None and not pending.done()
            ):  # a start its caller gave up on (startup_timeout) goes on: wait for it
                with contextlib.suppress(Exception):
                    await asyncio.shield(pending)
            key, declared = self._bounded(
                *self.key(backend_id, principal, caps, prefer)
            )  # the era may have been learnt meanwhile
            old = self.shared.get(key)
            if old is not None and not old.is_closed():
                return old
            # one caller's failed start (its credential refused) holds back that caller only
            failed = self.failed.get(fail_key)
            if failed is not None and asyncio.get_running_loop().time() < failed[0]:
                raise failed[1]  # don't retry a failed start on every request
            start = asyncio.ensure_future(
                self._start(backend_id, principal, chain, key, declared, prefer, old, failed, fail_key, owner)
            )
            start.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved, whoever waits
            self._starting[fail_key] = start
            start.add_done_callback(
                lambda f, k=fail_key: self._starting.pop(k, None) if self._starting.get(k) is f else None
            )
            return await asyncio.shield(start)

    async def _start(
        self,
        backend_id: str,
        principal: Principal,
        chain: Any,
        key: Any,
        declared: dict[str, Any],
        prefer: Era,
        old: BackendSession | None,
        failed: Any,
        fail_key: Any = None,
        owner: Any = None,
    ) -> BackendSession:
        """Start one shared session (a task: callers that stop waiting do not cancel it)."""
        g = self.hub
        loop = asyncio.get_running_loop()
        holder: list[BackendSession] = []
        try:
            session = await g.registry.connect(
                backend_id,
                era=prefer,
                client_capabilities=declared,
                principal=principal,
                chain=chain,
                on_request=self._request(backend_id, holder, None if owner is None else weakref.ref(owner)),
                on_notification=self._notification(backend_id, holder),
            )
        except Exception as exc:
            if (getattr(exc, "data", None) or {}).get("reason") == "at_capacity":
                raise  # the pool's back-pressure, not a failed start: the next call asks the pool again
            delay = g.settings.routing.retry_after if failed is None else min(60.0, 2 * (failed[0] - failed[2]))
            if len(self.failed) >= MAX_FAILED:  # per-caller keys: bounded, expired ones first, then the oldest
                now = loop.time()
                self.failed = {k: v for k, v in self.failed.items() if v[0] > now}
                while len(self.failed) >= MAX_FAILED:
                    del self.failed[next(iter(self.failed))]
            self.failed[backend_id if fail_key is None else fail_key] = (loop.time() + delay, exc, loop.time())
            raise
        if self.failed.pop(backend_id if fail_key is None else fail_key, None) is not None:
            log.info("backend %s: up (its last start had failed)", backend_id)
        holder.append(session)
        key, old = self._settle(backend_id, principal, session, key, declared, prefer, old)
        if self.shared.get(key) is not session:  # the era put it where an open session already is
            asyncio.ensure_future(session.aclose())
            return self.shared[key]
        if old is not None:
            await self._replaced(old, session)
        return session

    def _settle(
        self,
        backend_id: str,
        principal: Principal,
        session: BackendSession,
        key: Any,
        declared: dict[str, Any],
        prefer: Era,
        old: BackendSession | None,
    ) -> tuple[Any, BackendSession | None]:
        """File a new session under the key its era calls for; learn the backend's era."""
        g = self.hub
        era = session.info.era
        if era is not prefer:
            self.only[backend_id] = era
        if era is Era.MODERN:
            session.client_capabilities = (
                declared
            ) = {}  # its own requests (lists) declare nothing; callers' travel per request
            base = self.base_key(backend_id, principal)
            if base != key:
                key, old = base, self.shared.get(base)
                if old is not None and not old.is_closed():
                    return key, old
        elif not isinstance(key, tuple) or len(key) != 3:  # a handshake-only backend asked for its base session
            key = self.key(backend_id, principal, declared, Era.HANDSHAKE)[0]
            old = self.shared.get(key)
            if old is not None and not old.is_closed():
                return key, old
        if old is not None:
            session.owners.adopt(old.owners)  # before the listens attach, so they do not subscribe again
        session.on_changed = g.shared_changed
        session.on_closed = lambda s, k=key, p=principal, c=declared, e=prefer: self._lost(s, k, p, c, e)
        self.shared[key] = session
        self.caps[key] = declared
        channel = session.peer.channel
        if isinstance(key, tuple) and isinstance(channel, Pooled) and g.settings.backends[backend_id].per_principal():
            channel.reclaim = lambda: self._reclaim(key, session, channel)  # an idle principal's child goes back
        listens = g.backend_listens
        listening = listens.sessions.get(backend_id)
        if key == backend_id or (
            era is Era.HANDSHAKE and key[1] is None and (listening is None or listening.is_closed())
        ):
            listens.attach(backend_id, session)  # one listen per backend, on a session all callers share
        return key, old

    # -- a session replaced ------------------------------------------------------------------
    def users(self, session: BackendSession) -> list[Any]:
        return [s for s in self.hub.sessions if s.backends is not None and s.backends.get(session.id) is session]

    async def _reclaim(self, key: Any, session: BackendSession, lease: Pooled) -> bool:
        """The pool asks for a per-principal session's child back (idle, or wanted at the cap):
        given when nothing is in flight and no client is subscribed there. Its clients keep
        it in their tables, closed; their next call takes a fresh one (``reacquire``)."""
        if lease.busy() or session.owners.inflight or any(session.owners.subscribers.values()):
            return False
        if self.shared.get(key) is session:
            del self.shared[key]
            self.caps.pop(key, None)
        session.on_closed = None  # not a loss: no respawn, no CHANGE-SIGNAL
        log.info("backend %s: gave back an idle principal's child (%s)", session.id, lease.pid)
        await session.aclose()
        return True

    def forget(self, owner: ShareOwner) -> None:
        """A client session that was a principal of its own closed: its sessions go."""
        own = getattr(owner, "sharer", None)
        if own is None:
            return
        for key in [k for k in self.shared if isinstance(k, tuple) and k[1] == own.key]:
            if self.shared[key].owners.inflight:
                continue  # a call held across rounds (held_invoke.py): reaped when idle
            session = self.shared.pop(key)
            self.caps.pop(key, None)
            session.on_closed = None
            asyncio.ensure_future(session.aclose())

    def _lost(self, session: BackendSession, key: Any, principal: Principal, caps: dict[str, Any], prefer: Era) -> None:
        users = self.users(session)
        if not users and self.shared.get(key) is session:  # nobody to reconnect it for: not kept
            del self.shared[key]
            self.caps.pop(key, None)
        log.warning(
            "backend %s: a shared session went away (%s); %d client sessions used it",
            session.id,
            session.peer.closed_reason,
            len(users),
        )
        self.count(session.id, "session_lost")
        for user in users:
            user.surface_changed()
        if users and key not in self._respawning:
            task = asyncio.ensure_future(self._respawn(session, key, principal, caps, prefer))
            self._respawning[key] = task
            task.add_done_callback(lambda _t: self._respawning.pop(key, None))

    async def _respawn(
        self, old: BackendSession, key: Any, principal: Principal, caps: dict[str, Any], prefer: Era
    ) -> None:
        """The one reconnect loop of a shared session (jittered, doubling to 60 s)."""
        g = self.hub
        delay = g.settings.routing.retry_after
        while old.id in g.registry.connectors and self.shared.get(key) is old and self.users(old):
            await asyncio.sleep(random.uniform(delay / 2, delay))
            try:
                await self.session(old.id, principal, None, caps, prefer)
            except Exception as exc:
                log.info("backend %s: shared session not back yet: %s", old.id, describe(exc, old.id))
                delay = min(delay * 2, 60.0)

    async def _replaced(self, old: BackendSession, new: BackendSession) -> None:
        """``new`` stands in for ``old``: its clients move over (with the CHANGE-SIGNAL), the
        union of their subscriptions is renewed once, and the logging level."""
        for uri in sorted(new.owners.subscribers):
            try:
                await new.call("resources/subscribe", {"uri": uri}, timeout=RENEW_TIMEOUT)
            except Exception as exc:
                log.warning("backend %s: could not renew the subscription to %s: %s", new.id, uri, exc)
        level = new.owners.level_change()  # adopt() forgot what was sent
        if level is not None:
            with contextlib.suppress(Exception):
                await new.call("logging/setLevel", {"level": level}, timeout=RENEW_TIMEOUT)
        for user in self.users(old):
            user.backends[old.id] = new
            user.surface_changed()
        log.info("backend %s: shared session replaced", new.id)

    async def aclose(self) -> None:
        tasks = [*self._respawning.values(), *self._starting.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        shared, self.shared = list(self.shared.values()), {}
        await asyncio.gather(*(s.aclose() for s in shared), return_exceptions=True)

    # -- traffic the backend starts ---------------------------------------------------------------
    def _request(self, backend_id: str, holder: list[BackendSession], starter: Any = None):
        """A request the backend sends: to the client it belongs to (the one with a call in
        flight; with none in flight, the one client session using this session, or the one it
        was started for), a 2026-07-28 one through its held call; else refused, except
        ``roots/list``, answered with the roots every client of the session declared (:meth:`_vouched`)."""

        async def route(message: Message) -> Message:
            session = holder[0] if holder else None
            owners = session.owners if session is not None else None
            owner = owners.sole() if owners is not None else None
            if owner is None and session is not None and not session.owners.inflight:
                clients = self._clients(session, starter)
                if len(clients) == 1:
                    owner = clients[0]
            if owner is not None and owner.stateful:
                return await owner._server_request_from(backend_id)(message)
            held = getattr(owner, "held_call", None)
            if held is not None:  # a 2026-07-28 client's call: asked through input_required (held_invoke.py)
                return await held.on_request(message)
            self.count(backend_id, "request_refused")
            if message.method == "roots/list" and session is not None:
                return reply(message.id, {"roots": await self._vouched(backend_id, session, starter)})
            if owner is not None:
                why = "a 2026-07-28 client cannot take it"
            else:
                why = f"{len(owners.inflight) if owners else 0} client sessions have calls in flight"
            message_text = f"{message.method} from shared backend {backend_id} has no single client to go to ({why})"
            raise UnavailableError(message_text, backend=backend_id, reason="no_client")

        return route

    def _clients(self, session: BackendSession, starter: Any) -> list[Any]:
        """The open handshake-era client sessions using ``session`` (and the one it was started for)."""
        clients = [c for c in self.users(session) if not c.end.is_closed()]
        first = starter() if starter is not None else None
        if first is not None and first.stateful and not first.end.is_closed() and first not in clients:
            clients.append(first)
        return clients

    async def _vouched(self, backend_id: str, session: BackendSession, starter: Any) -> list[dict[str, Any]]:
        """The roots no client of ``session`` would find broader than its own: the
        intersection of what each declares, asked of each (those with calls in flight
        included); empty when a client cannot be asked or none is known."""
        clients = self._clients(session, starter)
        clients += [o for o in session.owners.inflight if getattr(o, "stateful", False) and o not in clients]
        if not clients:
            return []
        asks = [
            asyncio.wait_for(c._server_request_from(backend_id)(request("roots/list")), RENEW_TIMEOUT) for c in clients
        ]
        answers = await asyncio.gather(*asks, return_exceptions=True)
        lists = []
        for answer in answers:
            roots = answer.body.get("result", {}).get("roots") if isinstance(answer, Message) else None
            if not isinstance(roots, list):
                return []
            lists.append([r for r in roots if isinstance(r, dict) and isinstance(r.get("uri"), str)])
        return intersect_roots(lists)

    def _notification(self, backend_id: str, holder: list[BackendSession]):
        g = self.hub

        def deliver(message: Message) -> None:
            method = message.method or ""
            session = holder[0] if holder else None
            if method in CHANGED or session is None:
                return  # list changes arrive through on_changed, to every client
            if method == "notifications/resources/updated" and isinstance(message.params.get("uri"), str):
                uri = message.params["uri"]
                if g.backend_listens.sessions.get(backend_id) is session:
                    g.backend_listens.updated(backend_id, uri, message.params)
                subscribers = [o for o in session.owners.subscribed(uri) if hasattr(o, "end")]
                if subscribers:
                    exposed = notification(method, {**message.params, "uri": g.routes.uris.expose(backend_id, uri)})
                    for owner in subscribers:
                        owner.end.notify(exposed)
                return
            if g.task_push.deliver(backend_id, session, message):
                return  # a task's push update (or a task listen's ack): to the listen that asked, and only there
            if method == "notifications/subscriptions/acknowledged":
                meta = message.params.get("_meta")
                g.backend_listens.acknowledged(
                    backend_id, meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
                )
                return
            if task_calls.is_task_message(message):  # a task's news: to the client session whose task it is
                if not task_calls.deliver_to_owner(g.sessions, backend_id, session, message):
                    self.count(backend_id, "notification_dropped")
                return
            owner = session.owners.sole()
            if owner is None:
                self.count(backend_id, "log_dropped" if method == "notifications/message" else "notification_dropped")
                return
            if method == "notifications/message" and not session.owners.admits(owner, message.params.get("level")):
                return  # below the level this client asked for
            owner.end.notify(message)

        return deliver


# -- a client session's side (GatewaySession calls these for the shared sessions it uses) ----
SUBSCRIPTIONS = ("resources/subscribe", "resources/unsubscribe")


class SharingHub(Protocol):
    """What the module functions below reach beyond the client session: the configured
    backends and the shared backend sessions."""

    registry: Registry
    sharing: Sharing


class OwnLinks(Protocol):
    """Of a client session's backend links (``links.BackendLinks``): its own sessions, its parked
    backends, and a backend session of its own (a backend that is not shared)."""

    owned: list[BackendSession]
    parked: frozenset[str]

    async def open_backend(self, backend_id: str) -> BackendSession: ...


class ShareOwner(Protocol):
    """A client session as the shared backend sessions are taken for it (a ``GatewaySession``):
    who it shares as, what it declared, its era and hop sequence, its own backend links."""

    principal: Principal
    sharer: Principal | None
    client_capabilities: dict[str, Any]
    stateful: bool
    arrival: list[Any]
    links: OwnLinks


class SharingClient(Protocol):
    """A client session, as its shared backend sessions see it (a ``GatewaySession``)."""

    hub: SharingHub
    stateful: bool
    backends: dict[str, BackendSession | BaseException] | None
    links: OwnLinks


def shared_of(gs: SharingClient) -> list[BackendSession]:
    """The shared backend sessions ``gs`` uses (the ones it does not own)."""
    return [s for s in (gs.backends or {}).values() if isinstance(s, BackendSession) and s not in gs.links.owned]


async def reacquire(gs: SharingClient, backends: dict[str, Any]) -> None:
    """Closed shared sessions in ``backends`` are taken afresh from the gateway (which
    replaces each one once, under its lock); ones that do not start stay as they are,
    so the call fails as unavailable and the next one tries again."""
    # Only shared backends: a parked isolated session is closed on purpose and reopened by its owner.
    stale = [
        b
        for b, s in backends.items()
        if isinstance(s, BackendSession)
        and s.is_closed()
        and s not in gs.links.owned
        and b in gs.hub.registry.connectors
        and gs.hub.sharing.shares(b)
        and b not in gs.links.parked
    ]
    if stale:
        fresh = await gs.hub.sharing.sessions_for(stale, gs)
        backends.update({b: s for b, s in fresh.items() if isinstance(s, BackendSession)})


async def subscription(
    gs: SharingClient,
    session: BackendSession,
    method: str,
    params: dict[str, Any],
    send: Callable[[], Awaitable[Message]],
) -> Message:
    """``resources/subscribe``/``unsubscribe`` on a shared session, refcounted: only the
    URI's first subscriber and its last unsubscriber reach the backend; the others are
    answered here (what the backend would have said: an empty result)."""
    uri = params.get("uri")
    owners = session.owners
    if not isinstance(uri, str):
        return await send()
    if method == "resources/subscribe":
        if not owners.subscribe(uri, gs):
            return Message({"jsonrpc": "2.0", "id": 0, "result": {}})
        try:
            answer = await send()
        except BaseException:
            owners.unsubscribe(uri, gs)
            raise
        if "error" in answer.body:
            owners.unsubscribe(uri, gs)
        return answer
    if not owners.unsubscribe(uri, gs):
        return Message({"jsonrpc": "2.0", "id": 0, "result": {}})
    return await send()


async def set_level(gs: SharingClient, session: BackendSession, params: dict[str, Any]) -> None:
    """``logging/setLevel`` on a shared session: the backend gets the most verbose level
    any of its clients asked for; each client is then delivered only lines at its own level."""
    level = session.owners.set_level(gs, params.get("level"))
    if level is not None:
        await session.call("logging/setLevel", {**params, "level": level})


async def release(gs: SharingClient) -> None:
    """A client session closed: its subscriptions and level on shared sessions are let go
    (the backend gets ``resources/unsubscribe`` for URIs nobody else wants). Bounded."""

    if not gs.stateful:
        return  # a 2026-07-28 exchange neither subscribes (it listens) nor sets levels; its calls have left

    async def one(session: BackendSession) -> None:
        uris, level = session.owners.forget(gs)
        if session.is_closed():
            return
        for uri in uris:
            await session.call("resources/unsubscribe", {"uri": uri}, timeout=RENEW_TIMEOUT)
        if level is not None:
            await session.call("logging/setLevel", {"level": level}, timeout=RENEW_TIMEOUT)

    await asyncio.gather(*(one(s) for s in shared_of(gs)), return_exceptions=True)
