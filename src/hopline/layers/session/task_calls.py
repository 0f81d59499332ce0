"""Tasks through the gateway, bound to their caller (Layer 6; reference/mcp-wire.md §8, §9 "Tasks").

Both kinds of task pass through: the 2026-07-28 extension (``tools/call`` answered with
``resultType: "task"``; ``tasks/get``, ``tasks/update``, ``tasks/cancel``) and 2025-11-25
tasks (``tools/call`` with ``params.task`` answered with ``{task: {...}}``; ``tasks/get``,
``tasks/result``, ``tasks/cancel``, ``tasks/list``, ``notifications/tasks/status``).

Contract
- A created task (:func:`adopt`) gets an id the gateway mints (:func:`~.task_store.mint`)
  and a record in the hub's :class:`~.task_store.TaskStore`: backend, backend's id, owner
  (:func:`~.task_store.owner_of`), the tool that created it; kept for the backend's TTL
  (``ttlMs``/``ttl``; null: ``tasks.default_ttl``), at most ``tasks.max_ttl``.
- A ``tasks/*`` request (:func:`route`) is resolved through the record. An id that is not
  a string, unknown, expired, dropped to keep the store's bounds, owned by another caller,
  or of a backend no longer configured, gets one answer: -32602 ``Unknown task: '<id>'``.
  The request then goes through the call layers as a policy item of kind ``task``
  (``mcp.method`` is the tasks method, ``mcp.tool.name`` the creating tool), and the ids in
  its answer are the exposed ones again.
- ``tasks/list`` (2025-11-25; :func:`listing`) is the gateway's own answer: the caller's
  tasks from the store (those its policy lets it ``tasks/get``), each as its backend reports
  it now, paged with the gateway's cursors. Other callers' tasks are never listed.
- ``notifications/tasks/status`` and ``related-task`` ``_meta`` (:func:`relate`) reach only
  the client session that created the task, with its exposed id; one whose task that
  session does not know is dropped.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Awaitable, Iterable, Mapping, Protocol

from hopline.context import principal_fields
from hopline.jsonrpc import InvalidParams, Message, notification, result
from hopline.layers.session.task_store import TaskRecord, mint, owner_of
from hopline.pipeline import Item

if TYPE_CHECKING:
    from hopline.context import principal_fields, Context, Principal
    from hopline.layers.discovery.backend import BackendSession
    from hopline.layers.routing.tables import Routes
    from hopline.layers.session.task_store import TaskStore
    from hopline.pipeline import Pipeline

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
TASK_STATUS = "notifications/tasks/status"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


class TaskSettings(Protocol):
    max_tasks: int
    max_per_caller: int
    default_ttl: float
    max_ttl: float
    poll_interval: float
    min_poll_interval: float
    mediate: bool


class _Routing(Protocol):
    page_size: int
    list_timeout: float


class _Backend(Protocol):
    command: object  # a stdio backend's command (its tasks live in this replica's child), else None


class TaskHubSettings(Protocol):
    routing: _Routing
    tasks: TaskSettings
    backends: Mapping[str, _Backend]


class _Connectors(Protocol):
    connectors: Mapping[str, object]


class TaskReplicas(Protocol):
    replica: str | None

    async def forward(
        self, replica: str, body: dict[str, Any], who: dict[str, Any], timeout: float | None, what: str = "call"
    ) -> dict[str, Any]: ...


class TaskHub(Protocol):
    """What the task calls reach of the gateway: the task store, the tables that name tasks
    (and cursors), the settings, the configured backends, the replicas, the pipeline's surface."""

    tasks: TaskStore
    routes: Routes
    settings: TaskHubSettings
    registry: _Connectors
    replicas: TaskReplicas | None
    pipeline: Pipeline


class TaskClient(Protocol):
    """A client session, as its tasks see it (a ``GatewaySession``): who it is, its tasks, its
    backend sessions, a notification to it, its cursor binding and its routed invoke."""

    hub: TaskHub
    principal: Principal
    known_tasks: KnownTasks
    backends: dict[str, BackendSession | BaseException] | None

    def backend(self, backend_id: str) -> Awaitable[BackendSession]: ...

    def notify(self, message: Message) -> None: ...

    def _cursor_binding(self) -> str: ...

    async def _forward(
        self,
        message: Message,
        ctx: Context,
        backend_id: str,
        params: dict[str, Any],
        *,
        target: str | None = None,
        exposed: str | None = None,
        definition: dict[str, Any] | None = None,
    ) -> Message: ...


