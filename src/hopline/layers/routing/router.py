"""Layers 3 and 7: an invoke resolved to its :class:`Route` once, before any call layer runs.

A name (``tools/call``, ``prompts/get``) resolves on the caller's catalogue: the one it
last composed while that backend's list is current, else one composed afresh, else
what an unlisted name means (``links.py``: a backend this session cannot reach now is
its -31001; Reverse/Sidecar: the one backend's own name). A URI (``resources/read``,
``subscribe``, ``unsubscribe``) resolves on the URI table, and only to a configured
backend. What resolves to nothing is ``-32602`` naming what the client sent. The
session then runs the pipeline on the route; visibility is the pipeline's first layer
(``layers/policy/visibility.py``), not the router's.

The router reaches nothing itself: the caller's catalogue is handed in as
:class:`Names`, the URI table as :class:`Uris`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Container, Protocol

from hopline.binding import PROMPTS_GET, PROMPTS_LIST, TOOLS_CALL, TOOLS_LIST
from hopline.jsonrpc import InvalidParams
from hopline.pipeline import Kind

if TYPE_CHECKING:
    from hopline.layers.routing.catalog import Catalog, Entry

# invoke → (the list its names come from, the kind of item)
NAMED: dict[str, tuple[str, Kind]] = {TOOLS_CALL: (TOOLS_LIST, "tool"), PROMPTS_GET: (PROMPTS_LIST, "prompt")}


@dataclass(frozen=True, slots=True)
class Route:
    """Where one invoke goes: ``backend``, under the backend's own ``target`` name or URI;
    ``exposed`` is what the client sent, ``definition`` the item as listed (tools, prompts)."""

    kind: Kind
    backend: str
    target: str
    exposed: str
    definition: dict[str, Any] | None = None


class Names(Protocol):
    """One caller's catalogue (a client session's view of the gateway's ``Catalogue``)."""

    def cached(self, list_method: str, name: str) -> tuple[Entry, Catalog] | None:
        """The entry in the catalogue the caller last composed, if still current for its backend."""

    async def composed(self, list_method: str) -> Catalog:
        """The caller's catalogue, composed afresh."""

    async def unlisted(self, list_method: str, kind: str, name: str, request_id: Any) -> tuple[Entry, Catalog]:
        """A name in no catalogue: the entry it still has, else raises (unknown, or its backend unreachable)."""


class Uris(Protocol):
    def resolve(self, exposed: str) -> tuple[str, str] | None: ...


async def by_name(method: str, name: str, request_id: Any, names: Names) -> Route:
    """The route of ``tools/call`` or ``prompts/get`` of ``name`` (a string: checked by the caller)."""
    list_method, kind = NAMED[method]
    found = names.cached(list_method, name)
    if found is None:  # not in the surface this caller last saw: compose it afresh
        catalog = await names.composed(list_method)
        entry = catalog.resolve(name)
    else:
        entry, catalog = found
    if entry is None:  # -31001 if its prefix names a backend this session cannot reach now
        entry, catalog = await names.unlisted(list_method, kind, name, request_id)
    return Route(kind, entry.backend, entry.original, name, catalog.item(name))


def by_uri(uri: Any, uris: Uris, backends: Container[str], request_id: Any) -> Route:
    """The route of ``resources/read``, ``subscribe`` or ``unsubscribe`` of ``uri``."""
    target = uris.resolve(uri) if isinstance(uri, str) else None
    if target is None or target[0] not in backends:
        raise InvalidParams(f"Unknown resource: {uri!r}", request_id=request_id)
    return Route("resource", target[0], target[1], uri)
