"""Fakes of the session layer's role Protocols (issue 30 item 2): what a consumer is handed
instead of the whole gateway, so that it can be run alone. Each fake records what it was asked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from hopline.binding import Era
from hopline.context import ANONYMOUS, Principal
from hopline.jsonrpc import Message, notification
from hopline.layers.discovery.backend import BackendInfo
from hopline.layers.discovery.shared import Owners


@dataclass
class FakeTaskSettings:
    """task_calls.TaskSettings."""

    max_tasks: int = 100
    max_per_caller: int = 10
    default_ttl: float = 60.0
    max_ttl: float = 600.0
    poll_interval: float = 0.01
    min_poll_interval: float = 0.001
    mediate: bool = True


Answer = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class FakeBackendSession:
    """What the exchange's steps use of a ``BackendSession``: its id, era, owners and ``call``.
    ``answer(method, params)`` gives each call's result; every call is recorded in ``sent``."""

    def __init__(self, backend_id: str, era: Era, answer: Answer) -> None:
        self.id = backend_id
        self.info = BackendInfo(era, "2026-07-28" if era is Era.MODERN else "2025-11-25")
        self.owners = Owners()
        self.answer = answer
        self.sent: list[tuple[str, dict[str, Any], Any]] = []

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_progress: Any = None,
        timeout: float | None = None,
        owner: Any = None,
    ) -> Message:
        self.sent.append((method, params or {}, owner))
        return Message({"jsonrpc": "2.0", "id": len(self.sent), "result": await self.answer(method, params or {})})


@dataclass(eq=False)
class FakeClient:
    """exchange.ExchangeClient: a client session with its backend sessions by id (``sessions``:
    each lookup takes the next one, as a reconnect would give), its own ones (``own``), and the
    requests it was asked (``asked``) and notifications it was sent (``told``)."""

    sessions: dict[str, list[FakeBackendSession]]
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    principal: Principal = ANONYMOUS
    own: list[FakeBackendSession] = field(default_factory=list)
    task_settings: FakeTaskSettings = field(default_factory=FakeTaskSettings)
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)  # method → its result
    asked: list[tuple[str, Any]] = field(default_factory=list)
    told: list[Message] = field(default_factory=list)
    looked_up: int = 0

    async def backend(self, backend_id: str) -> FakeBackendSession:
        self.looked_up += 1
        found = self.sessions[backend_id]
        return found.pop(0) if len(found) > 1 else found[0]

    def owns(self, session: FakeBackendSession) -> bool:
        return session in self.own

    async def ask(self, method: str, params: Any) -> Message:
        self.asked.append((method, params))
        return Message({"jsonrpc": "2.0", "id": len(self.asked), "result": self.replies.get(method, {})})

    def notify(self, message: Message) -> None:
        self.told.append(message)

    def progress_relay(self, token: Any) -> Callable[[Message], None]:
        def relay(m: Message) -> None:
            self.notify(notification("notifications/progress", {**m.params, "progressToken": token}))

        return relay


# -- links.LinkHub's roles and links.LinkClient ------------------------------------------------
def idle_session(backend_id: str, era: Era = Era.HANDSHAKE) -> tuple[Any, Any]:
    """A real ``BackendSession`` on a memory channel nobody answers (what links keep and drop),
    and the far end of its channel (close it: the backend went away)."""
    from hopline.layers.discovery.backend import BackendSession
    from hopline.layers.transport.rpc import RpcPeer
    from hopline.transports.memory import memory_pair

    ours, theirs = memory_pair()
    holder: list[Any] = []
    peer = RpcPeer(ours, name=backend_id, on_closed=lambda: holder and holder[0]._closed())
    session = BackendSession(backend_id, peer, BackendInfo(era, "2025-11-25"), {}, timeout=None)
    holder.append(session)
    return session, theirs


@dataclass
class FakeRouting:
    """hub.RoutingSettings (what links read: timeouts and the reconnect delay)."""

    list_timeout: float = 1.0
    page_size: int = 100
    startup_timeout: float = 1.0
    retry_after: float = 0.01
    shared_capability_sets: int = 4
    share_anonymous: bool = False
    collision: str = "prefix"


@dataclass
class FakeLinkSettings:
    routing: FakeRouting = field(default_factory=FakeRouting)


@dataclass
class FakeSource:
    """links.BackendSource: the configured backends; ``connect`` is not expected (sessions come from sharing)."""

    connectors: dict[str, object]
    slow: set[str] = field(default_factory=set)

    async def connect(self, backend_id: str, **kwargs: Any) -> Any:
        raise AssertionError("a session's own backend session was not expected here")


