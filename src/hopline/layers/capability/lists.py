"""The gateway's composed lists (draft §6.3 fan-out, §8 namespacing) and the views of
them one caller may see (Layer 5 surface, Layer 4 gates), owned by one
:class:`Catalogue` per gateway.

Fan-out asks every healthy backend concurrently; one that fails or outlasts the list
timeout is left out of that answer (fail-open) and named in ``missing``. Catalogues
of names are composed once per (list, backend versions) for the whole gateway;
filtered views once per (catalogue, gate state, principal).

The catalogue reaches nothing through a session or a hub: what it reads it is handed as
the small role Protocols below (a session's :class:`ListSource`, the gateway's
:class:`Sources`), and Layer 4's fail-closed rule as a callable (``check``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol

from hopline.binding import LISTINGS, PROMPTS_LIST, TOOLS_LIST
from hopline.context import Principal
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.policy.visibility import surface_key
from hopline.layers.routing.apps import expose_tools, hide_links
from hopline.layers.routing.catalog import BackendNames, Catalog, Collision, Entry
from hopline.pipeline import STANDARD, Item, Kind, SurfaceLayer, BackendGate, ToolHost, ToolPlan

if TYPE_CHECKING:
    from hopline.layers.routing.namespace import Namespace
    from hopline.layers.routing.uris import SingleBackend, UriMapper

log = logging.getLogger("hopline.gateway")

NAMED = frozenset({TOOLS_LIST, PROMPTS_LIST})  # lists whose items have names to namespace
LIST_KEYS = {method: listing.key for method, listing in LISTINGS.items()}
KINDS: dict[str, Kind] = {method: listing.kind for method, listing in LISTINGS.items()}  # type: ignore[misc]
MAX_CATALOGS = 256  # composed catalogues kept (per list method and backend versions)
MAX_VIEWS = 1024  # filtered views kept (per catalogue, gate state and caller)

# A composed list: its items, (backend, backend's own name) per item, the backends missing, its version key.
Fanned = tuple[list[dict[str, Any]], list[tuple[str, str]], list[str], tuple]
# A caller's view: its items, the backend of each, the backends missing or withdrawn.
View = tuple[list[dict[str, Any]], list[str], list[str]]
# A session's catalogues as it last composed them: list method → (key, Catalog).
Held = dict[str, tuple[tuple, Catalog]]


class ListSource(Protocol):
    """A client session as the fan-out sees it: its backends for one list."""

    arrival: list[Any]  # the hop sequence its requests came with (federation)

    async def listable(self, method: str) -> dict[str, BackendSession]: ...

    async def starts_within(self, limit: float) -> None: ...


class ListRegistry(Protocol):
    """Discovery's part: which backends are configured, and the hop ``_meta`` of a fetch."""

    @property
    def connectors(self) -> Mapping[str, object]: ...

    def hop_meta(self, chain: list[Any]) -> dict[str, Any]: ...


class ListRoutes(Protocol):
    """Routing's part: how names and URIs are exposed."""

    @property
    def namespace(self) -> Namespace: ...

    @property
    def uris(self) -> UriMapper | SingleBackend: ...

    @property
    def reverse(self) -> bool: ...


class ListRouting(Protocol):
    list_timeout: float
    retry_after: float
    collision: str


class NameSettings(Protocol):
    prefix: bool
    priority: int
    rename: Mapping[str, str]


class ListSettings(Protocol):
    @property
    def routing(self) -> ListRouting: ...

    @property
    def backends(self) -> Mapping[str, NameSettings]: ...


class Surface(Protocol):
    """The pipeline's part: the surface layers and gates that filter a view."""

    surface: list[SurfaceLayer]
    gates: list[BackendGate]

    def visible(self, principal: Principal, item: Item) -> bool: ...

    def available(self, backend: str) -> bool: ...


class Sources(Protocol):
    """What the catalogue reads, as configured now (a reload replaces routes, settings and pipeline)."""

    @property
    def registry(self) -> ListRegistry: ...

    @property
    def routes(self) -> ListRoutes: ...

    @property
    def settings(self) -> ListSettings: ...

    @property
    def pipeline(self) -> Surface: ...


def _ignore(*_args: object) -> None:
    return None


