"""Layer 3, routing: the method table and the name, URI and task-id resolution a
gateway runs with (draft §6.3, §8).

:data:`METHODS` says what each method a gateway mediates is: a LIST-METHOD fans out to
every backend; an INVOKE-METHOD goes to exactly one, found by name (``tools/call``,
``prompts/get``) or by URI (``resources/read``); the rest are the gateway's own or
routed by their reference. The LIST- and INVOKE-METHODS come from the binding
(:mod:`hopline.binding`), not written out again here.

:class:`Routes` is one gateway's resolution tables. Forward mode namespaces names and
rewrites URIs and task ids so that they name their backend; Reverse (and Sidecar) mode
fronts a single backend whose names, URIs and task ids pass unchanged (``single``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hopline.binding import MCP_HANDSHAKE, MCP_MODERN, RESOURCES_READ
from hopline.layers.routing.cursors import CursorCodec
from hopline.layers.routing.namespace import Namespace
from hopline.layers.routing.tasks import TaskIds
from hopline.layers.routing.uris import SingleBackend, UriMapper

Route = Literal[
    "initialize",
    "discover",
    "ping",
    "list",
    "by_name",
    "by_uri",
    "complete",
    "set_level",
    "task",
    "task_list",
    "listen",
]

_OWN: dict[str, Route] = {
    "initialize": "initialize",
    "server/discover": "discover",
    "ping": "ping",
    "resources/subscribe": "by_uri",
    "resources/unsubscribe": "by_uri",
    "completion/complete": "complete",
    "logging/setLevel": "set_level",
    "tasks/get": "task",
    "tasks/update": "task",
    "tasks/cancel": "task",
    "tasks/result": "task",  # 2025-11-25
    "tasks/list": "task_list",  # 2025-11-25: the caller's own tasks, answered by the gateway
    "subscriptions/listen": "listen",
}
_BY_URI = frozenset({RESOURCES_READ})
# Methods the 2026-07-28 era removed: a request of that era naming one is -32601 (HTTP 404).
REMOVED_IN_MODERN = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
    }
)

METHODS: dict[str, Route] = {
    **{m: "list" for m in sorted(MCP_HANDSHAKE.list_methods | MCP_MODERN.list_methods)},
    **{
        m: "by_uri" if m in _BY_URI else "by_name"
        for m in sorted(MCP_HANDSHAKE.invoke_methods | MCP_MODERN.invoke_methods)
    },
    **_OWN,
}


@dataclass
class Routes:
    namespace: Namespace = field(default_factory=Namespace)
    uris: UriMapper | SingleBackend = field(default_factory=UriMapper)
    tasks: TaskIds | SingleBackend = field(default_factory=TaskIds)
    cursors: CursorCodec = field(default_factory=CursorCodec)
    single: str | None = None  # Reverse/Sidecar: the one backend, its names, URIs and task ids unchanged
    pass_on: bool = False  # Sidecar: a method not in the table goes to the one backend, mediated

    @classmethod
    def build(
        cls,
        *,
        delimiter: str,
        max_name_length: int,
        uri_scheme: str,
        single: str | None = None,
        pass_on: bool = False,
        cursors: CursorCodec | None = None,
    ) -> Routes:
        routes = cls(
            Namespace(delimiter, max_length=max_name_length),
            UriMapper(uri_scheme, delimiter),
            TaskIds(),
            cursors or CursorCodec(),
            single,
            pass_on,
        )
        if single is not None:
            routes.uris = routes.tasks = SingleBackend(single)
        return routes

    @property
    def reverse(self) -> bool:
        return self.single is not None
