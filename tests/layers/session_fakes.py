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