class Catalogue:
    """The gateway-wide catalogue cache (``catalogs``, ``latest``), the filtered-view cache
    (``views``) and the gate version they are keyed by. ``check(method, missing)``: Layer 4's
    fail-closed rule (raises for a partial list); ``observe(backend, outcome)`` and
    ``record(backend, method, outcome)``: a list fetch's outcome, for the breakers and the metrics."""

    def __init__(
        self,
        sources: Sources,
        *,
        check: Callable[[str, list[str]], None] = _ignore,
        observe: Callable[[str, object], None] = _ignore,
        record: Callable[[str, str, object], None] = _ignore,
    ) -> None:
        self.sources = sources
        self.check, self.observe, self.record = check, observe, record
        self.catalogs: dict[tuple, Catalog] = {}  # (list method, backend versions) → Catalog, shared by all sessions
        self.latest: Held = {}  # list method → the last composed (key, Catalog): stateless requests resolve on it
        self.views: dict[tuple, View] = {}  # (list key, gate version, principal, surface key) → filtered list
        self.gate_version = 0  # bumped whenever a gate (breaker) withdraws or restores a backend

    def clear(self) -> None:
        """Backends, routes or policy changed (reload, a health probe's changed capabilities)."""
        self.catalogs.clear()
        self.latest.clear()
        self.views.clear()

    def gate_changed(self) -> None:
        """A gate withdrew or restored a backend: every view is stale."""
        self.gate_version += 1
        self.views.clear()

    # -- composing ----------------------------------------------------------------------------
    async def fan_out(self, source: ListSource, method: str, held: Held) -> Fanned:
        """Every healthy backend's list, composed. A backend that fails or outlasts the
        list timeout is left out of this answer (fail-open) and named in ``missing``.
        ``held``: the session's catalogues, updated with the one composed."""
        loop = asyncio.get_running_loop()
        s = self.sources
        routing = s.settings.routing
        limit = routing.list_timeout
        await source.starts_within(limit)  # a backend the handshake did not wait for is waited for as its list would be
        live = await source.listable(method)  # parked backends included: their cached lists stand
        # A backend whose list just failed is not asked again (and waited for) on every request.
        backends = {b: bs for b, bs in live.items() if bs.list_failed_until.get(method, 0.0) <= loop.time()}
        missing = sorted(set(s.registry.connectors) - set(backends))
        cached = [bs.cached_list(method) for bs in backends.values()]
        if all(items is not None for items in cached):  # the common case: nothing to ask, no tasks
            return self.compose(method, dict(zip(backends, cached)), backends, missing, held)  # type: ignore[arg-type]
        meta = s.registry.hop_meta(source.arrival)  # an intermediary that leads back here refuses the fetch
        fetched = await asyncio.gather(
            *(asyncio.wait_for(bs.list_all(method, meta), limit) for bs in backends.values()), return_exceptions=True
        )
        lists: dict[str, list[dict[str, Any]]] = {}
        for (backend_id, session), items in zip(backends.items(), fetched):
            self.observe(backend_id, items)  # a dead backend's lists count against its breaker
            self.record(backend_id, method, items)
            if isinstance(items, BaseException):
                log.warning(
                    "backend %s: %s failed: %s",
                    backend_id,
                    method,
                    "timed out" if isinstance(items, asyncio.TimeoutError) else items,
                )
                session.list_failed_until[method] = loop.time() + routing.retry_after
                missing.append(backend_id)
                continue
            lists[backend_id] = items
        return self.compose(method, lists, backends, missing, held)

    def compose(
        self,
        method: str,
        lists: dict[str, list[dict[str, Any]]],
        backends: Mapping[str, BackendSession],
        missing: list[str],
        held: Held | None = None,
    ) -> Fanned:
        version_key = (method, tuple((b, backends[b].version) for b in sorted(lists)))
        if method in NAMED:
            catalog = self.catalog(method, lists, backends, held)
            return (
                catalog.items,
                [(e.backend, e.original) for e in catalog.entries],
                sorted(missing),
                (version_key, catalog.version),
            )
        key = LIST_KEYS[method]
        field = "uriTemplate" if key == "resourceTemplates" else "uri"
        uris = self.sources.routes.uris
        expose = uris.expose_template if field == "uriTemplate" else uris.expose
        out: list[dict[str, Any]] = []
        refs: list[tuple[str, str]] = []
        for backend_id in sorted(lists):
            for item in lists[backend_id]:
                if isinstance(item.get(field), str):
                    out.append({**item, field: expose(backend_id, item[field])})
                    refs.append((backend_id, item[field]))
        return out, refs, sorted(missing), version_key

    def catalog(
        self,
        method: str,
        lists: dict[str, list[dict[str, Any]]],
        backends: Mapping[str, BackendSession],
        held: Held | None = None,
    ) -> Catalog:
        """The composed names, built once per (list method, backend list versions) for the
        whole gateway: every session and stateless request with the same backends shares it."""
        key = (method, tuple((b, backends[b].version) for b in sorted(lists)))
        catalog = self.catalogs.get(key)
        if catalog is None:
            s = self.sources
            routes, settings = s.routes, s.settings
            options = {
                b: BackendNames(prefix=(cfg.prefix and not routes.reverse), priority=cfg.priority, rename=cfg.rename)
                for b, cfg in settings.backends.items()
            }
            if method == TOOLS_LIST and not routes.reverse:  # MCP Apps links name the routed ui:// URI
                lists = {b: expose_tools(items, b, routes.uris) for b, items in lists.items()}
            catalog = Catalog.build(
                lists,
                namespace=routes.namespace,
                strategy=Collision(settings.routing.collision),
                options=options,
                order=list(settings.backends),
            )
            for line in catalog.diagnostics:
                log.info("catalog %s: %s", method, line)
            self.catalogs[key] = catalog
            while len(self.catalogs) > MAX_CATALOGS:
                self.catalogs.pop(next(iter(self.catalogs)))
        self.latest[method] = (key, catalog)
        if held is not None:
            held[method] = (key, catalog)
        return catalog

    # -- one caller's view --------------------------------------------------------------------
    def view(self, method: str, principal: Principal, fanned: Fanned) -> View:
        """The composed list as ``principal`` may see it: items of withdrawn backends (an
        open breaker) and items the surface layers hide are left out. Filtered once per
        (list, backends' versions, gate state, principal) and cached."""
        items, refs, missing, key = fanned
        self.check(method, missing)  # fail-closed: no partial lists
        pipeline = self.sources.pipeline
        if not pipeline.surface and not pipeline.gates:
            return items, [backend for backend, _ in refs], missing
        # The policy's decisions depend on the claims it reads, not only on who the caller is.
        cache_key = (key, self.gate_version, principal.key, surface_key(pipeline.surface, principal))
        cached = self.views.get(cache_key)
        if cached is None:
            kind = KINDS[method]
            withdrawn = sorted({b for b, _ in refs if not pipeline.available(b)})
            kept = [
                (item, backend)
                for item, (backend, name) in zip(items, refs)
                if backend not in withdrawn and pipeline.visible(principal, Item(kind, backend, name, item))
            ]
            if kind == "tool" and pipeline.surface:  # an App the caller may not read is not linked either

                def readable(exposed: str) -> bool:
                    return self.readable(principal, exposed)

                kept = [(hide_links(item, readable) or item, backend) for item, backend in kept]
            cached = ([item for item, _ in kept], [backend for _, backend in kept], withdrawn)
            self.views[cache_key] = cached
            while len(self.views) > MAX_VIEWS:
                self.views.pop(next(iter(self.views)))
        keep, backends, withdrawn = cached
        return keep, backends, sorted({*missing, *withdrawn}) if withdrawn else missing

    def readable(self, principal: Principal, exposed: str) -> bool:
        """Whether ``principal`` may read the resource at ``exposed`` (what ``resources/read`` checks)."""
        s = self.sources
        target = s.routes.uris.resolve(exposed)
        if target is None:
            return False
        backend, uri = target
        return s.pipeline.visible(principal, Item("resource", backend, uri, {"uri": uri}))

    # -- resolving ----------------------------------------------------------------------------
    def resolve_cached(
        self,
        held: Held,
        list_method: str,
        name: str,
        backends: Mapping[str, BackendSession | BaseException] | None,
        *,
        stateful: bool,
    ) -> tuple[Entry, Catalog] | None:
        """Resolve against the catalogue already composed, if it is still current for the
        backend that owns the name, so an invoke never waits on other backends' lists. A
        stateless request (which has composed nothing yet) uses the gateway's latest one."""
        cached = held.get(list_method)
        if cached is None and not stateful:
            cached = self.latest.get(list_method)
        entry = cached[1].resolve(name) if cached is not None else None
        if entry is None or backends is None:
            return None
        owner = backends.get(entry.backend)
        versions = dict(cached[0][1])  # type: ignore[index]
        if owner is not None and not isinstance(owner, BaseException) and versions.get(entry.backend) == owner.version:
            return entry, cached[1]  # type: ignore[index]
        return None


async def tools_in_modes(
    plan: ToolPlan,
    entries: Callable[[], Awaitable[View]],
    host: Callable[[str], ToolHost],
) -> tuple[list[dict[str, Any]], list[str]]:
    """``tools/list`` under a plan with Search/Code modes: each mode's own tools stand in for
    its backends' tools; backends in Standard mode are listed in full (``entries``: the
    caller's view of ``tools/list``; ``host(mode)``: the tool host a mode runs on)."""
    shown: list[dict[str, Any]] = []
    for mode_name, mode in plan.active:
        shown += await mode.tools(host(mode_name)) or []
    if plan.uniform(plan.default) and plan.default in plan.modes:  # one mode for every backend
        return shown, []
    items, backends, missing = await entries()
    return shown + [item for item, backend in zip(items, backends) if plan.mode_of(backend) == STANDARD], missing
