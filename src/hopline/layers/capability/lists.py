"""A gateway session's composed lists (draft §6.3 fan-out, §8 namespacing) as one
caller may see them (Layer 5 surface, Layer 4 gates), and name resolution against them.

Fan-out asks every healthy backend concurrently; one that fails or outlasts the list
timeout is left out of that answer (fail-open) and named in ``missing``. Catalogues
of names are composed once per (list, backend versions) for the whole gateway;
filtered views once per (catalogue, gate state, principal).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from hopline.binding import LISTINGS, PROMPTS_LIST, TOOLS_LIST
from hopline.context import Principal
from hopline.jsonrpc import InvalidParams
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.policy.visibility import refused, surface_key
from hopline.layers.routing.apps import expose_tools, hide_links
from hopline.layers.routing.catalog import BackendNames, Catalog, Collision
from hopline.pipeline import Call, Item, Kind

log = logging.getLogger("hopline.gateway")

NAMED = frozenset({TOOLS_LIST, PROMPTS_LIST})  # lists whose items have names to namespace
LIST_KEYS = {method: listing.key for method, listing in LISTINGS.items()}
_INVOKES: dict[Kind, str] = {listing.kind: listing.invoke for listing in LISTINGS.values()}  # type: ignore[misc]
KINDS: dict[str, Kind] = {method: listing.kind for method, listing in LISTINGS.items()}  # type: ignore[misc]


class ListComposer:
    """Mixin of :class:`~hopline.layers.session.gateway_session.GatewaySession`: its lists.

    ``hub`` is the session layer's :class:`~hopline.layers.session.hub.Hub` (registry,
    routes, pipeline, the gateway-wide catalogue and view caches); typed loosely here,
    since the session layer builds on this one."""

    hub: Any
    stateful: bool
    principal: Principal
    backends: dict[str, BackendSession | BaseException] | None
    _catalogs: dict[str, tuple[tuple, Catalog]]
    _binding: str
    arrival: list[Any]

    if TYPE_CHECKING:  # provided by the other parts of GatewaySession

        async def live_backends(self) -> dict[str, BackendSession | BaseException]: ...  # noqa: E704 (BackendLinks)

        async def listable(self, method: str) -> dict[str, BackendSession]: ...  # noqa: E704 (BackendLinks)

        async def starts_within(self, limit: float) -> None: ...  # noqa: E704 (BackendLinks)

    def _cursor_binding(self) -> str:
        """Cursors are bound to the session, or for stateless requests to the principal."""
        return self._binding if self.stateful else f"p:{self.principal.key!r}"

    async def _composed(self, method: str) -> None:
        await self.fan_out(method)

    async def visible_list(self, method: str) -> tuple[list[dict[str, Any]], list[str]]:
        """The composed list as this caller may see it: items of withdrawn backends
        (an open breaker) and items the surface layers hide are left out. Filtered
        once per (list, backends' versions, gate state, principal) and cached."""
        items, _backends, missing = await self.visible_entries(method)
        return items, missing

    async def visible_entries(self, method: str) -> tuple[list[dict[str, Any]], list[str], list[str]]:
        """:meth:`visible_list` with the backend of each item (parallel to the items)."""
        items, refs, missing, key = await self.fan_out(method)
        self.hub.resilience.fan_out.check(method, missing)  # fail-closed: no partial lists
        pipeline = self.hub.pipeline
        if not pipeline.surface and not pipeline.gates:
            return items, [backend for backend, _ in refs], missing
        g = self.hub
        # The policy's decisions depend on the claims it reads, not only on who the caller is.
        cache_key = (key, g.gate_version, self.principal.key, surface_key(pipeline.surface, self.principal))
        cached = g.visible_cache.get(cache_key)
        if cached is None:
            kind = KINDS[method]
            withdrawn = sorted({b for b, _ in refs if not pipeline.available(b)})
            kept = [
                (item, backend)
                for item, (backend, name) in zip(items, refs)
                if backend not in withdrawn and pipeline.visible(self.principal, Item(kind, backend, name, item))
            ]
            if kind == "tool" and pipeline.surface:  # an App the caller may not read is not linked either
                kept = [(hide_links(item, self._readable) or item, backend) for item, backend in kept]
            cached = ([item for item, _ in kept], [backend for _, backend in kept], withdrawn)
            g.visible_cache[cache_key] = cached
            while len(g.visible_cache) > 1024:
                g.visible_cache.pop(next(iter(g.visible_cache)))
        keep, backends, withdrawn = cached
        return keep, backends, sorted({*missing, *withdrawn}) if withdrawn else missing

    def _readable(self, exposed: str) -> bool:
        """Whether this caller may read the resource at ``exposed`` (what ``resources/read`` checks)."""
        target = self.hub.routes.uris.resolve(exposed)
        if target is None:
            return False
        backend, uri = target
        return self.hub.pipeline.visible(self.principal, Item("resource", backend, uri, {"uri": uri}))

    def _check_visible(
        self, kind: Kind, backend: str, name: str, definition: dict[str, Any] | None, shown: str, request_id: Any
    ) -> None:
        """An item the caller may not see is answered exactly like one that does not exist."""
        pipeline = self.hub.pipeline
        if pipeline.surface and not pipeline.visible(self.principal, Item(kind, backend, name, definition or {})):
            what = {"tool": "tool", "prompt": "prompt"}.get(kind, "resource")
            error = InvalidParams(f"Unknown {what}: {shown!r}", request_id=request_id)
            refused(
                pipeline.calls,
                Call(_INVOKES[kind], backend, {}, self.principal, target=name, exposed=shown, session=self._binding),
                error,
            )  # audited
            raise error

    async def fan_out(self, method: str) -> tuple[list[dict[str, Any]], list[tuple[str, str]], list[str], tuple]:
        """Every healthy backend's list, composed. A backend that fails or outlasts the
        list timeout is left out of this answer (fail-open) and named in ``missing``."""
        loop = asyncio.get_running_loop()
        limit = self.hub.settings.routing.list_timeout
        await self.starts_within(limit)  # a backend the handshake did not wait for is waited for as its list would be
        live = await self.listable(method)  # parked backends included: their cached lists stand
        # A backend whose list just failed is not asked again (and waited for) on every request.
        backends = {b: s for b, s in live.items() if s.list_failed_until.get(method, 0.0) <= loop.time()}
        missing = sorted(set(self.hub.registry.connectors) - set(backends))
        cached = [s.cached_list(method) for s in backends.values()]
        if all(items is not None for items in cached):  # the common case: nothing to ask, no tasks
            return self._compose(method, dict(zip(backends, cached)), backends, missing)  # type: ignore[arg-type]
        meta = self.hub.registry.hop_meta(self.arrival)  # an intermediary that leads back here refuses the fetch
        fetched = await asyncio.gather(
            *(asyncio.wait_for(s.list_all(method, meta), limit) for s in backends.values()), return_exceptions=True
        )
        lists: dict[str, list[dict[str, Any]]] = {}
        for (backend_id, session), items in zip(backends.items(), fetched):
            self.hub.resilience.observe(backend_id, items)  # a dead backend's lists count against its breaker
            self.hub.observability.list_fetch(backend_id, method, items)
            if isinstance(items, BaseException):
                log.warning(
                    "backend %s: %s failed: %s",
                    backend_id,
                    method,
                    "timed out" if isinstance(items, asyncio.TimeoutError) else items,
                )
                session.list_failed_until[method] = loop.time() + self.hub.settings.routing.retry_after
                missing.append(backend_id)
                continue
            lists[backend_id] = items
        return self._compose(method, lists, backends, missing)

    def _compose(
        self,
        method: str,
        lists: dict[str, list[dict[str, Any]]],
        backends: dict[str, BackendSession],
        missing: list[str],
    ) -> tuple[list[dict[str, Any]], list[tuple[str, str]], list[str], tuple]:
        version_key = (method, tuple((b, backends[b].version) for b in sorted(lists)))
        if method in NAMED:
            catalog = self._catalog(method, lists, backends)
            return (
                catalog.items,
                [(e.backend, e.original) for e in catalog.entries],
                sorted(missing),
                (version_key, catalog.version),
            )
        key = LIST_KEYS[method]
        field = "uriTemplate" if key == "resourceTemplates" else "uri"
        expose = self.hub.routes.uris.expose_template if field == "uriTemplate" else self.hub.routes.uris.expose
        out: list[dict[str, Any]] = []
        refs: list[tuple[str, str]] = []
        for backend_id in sorted(lists):
            for item in lists[backend_id]:
                if isinstance(item.get(field), str):
                    out.append({**item, field: expose(backend_id, item[field])})
                    refs.append((backend_id, item[field]))
        return out, refs, sorted(missing), version_key

    def _catalog(
        self, method: str, lists: dict[str, list[dict[str, Any]]], backends: dict[str, BackendSession]
    ) -> Catalog:
        """The composed names, built once per (list method, backend list versions) for the
        whole gateway: every session and stateless request with the same backends shares it."""
        key = (method, tuple((b, backends[b].version) for b in sorted(lists)))
        g = self.hub
        catalog = g.catalogs.get(key)
        if catalog is not None:
            self._catalogs[method] = g.latest_catalogs[method] = (key, catalog)
            return catalog
        options = {
            b: BackendNames(prefix=(cfg.prefix and not g.routes.reverse), priority=cfg.priority, rename=cfg.rename)
            for b, cfg in g.settings.backends.items()
        }
        if method == TOOLS_LIST and not g.routes.reverse:  # MCP Apps links name the routed ui:// URI
            lists = {b: expose_tools(items, b, g.routes.uris) for b, items in lists.items()}
        catalog = Catalog.build(
            lists,
            namespace=g.routes.namespace,
            strategy=Collision(g.settings.routing.collision),
            options=options,
            order=list(g.settings.backends),
        )
        for line in catalog.diagnostics:
            log.info("catalog %s: %s", method, line)
        g.catalogs[key] = catalog
        while len(g.catalogs) > 256:
            g.catalogs.pop(next(iter(g.catalogs)))
        self._catalogs[method] = g.latest_catalogs[method] = (key, catalog)
        return catalog

    def _resolve_cached(self, list_method: str, name: str) -> tuple[Any, Catalog] | None:
        """Resolve against the catalogue already composed, if it is still current for the
        backend that owns the name, so an invoke never waits on other backends' lists. A
        stateless request (which has composed nothing yet) uses the gateway's latest one."""
        cached = self._catalogs.get(list_method)
        if cached is None and not self.stateful:
            cached = self.hub.latest_catalogs.get(list_method)
        entry = cached[1].resolve(name) if cached is not None else None
        if entry is None or self.backends is None:
            return None
        owner = self.backends.get(entry.backend)
        versions = dict(cached[0][1])
        if isinstance(owner, BackendSession) and versions.get(entry.backend) == owner.version:
            return entry, cached[1]
        return None
