"""One initialized session with one backend (Layer 2): era, capabilities, cached lists.

:meth:`BackendSession.open` takes a fresh channel to a backend and finds its era
the way reference/mcp-wire.md §5 prescribes for a dual-era client: probe with
``server/discover`` *first* (an SDK stdio server locks its era on the first
request it sees); a result naming 2026-07-28 means modern, anything else means
the handshake era, where the gateway sends its own ``initialize`` (draft §7.1:
every mode but Relay dual-handshakes).

Lists (tools, prompts, resources, templates) are fetched across every backend
page and cached until the backend says they changed (``list_changed``) or the
session is replaced; concurrent fetches of one list share a single request.

Requests sent to a modern backend carry the per-request ``_meta`` it requires;
the client's own ``_meta`` keys (trace context, unknown keys) travel unchanged.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from hopline import NAME, __version__
from hopline.binding import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE,
    LATEST_MODERN,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    LISTINGS,
    Era,
)
from hopline.jsonrpc import Message, PeerError, UnavailableError
from hopline.layers.discovery.shared import Owners
from hopline.layers.transport.rpc import OnNotification, OnRequest, RpcPeer
from hopline.layers.transport.channel import Channel

log = logging.getLogger("hopline.discovery")

# list method → (result key, capability that must be advertised)
LISTS = {method: (listing.key, listing.capability) for method, listing in LISTINGS.items()}
CHANGED: dict[str, tuple[str, ...]] = {}  # change signal → the lists it invalidates
for _listing in LISTINGS.values():
    CHANGED[_listing.changed] = (*CHANGED.get(_listing.changed, ()), _listing.method)
MAX_PAGES = 100
GATEWAY_INFO = {"name": NAME, "version": __version__}
_serials = itertools.count(1)


@dataclass
class BackendInfo:
    era: Era
    protocol_version: str
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None


class BackendSession:
    def __init__(
        self,
        backend_id: str,
        peer: RpcPeer,
        info: BackendInfo,
        client_capabilities: dict[str, Any],
        timeout: float | None,
    ) -> None:
        self.id = backend_id
        self.peer = peer
        self.info = info
        self.client_capabilities = client_capabilities
        self.timeout = timeout
        self._lists: dict[str, list[dict[str, Any]]] = {}
        self._fetching: dict[str, asyncio.Future[list[dict[str, Any]]]] = {}
        self._generation = 0  # bumped by every invalidation, so a fetch in flight cannot cache stale data
        self.serial = next(_serials)  # unique for the process lifetime (unlike id())
        self.on_changed: Callable[[BackendSession, str], None] | None = None
        self.on_closed: Callable[[BackendSession], None] | None = None
        self.list_failed_until: dict[str, float] = {}  # list method → loop time before which it is not retried
        self.owners = Owners()  # who has calls in flight, subscriptions, log levels (what a shared session routes by)

    @classmethod
    async def open(
        cls,
        backend_id: str,
        channel: Channel,
        *,
        client_capabilities: dict[str, Any] | None = None,
        on_request: OnRequest | None = None,
        on_notification: OnNotification | None = None,
        timeout: float | None = 30.0,
        prefer: Era = Era.MODERN,
        meta: dict[str, Any] | None = None,
    ) -> BackendSession:
        """``meta``: extra ``_meta`` for the handshake (the hop sequence, so that a loop
        of intermediaries is refused when it is first set up)."""
        caps = client_capabilities or {}
        holder: list[BackendSession] = []

        def notified(message: Message) -> None:
            if holder:
                holder[0]._notified(message)
            if on_notification is not None:
                on_notification(message)

        peer = RpcPeer(
            channel,
            name=backend_id,
            on_request=on_request,
            on_notification=notified,
            on_closed=lambda: holder and holder[0]._closed(),
        )
        try:
            info = await _handshake(peer, caps, timeout, prefer, meta or {})
        except BaseException:
            await peer.aclose()
            raise
        session = cls(backend_id, peer, info, caps, timeout)
        holder.append(session)
        return session

    # -- calls --------------------------------------------------------------------
    def meta_for(self, client_meta: dict[str, Any] | None) -> dict[str, Any]:
        meta = dict(client_meta or {})
        if self.info.era is Era.MODERN:
            meta[META_PROTOCOL_VERSION] = LATEST_MODERN
            meta.setdefault(META_CLIENT_CAPABILITIES, self.client_capabilities)
            meta.setdefault(META_CLIENT_INFO, GATEWAY_INFO)
        else:
            for key in (
                META_PROTOCOL_VERSION,
                META_CLIENT_CAPABILITIES,
                META_CLIENT_INFO,
                "io.modelcontextprotocol/logLevel",
            ):
                meta.pop(key, None)
        return meta

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        on_progress: Callable[[Message], None] | None = None,
        timeout: float | None = None,
        owner: Any = None,
    ) -> Message:
        """``owner``: the client the call is for (opaque); while it is in flight, what the
        backend sends on its own initiative may be routed to it (see :class:`Owners`)."""
        params = dict(params or {})
        meta = self.meta_for(params.get("_meta"))
        meta.pop("progressToken", None)  # the peer mints its own when on_progress is given
        if meta or self.info.era is Era.MODERN:
            params["_meta"] = meta
        else:
            params.pop("_meta", None)
        if owner is None:
            return await self.peer.call(method, params, timeout=timeout or self.timeout, on_progress=on_progress)
        self.owners.enter(owner)
        try:
            return await self.peer.call(method, params, timeout=timeout or self.timeout, on_progress=on_progress)
        finally:
            self.owners.leave(owner)

    def supports(self, capability: str) -> bool:
        return capability in self.info.capabilities

    # -- lists ----------------------------------------------------------------------
    def cached_list(self, method: str) -> list[dict[str, Any]] | None:
        """The list as cached now, without asking the backend (None if it must be fetched)."""
        _key, capability = LISTS[method]
        if not self.supports(capability):
            return []
        return self._lists.get(method)

    async def list_all(self, method: str, meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every item of one list, across pages; cached until the backend says it changed.
        ``meta`` goes with the fetch (the hop sequence); concurrent askers share one fetch."""
        key, capability = LISTS[method]
        if not self.supports(capability):
            return []
        if method in self._lists:
            return self._lists[method]
        pending = self._fetching.get(method)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch(method, key, meta))
            self._fetching[method] = pending
            pending.add_done_callback(lambda f, m=method: (self._fetching.pop(m, None), f.cancelled() or f.exception()))
        return await asyncio.shield(pending)

    async def _fetch(self, method: str, key: str, meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        generation = self._generation
        for _ in range(MAX_PAGES):
            params: dict[str, Any] = {"cursor": cursor} if cursor else {}
            if meta:
                params["_meta"] = meta
            answer = await self.call(method, params)
            result = _result(answer, method, self.id)
            page = result.get(key)
            if not isinstance(page, list):
                raise PeerError(f"backend {self.id} answered {method} without a {key!r} list")
            items.extend(i for i in page if isinstance(i, dict))
            cursor = result.get("nextCursor")
            if not cursor:
                break
        if generation == self._generation:  # not invalidated while fetching
            self._lists[method] = items
        return items

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever any cached list of this session may have changed."""
        return (self.serial, self._generation)

    def invalidate(self, methods: tuple[str, ...] | None = None) -> None:
        self._generation += 1
        if methods is None:
            self._lists = {}
        else:
            for m in methods:
                self._lists.pop(m, None)

    def _notified(self, message: Message) -> None:
        methods = CHANGED.get(message.method or "")
        if methods is not None:
            self.invalidate(methods)
            if self.on_changed is not None:
                self.on_changed(self, message.method or "")

    def _closed(self) -> None:
        if self.on_closed is not None:
            self.on_closed(self)

    def is_closed(self) -> bool:
        return (
            self.peer.closed_reason is not None
        )  # RpcPeer.is_closed, without its call (asked several times per request)

    async def aclose(self) -> None:
        await self.peer.aclose()

    def __repr__(self) -> str:
        return (
            f"<BackendSession {self.id} {self.info.era.value} {self.info.protocol_version} "
            f"closed={self.peer.closed_reason!r}>"
        )


def _result(answer: Message, method: str, backend_id: str) -> dict[str, Any]:
    body = answer.body
    if isinstance(body.get("result"), dict):
        return body["result"]
    err = body.get("error") or {}
    raise UnavailableError(
        f"backend {backend_id} failed {method}: {err.get('message', 'no result')}",
        backend=backend_id,
        reason="backend_error",
    )


async def _handshake(
    peer: RpcPeer, caps: dict[str, Any], timeout: float | None, prefer: Era, meta: dict[str, Any]
) -> BackendInfo:
    """Agree an era with a fresh backend connection, trying ``prefer`` first.

    A handshake-era client is best served by a handshake-era backend session
    (server→client requests then flow natively); stateless clients by a modern
    one. The first request an SDK stdio server sees locks its era, so the
    fallback is tried only after the preferred form was refused."""
    if prefer is Era.HANDSHAKE:
        info = await _initialize(peer, caps, timeout, meta)
        return info if info is not None else await _discover(peer, caps, timeout, meta) or _refused(peer)
    info = await _discover(peer, caps, timeout, meta)
    return info if info is not None else await _initialize(peer, caps, timeout, meta) or _refused(peer)


async def _discover(
    peer: RpcPeer, caps: dict[str, Any], timeout: float | None, extra: dict[str, Any]
) -> BackendInfo | None:
    meta = {
        **extra,
        META_PROTOCOL_VERSION: LATEST_MODERN,
        META_CLIENT_CAPABILITIES: caps,
        META_CLIENT_INFO: GATEWAY_INFO,
    }
    probe = await peer.call("server/discover", {"_meta": meta}, timeout=timeout)
    _hop_refusal(peer, probe)
    if _offers_modern(probe):  # -32022 naming a version hopline speaks: negotiate, once, with it
        probe = await peer.call("server/discover", {"_meta": meta}, timeout=timeout)
        _hop_refusal(peer, probe)
    result = probe.body.get("result")
    if isinstance(result, dict) and LATEST_MODERN in (result.get("supportedVersions") or []):
        server_info = (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
        return BackendInfo(
            Era.MODERN, LATEST_MODERN, result.get("capabilities") or {}, server_info, result.get("instructions")
        )
    return None


async def _initialize(
    peer: RpcPeer, caps: dict[str, Any], timeout: float | None, meta: dict[str, Any]
) -> BackendInfo | None:
    params: dict[str, Any] = {"protocolVersion": LATEST_HANDSHAKE, "capabilities": caps, "clientInfo": GATEWAY_INFO}
    if meta:
        params["_meta"] = meta
    init = await peer.call("initialize", params, timeout=timeout)
    _hop_refusal(peer, init)
    result = init.body.get("result")
    if not isinstance(result, dict) or result.get("protocolVersion") not in HANDSHAKE_VERSIONS:
        return None
    await peer.notify("notifications/initialized")
    return BackendInfo(
        Era.HANDSHAKE,
        str(result.get("protocolVersion")),
        result.get("capabilities") or {},
        result.get("serverInfo") or {},
        result.get("instructions"),
    )


def _offers_modern(answer: Message) -> bool:
    """An UnsupportedProtocolVersionError (-32022) whose ``data.supported`` lists the version
    hopline speaks (SEP-2575: the client retries with a mutually supported version). hopline
    has one modern version, so the retry repeats the request; a second refusal is final."""
    error = answer.body.get("error")
    data = error.get("data") if isinstance(error, dict) else None
    supported = data.get("supported") if isinstance(data, dict) else None
    return isinstance(supported, list) and LATEST_MODERN in supported and error.get("code") == -32022


def _hop_refusal(peer: RpcPeer, answer: Message) -> None:
    """An intermediary that refused the handshake as a loop (or too deep) is not tried in the other era."""
    error = answer.body.get("error")
    data = error.get("data") if isinstance(error, dict) else None
    if isinstance(data, dict) and data.get("reason") in ("loop", "max_hops"):
        raise UnavailableError(
            f"backend {peer.name}: {error.get('message')}", backend=peer.name, reason=str(data["reason"])
        )


def _refused(peer: RpcPeer) -> BackendInfo:
    raise UnavailableError(
        f"backend {peer.name} accepted neither initialize nor server/discover",
        backend=peer.name,
        reason="handshake_failed",
    )