class KnownTasks:
    """One client session's own tasks, backend's id → exposed id (bounded, oldest dropped):
    what lets a backend's status notification reach the session that created the task."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._ids: OrderedDict[tuple[str, str], str] = OrderedDict()

    def add(self, backend: str, task_id: str, exposed: str) -> None:
        self._ids[(backend, task_id)] = exposed
        while len(self._ids) > self.limit:
            self._ids.popitem(last=False)

    def exposed(self, backend: str, task_id: Any) -> str | None:
        return self._ids.get((backend, task_id)) if isinstance(task_id, str) else None


def created(value: Any) -> tuple[str, str, Any] | None:
    """``(backend's task id, era, ttl in ms)`` when a ``tools/call`` result creates a task."""
    if not isinstance(value, dict):
        return None
    if value.get("resultType") == "task" and isinstance(value.get("taskId"), str):
        return value["taskId"], "modern", value.get("ttlMs")
    task = value.get("task")
    if isinstance(task, dict) and isinstance(task.get("taskId"), str):
        return task["taskId"], "handshake", task.get("ttl")
    return None


def ttl_seconds(ttl_ms: Any, settings: TaskSettings) -> float:
    if isinstance(ttl_ms, (int, float)) and not isinstance(ttl_ms, bool) and ttl_ms > 0:
        return min(ttl_ms / 1000, settings.max_ttl)
    return min(settings.default_ttl, settings.max_ttl)


def renamed(value: dict[str, Any], exposed: str) -> dict[str, Any]:
    """A task (flat, or nested under ``task``) and its ``related-task`` _meta, under ``exposed``."""
    out = dict(value)
    if isinstance(out.get("taskId"), str):
        out["taskId"] = exposed
    if isinstance(out.get("task"), dict) and isinstance(out["task"].get("taskId"), str):
        out["task"] = {**out["task"], "taskId": exposed}
    meta = out.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(RELATED_TASK), dict):
        out["_meta"] = {**meta, RELATED_TASK: {**meta[RELATED_TASK], "taskId": exposed}}
    return out


async def adopt(session: TaskClient, ctx: Context, backend: str, tool: str, answer: Message) -> Message:
    """A ``tools/call`` answer that created a task: the task under an id the gateway owns."""
    value = answer.body.get("result")
    found = created(value)
    if found is None:
        return answer
    task_id, era, ttl_ms = found
    hub = session.hub
    exposed = hub.routes.tasks.expose(backend, mint())
    here = hub.replicas.replica if hub.replicas is not None and hub.settings.backends[backend].command else ""
    record = TaskRecord(backend, task_id, owner_of(ctx.principal, ctx.session), tool, era, here)
    await hub.tasks.put(exposed, record, ttl_seconds(ttl_ms, hub.settings.tasks))
    session.known_tasks.add(backend, task_id, exposed)
    return Message({**answer.body, "result": renamed(value, exposed)})  # type: ignore[arg-type]


async def lookup(session: TaskClient, ctx: Context, exposed: Any) -> TaskRecord | None:
    """The caller's own record of ``exposed``, or None (unknown, expired, another's, backend gone)."""
    if not isinstance(exposed, str):
        return None
    store = session.hub.tasks
    record = await store.get(exposed)
    if record is None or record.owner != owner_of(ctx.principal, ctx.session):
        return None
    if record.backend not in session.hub.registry.connectors:
        await store.delete(exposed)
        return None
    return record


def unknown(exposed: Any, request_id: Any) -> InvalidParams:
    return InvalidParams(f"Unknown task: {exposed!r}", request_id=request_id)


