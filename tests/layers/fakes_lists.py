"""Small fakes of the role Protocols the list layer is handed (``layers/capability/lists.py``):
a session's :class:`ListSource`, the gateway's :class:`Sources` (registry, routes, settings,
pipeline). Pure: no backend, no I/O; a backend's list is what the test gives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from hopline.context import Principal
from hopline.layers.routing.tables import Routes
from hopline.pipeline import Item, Pipeline


class FakeBackend:
    """What the fan-out reads of a backend session: its version, its cached list, a fetch."""

    def __init__(self, backend_id: str, tools: list[dict[str, Any]] | Exception, *, cached: bool = False) -> None:
        self.id = backend_id
        self.version = 1
        self.tools = tools
        self.fetches = 0
        self.list_failed_until: dict[str, float] = {}
        self._cached = cached

    def cached_list(self, method: str) -> list[dict[str, Any]] | None:
        return self.tools if self._cached and isinstance(self.tools, list) else None

    async def list_all(self, method: str, meta: dict[str, Any]) -> list[dict[str, Any]]:
        self.fetches += 1
        if isinstance(self.tools, Exception):
            raise self.tools
        self._cached = True
        return self.tools


class FakeSource:
    """A client session's part: the backends it lists from."""

    def __init__(self, backends: dict[str, FakeBackend]) -> None:
        self.backends = backends
        self.arrival: list[Any] = []
        self.started: list[float] = []

    async def listable(self, method: str) -> dict[str, Any]:
        return dict(self.backends)

    async def starts_within(self, limit: float) -> None:
        self.started.append(limit)


@dataclass
class FakeRegistry:
    connectors: Mapping[str, object]
    metas: list[list[Any]] = field(default_factory=list)

    def hop_meta(self, chain: list[Any]) -> dict[str, Any]:
        self.metas.append(chain)
        return {}


@dataclass
class FakeRouting:
    list_timeout: float = 5.0
    retry_after: float = 60.0
    collision: str = "prefix"


@dataclass
class FakeNames:
    prefix: bool = True
    priority: int = 0
    rename: Mapping[str, str] = field(default_factory=dict)


@dataclass
class FakeSettings:
    routing: FakeRouting
    backends: Mapping[str, FakeNames]


class Hide:
    """A surface layer hiding the tools named in ``hidden`` from every subject but ``admin``."""

    def __init__(self, *hidden: str) -> None:
        self.hidden = set(hidden)
        self.asked = 0

    def visible(self, principal: Principal, item: Item) -> bool:
        self.asked += 1
        return principal.subject == "admin" or item.name not in self.hidden


class Gate:
    """A backend gate (an open breaker) withdrawing the backends in ``down``."""

    def __init__(self) -> None:
        self.down: set[str] = set()

    def available(self, backend: str) -> bool:
        return backend not in self.down

    def bind(self, changed: Any) -> None:
        return None


class FakeSources:
    """The gateway's part, as configured now."""

    def __init__(self, *backend_ids: str, reverse: bool = False, pipeline: Pipeline | None = None) -> None:
        self.registry = FakeRegistry({b: object() for b in backend_ids})
        self.routes = Routes.build(
            delimiter="__", max_name_length=64, uri_scheme="hop", single=backend_ids[0] if reverse else None
        )
        self.settings = FakeSettings(FakeRouting(), {b: FakeNames() for b in backend_ids})
        self.pipeline = pipeline if pipeline is not None else Pipeline()


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}
