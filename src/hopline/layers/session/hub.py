"""What a gateway's client sessions see of the rest of the stack (Layer 6's typed seam).

A :class:`~hopline.layers.session.gateway_session.GatewaySession` is one client's state:
its backend sessions (its own, or shared ones), its subscriptions, its principal. What
it reaches beyond that it reaches through a :class:`Hub`, which the composition root
(``compose/gateway.py``) builds and hands in: the discovery registry (Layer 2), the
routing tables (Layer 3), the call pipeline with its gates and surface (Layers 4, 5,
7's tool plans), and the gateway-wide session state (shared backend sessions, listen
streams, held calls, the task store). Settings are read through the small Protocols below, which the
configuration's sections satisfy; nothing here imports the configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol

if TYPE_CHECKING:
    from hopline.layers.capability.lists import Catalogue
    from hopline.layers.discovery.backend import BackendSession
    from hopline.layers.discovery.registry import Registry
    from hopline.layers.routing.tables import Routes
    from hopline.layers.session.held import HeldCalls
    from hopline.layers.session.task_calls import TaskSettings
    from hopline.layers.session.task_store import TaskStore
    from hopline.pipeline import Pipeline


class RoutingSettings(Protocol):
    list_timeout: float
    page_size: int
    startup_timeout: float
    retry_after: float
    shared_capability_sets: int
    share_anonymous: bool
    collision: str


class BackendSettings(Protocol):
    url: str | None
    stateless: bool
    mediate_input: bool | None
    prefix: bool
    priority: int
    rename: Mapping[str, str]

    def shares(self) -> bool: ...

    def per_principal(self) -> bool: ...


class ListenSettings(Protocol):
    request_timeout: float | None

    def loopback(self) -> bool: ...


class Settings(Protocol):
    """What the session layer reads of the gateway's settings."""

    listen: ListenSettings
    name: str
    instructions: str | None
    routing: RoutingSettings
    backends: Mapping[str, BackendSettings]
    tasks: TaskSettings


class Replicas(Protocol):
    """Requests handed to the replica that holds their state (transports/replica_link.py)."""

    async def forward(
        self, replica: str, body: dict[str, Any], who: dict[str, Any], timeout: float | None, what: str = "call"
    ) -> dict[str, Any]: ...

    async def ready(self, timeout: float) -> None: ...


class Hub(Protocol):
    settings: Settings
    registry: Registry
    routes: Routes
    pipeline: Pipeline
    sharing: Any  # sharing.Sharing: the shared backend sessions (typed loosely: it uses this Hub)
    backend_listens: Any  # backend_listens.BackendListens: the gateway's own listens on 2026-07-28 backends
    task_push: Any  # task_push.TaskPush: backend listens for the tasks clients' listens name
    held: HeldCalls
    replicas: Replicas | None  # the other replicas, to hand them what they hold (None: alone)
    tasks: TaskStore  # exposed task id → (backend, owner…): layers/session/task_store.py
    sessions: set[Any]  # the open GatewaySessions
    listeners: set[Any]  # open 2026-07-28 listen streams
    resilience: Any  # the resilience layer (breaker outcomes, fan-out policy)
    observability: Any  # the observability layer (list fetch metrics, shared-session events)
    catalogue: Catalogue  # the composed lists and their filtered views, gateway-wide (layers/capability/lists.py)

    def shared_changed(self, backend: BackendSession, method: str) -> None:
        """A shared backend session's list changed: its clients and listen streams are told."""