async def route(session: TaskClient, message: Message, ctx: Context) -> Message:
    """``tasks/get|update|cancel|result`` to the backend that holds the caller's task."""
    exposed = message.params.get("taskId")
    record = await lookup(session, ctx, exposed)
    if record is None:
        raise unknown(exposed, message.id)
    replicas = session.hub.replicas
    if record.replica and replicas is not None and record.replica != replicas.replica:  # in another's child
        timeout = ctx.remaining(asyncio.get_running_loop().time())
        return Message(
            await replicas.forward(
                record.replica, message.body, principal_fields(ctx.principal, ctx.session), timeout, "task"
            )
        )
    params = {**message.params, "taskId": record.task_id}
    answer = await session._forward(message, ctx, record.backend, params, target=record.tool, exposed=exposed)
    value = answer.body.get("result")
    if isinstance(value, dict):
        return Message({**answer.body, "result": renamed(value, exposed)})
    return answer


async def listing(session: TaskClient, message: Message, ctx: Context) -> Message:
    """``tasks/list`` (2025-11-25): the caller's own tasks, as their backends report them now."""
    hub = session.hub
    binding = session._cursor_binding()
    offset = 0
    cursor = message.params.get("cursor")
    if cursor is not None:
        state = hub.routes.cursors.decode(cursor, binding=binding) if isinstance(cursor, str) else {}
        offset = state.get("t", -1) if isinstance(state.get("t"), int) else -1
        if offset < 0:
            raise InvalidParams("Invalid cursor", request_id=message.id)
    size = hub.settings.routing.page_size
    owned = await hub.tasks.owned(owner_of(ctx.principal, ctx.session), offset + size + 1)
    mine = [(t, r) for t, r in owned if r.era == "handshake" and may(session, r, "tasks/get")]
    chunk = mine[offset : offset + size]
    found = await asyncio.gather(*(_status(session, t, r) for t, r in chunk))
    value: dict[str, Any] = {"tasks": [task for task in found if task is not None]}
    if len(mine) > offset + size:
        value["nextCursor"] = hub.routes.cursors.encode({"t": offset + size}, binding=binding)
    return result(message.id, value)


def may(session: TaskClient, record: TaskRecord, method: str) -> bool:
    pipeline = session.hub.pipeline
    item = Item("task", record.backend, record.tool, {"method": method})
    return not pipeline.surface or pipeline.visible(session.principal, item)


async def _status(session: TaskClient, exposed: str, record: TaskRecord) -> dict[str, Any] | None:
    try:
        backend = await session.backend(record.backend)
        answer = await backend.call(
            "tasks/get", {"taskId": record.task_id}, timeout=session.hub.settings.routing.list_timeout, owner=session
        )
    except Exception:  # unreachable now: left out of this page, as a fan-out list leaves a backend out
        return None
    value = answer.body.get("result")
    if not isinstance(value, dict):
        await session.hub.tasks.delete(exposed)  # the backend no longer knows it
        return None
    value = renamed(value, exposed)
    value.pop("_meta", None)
    value.pop("resultType", None)
    return value


def relate(session: TaskClient, backend: str, message: Message) -> Message | None:
    """A backend's notification as this session may see it: a task's status or a message
    related to a task under the exposed id, or None when the task is not this session's."""
    params = message.params
    if message.method == TASK_STATUS:
        exposed = session.known_tasks.exposed(backend, params.get("taskId"))
        return None if exposed is None else notification(TASK_STATUS, renamed(params, exposed))
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and isinstance(meta.get(RELATED_TASK), dict):
        exposed = session.known_tasks.exposed(backend, meta[RELATED_TASK].get("taskId"))
        return None if exposed is None else notification(message.method or "", renamed(params, exposed))
    return message


def is_task_message(message: Message) -> bool:
    """A notification only a task's own client session may receive."""
    if message.method == TASK_STATUS:
        return True
    meta = message.params.get("_meta") if isinstance(message.params, dict) else None
    return isinstance(meta, dict) and isinstance(meta.get(RELATED_TASK), dict)


def deliver_to_owner(sessions: Iterable[TaskClient], backend: str, shared: object, message: Message) -> bool:
    """A task notification on a shared backend session: to the client session (of those on
    that backend session) whose task it is."""
    for session in list(sessions):
        if (session.backends or {}).get(backend) is not shared:
            continue
        related = relate(session, backend, message)
        if related is not None:
            session.notify(related)
            return True
    return False
