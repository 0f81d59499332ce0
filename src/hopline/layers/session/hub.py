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

from typing import TYPE_CHECKING, Any, Mapping, MutableSet, Protocol

if TYPE_CHECKING:
    from hopline.layers.capability.lists import Catalogue
    from hopline.layers.discovery.backend import BackendSession
    from hopline.context import Context
    from hopline.jsonrpc import Message
    from hopline.layers.discovery.registry import Registry
    from hopline.layers.resilience.partial import FanOut
    from hopline.layers.session.listen import Listener
    from hopline.layers.session.task_push import Route
    from hopline.layers.routing.tables import Routes
    from hopline.layers.session.held import HeldCalls
    from hopline.layers.session.task_calls import TaskClient, TaskSettings
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


class SharedSessions(Protocol):
    """The gateway's shared backend sessions (``sharing.Sharing``), as client sessions use them
    (``owner``: the client session a shared session is taken for)."""

    shared: Mapping[Any, BackendSession]  # keyed by (backend, capability set…): sharing.py's own key

    def shares(self, backend_id: str) -> bool: ...

    def ready(self, ids: list[str], owner: object) -> dict[str, BackendSession | BaseException] | None: ...

    async def sessions_for(self, ids: list[str], owner: object) -> dict[str, BackendSession | BaseException]: ...

    def forget(self, owner: object) -> None: ...


class ListenRelay(Protocol):
    """The gateway's own listens on 2026-07-28 backends (``backend_listens.BackendListens``)."""

    sessions: dict[str, BackendSession]

    async def subscribe(self, listener: Listener, targets: list[tuple[str, str]], *, wait: float = 5.0) -> None: ...

    def unsubscribe(self, listener: Listener) -> None: ...

    def updated(self, backend_id: str, uri: str, params: dict[str, Any]) -> None: ...

    def acknowledged(self, backend_id: str, listen_id: object = None) -> None: ...

    def attach(self, backend_id: str, session: BackendSession) -> None: ...


class TaskPushes(Protocol):
    """Backend listens for the tasks clients' listens name (``task_push.TaskPush``)."""

    async def subscribe(
        self, gs: TaskClient, ctx: Context, listener: Listener, asked: object, *, wait: float
    ) -> list[Route]: ...

    def start(self, routes: list[Route]) -> None: ...

    def unsubscribe(self, routes: list[Route]) -> None: ...

    def deliver(self, backend_id: str, session: BackendSession | None, message: Message) -> bool: ...


class SharedEvents(Protocol):
    def shared_event(self, backend_id: str, event: str) -> None: ...


class SessionMetrics(Protocol):
    """What the session layer reports to observability."""

    metrics: SharedEvents | None

    def list_fetch(self, backend: str, method: str, result: object) -> None: ...

    def session_ended(self, seconds: float, version: str | None) -> None: ...


class ListResilience(Protocol):
    """Layer 4 as a fan-out list sees it: partial failure, and each fetch's outcome for the breakers."""

    fan_out: FanOut

    def observe(self, backend: str, result: object) -> None: ...


class OpenSession(Protocol):
    """An open client session, as the gateway-wide state sees it (a ``GatewaySession``)."""

    backends: dict[str, BackendSession | BaseException] | None

    def surface_changed(self) -> None: ...

    def backend_changed(self, backend_id: str, method: str) -> None: ...


class Hub(Protocol):
    settings: Settings
    registry: Registry
    routes: Routes
    pipeline: Pipeline
    sharing: SharedSessions  # sharing.Sharing: the shared backend sessions
    backend_listens: ListenRelay  # backend_listens.BackendListens: the gateway's own listens on 2026-07-28 backends
    task_push: TaskPushes  # task_push.TaskPush: backend listens for the tasks clients' listens name
    held: HeldCalls
    replicas: Replicas | None  # the other replicas, to hand them what they hold (None: alone)
    tasks: TaskStore  # exposed task id → (backend, owner…): layers/session/task_store.py
    sessions: MutableSet[OpenSession]  # the open GatewaySessions
    listeners: MutableSet[Listener]  # open 2026-07-28 listen streams
    resilience: ListResilience  # the resilience layer (breaker outcomes, fan-out policy)
    observability: SessionMetrics  # the observability layer (list fetch metrics, shared-session events)
    catalogue: Catalogue  # the composed lists and their filtered views, gateway-wide (layers/capability/lists.py)

    def shared_changed(self, backend: BackendSession, method: str) -> None:
        """A shared backend session's list changed: its clients and listen streams are told."""