class FakeSharing:
    """links.SharedBackends: each ``sessions_for`` of a backend takes the next of ``results[backend]``
    (a session, or the exception it failed with); the last one stands. Every ask is recorded."""

    def __init__(self, results: dict[str, list[Any]]) -> None:
        self.results = results
        self.asked: list[str] = []

    def shares(self, backend_id: str) -> bool:
        return True

    def ready(self, ids: list[str], owner: Any) -> dict[str, Any] | None:
        return None

    async def sessions_for(self, ids: list[str], owner: Any) -> dict[str, Any]:
        out = {}
        for b in ids:
            self.asked.append(b)
            found = self.results[b]
            out[b] = found.pop(0) if len(found) > 1 else found[0]
        return out


@dataclass
class FakeLinkHub:
    registry: FakeSource
    sharing: FakeSharing
    settings: FakeLinkSettings = field(default_factory=FakeLinkSettings)
    routes: Any = None  # (unlisted only)


class FakeEnd:
    def __init__(self) -> None:
        self.closed = False
        self.told: list[Message] = []

    def is_closed(self) -> bool:
        return self.closed

    def notify(self, message: Message) -> None:
        self.told.append(message)


@dataclass(eq=False)
class FakeLinkClient:
    """links.LinkClient: counts the surface changes it is told of."""

    stateful: bool = True
    end: FakeEnd = field(default_factory=FakeEnd)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    principal: Principal = ANONYMOUS
    arrival: list[Any] = field(default_factory=list)
    subscriptions: dict[str, set[str]] = field(default_factory=dict)
    changes: int = 0

    def _server_request_from(self, backend_id: str) -> Any:
        raise AssertionError("not expected")

    def _backend_notification(self, backend_id: str) -> Any:
        raise AssertionError("not expected")

    def backend_changed(self, backend_id: str, method: str) -> None:
        self.changes += 1

    def surface_changed(self) -> None:
        self.changes += 1

    async def catalog(self, list_method: str) -> Any:
        raise AssertionError("not expected")


# -- held_invoke.HeldHub's roles and held_invoke.HeldClient ---------------------------------------
@dataclass
class FakeBackendSettings:
    """hub.BackendSettings (a held call reads ``mediate_input`` and ``url``)."""

    url: str | None = "http://backend.invalid/mcp"
    stateless: bool = False
    mediate_input: bool | None = False  # on the shared session, not one of the call's own
    prefix: bool = True
    priority: int = 0
    rename: dict[str, str] = field(default_factory=dict)

    def shares(self) -> bool:
        return True

    def per_principal(self) -> bool:
        return False


@dataclass
class FakeHeldSettings:
    backends: dict[str, FakeBackendSettings]


class FakeHeldSource:
    """held_invoke.HeldSource: no session of the call's own is expected; every backend gets 5 s."""

    async def connect(self, backend_id: str, **kwargs: Any) -> Any:
        raise AssertionError("a dedicated backend session was not expected")

    def timeout_for(self, backend_id: str) -> float | None:
        return 5.0


@dataclass
class FakeHeldHub:
    held: Any
    settings: FakeHeldSettings
    replicas: Any = None
    registry: FakeHeldSource = field(default_factory=FakeHeldSource)


@dataclass(eq=False)
class FakeHeldClient:
    """held_invoke.HeldClient: one backend session, the notifications it was sent."""

    hub: FakeHeldHub
    session: Any
    principal: Principal = ANONYMOUS
    held_call: Any = None
    told: list[Message] = field(default_factory=list)

    async def backend(self, backend_id: str) -> Any:
        return self.session

    def notify(self, message: Message) -> None:
        self.told.append(message)

    def progress_relay(self, token: Any) -> Callable[[Message], None]:
        def relay(m: Message) -> None:
            self.notify(notification("notifications/progress", {**m.params, "progressToken": token}))

        return relay


# -- task_calls.TaskHub's roles and task_calls.TaskClient -----------------------------------------
@dataclass
class FakeTaskHubSettings:
    routing: FakeRouting = field(default_factory=FakeRouting)
    tasks: FakeTaskSettings = field(default_factory=FakeTaskSettings)
    backends: dict[str, Any] = field(default_factory=dict)  # backend → an object with ``command``


@dataclass
class FakeConnectors:
    connectors: dict[str, object]


@dataclass
class FakeTaskHub:
    tasks: Any  # a TaskStore (the memory one: it is sans-io)
    routes: Any  # routing's Routes (plain tables)
    settings: FakeTaskHubSettings
    registry: FakeConnectors
    replicas: Any = None
    pipeline: Any = None


@dataclass(eq=False)
class FakeTaskClient:
    """task_calls.TaskClient: its backend sessions by id, its tasks, what it was told."""

    hub: FakeTaskHub
    known_tasks: Any
    backends: dict[str, Any] | None = None
    principal: Principal = ANONYMOUS
    told: list[Message] = field(default_factory=list)

    async def backend(self, backend_id: str) -> Any:
        return (self.backends or {})[backend_id]

    def notify(self, message: Message) -> None:
        self.told.append(message)

    def _cursor_binding(self) -> str:
        return "test"

    async def _forward(self, *args: Any, **kwargs: Any) -> Message:
        raise AssertionError("not expected")
