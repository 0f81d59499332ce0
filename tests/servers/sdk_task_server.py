"""A 2026-07-28 backend with the Tasks extension (SEP-2663), built on the official MCP SDK.

The SDK (mcp 2.3.0) ships no task runtime, but it has the extension seam a server uses
to add one (``mcp.server.extension.Extension``: new request methods and a ``tools/call``
interceptor). This server plugs the extension ``io.modelcontextprotocol/tasks`` into an
``MCPServer`` through that seam, as a real server author would:

- ``tools/call`` of ``job``, ``approve``, ``forever`` or ``fail`` from a client that
  declared the extension answers ``resultType: "task"`` (a ``CreateTaskResult``); from
  any other client the tool runs inline and answers its normal result;
- ``tasks/get`` answers the DetailedTask (``working`` with a ``statusMessage`` per step,
  ``input_required`` with ``inputRequests``, ``completed`` with ``result``, ``failed``
  with ``error``, ``cancelled``); ``tasks/update`` delivers ``inputResponses``;
  ``tasks/cancel`` cancels a task that is not terminal; an unknown or (for cancel)
  terminal task is -32602.

Task ids are sequential (``task-1``, ``task-2``…) on purpose: guessable backend ids are
what a gateway must not let one caller use to reach another's task.

Push updates: a ``subscriptions/listen`` whose ``notifications`` name ``taskIds`` is served
here (the SDK's own listen handler knows no tasks; every other listen still goes to it): the
acknowledgement names the ids this server knows (an unknown id is left out), then each of
them is pushed as ``notifications/tasks`` (the whole task, as ``tasks/get`` would answer it)
once at once and again on every change, tagged with the listen's id, until the stream ends.

Tools: ``job(steps, ms)`` (``steps`` steps of ``ms`` ms), ``approve(question)``
(``input_required`` with one elicitation until ``tasks/update``), ``forever()`` (runs
until cancelled), ``fail()`` (fails), ``echo(text)`` (never a task),
``cancelled_count()`` (how many tasks were cancelled so far), ``task_listens()`` (the
task ids of each task listen open now, as JSON: what a gateway subscribed here),
``hold_acks(seconds)`` (later task listens are acknowledged that much later),
``end_task_listens()`` (ends every open task listen's stream, as a server may on its own).

Usage: ``python sdk_task_server.py`` (stdio) or ``python sdk_task_server.py http --port P
[--modern-only]`` (Streamable HTTP at ``http://127.0.0.1:P/mcp``). The SDK serves both eras;
``--modern-only`` refuses ``initialize`` (-32022), so that a gateway must speak 2026-07-28 to
it even for a handshake-era client (over HTTP, where the era is chosen per request: an SDK
stdio server locks its era on the first request it sees, refused or not).
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
import sys
from typing import Any, Callable

import anyio
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import RequestParams, SubscriptionsListenRequestParams, SubscriptionsListenResult
from pydantic import BaseModel

EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TOOLS = {"job", "approve", "forever", "fail"}
TERMINAL = {"completed", "failed", "cancelled"}
POLL_MS = 50

tasks: dict[str, dict[str, Any]] = {}
runners: dict[str, asyncio.Task] = {}
answers: dict[str, asyncio.Future] = {}
ids = itertools.count(1)
cancelled = 0
enders: dict[object, Callable[[], None]] = {}  # each open task listen → how to end its stream (end_task_listens)
ack_delay = 0.0  # seconds a task listen's acknowledgement is held back (hold_acks)
watchers: dict[str, dict[object, Callable[[dict[str, Any]], None]]] = {}  # task id → its open listens' push
open_listens: dict[object, list[str]] = {}  # each open task listen → the task ids it acknowledged


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def _set(task_id: str, **fields: Any) -> None:
    tasks[task_id].update(fields, lastUpdatedAt=_now())
    for push in list(watchers.get(task_id, {}).values()):
        push(dict(tasks[task_id]))


def _text(text: str) -> dict[str, Any]:
    """A tool result as the inline tool would give it (MCPServer gives ``-> str`` tools an output schema)."""
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}}


async def _job(task_id: str, steps: int, ms: int) -> dict[str, Any]:
    for step in range(1, steps + 1):
        _set(task_id, statusMessage=f"step {step}/{steps}")
        await asyncio.sleep(ms / 1000)
    return _text(f"job done after {steps} steps")


async def _approve(task_id: str, question: str) -> dict[str, Any]:
    answers[task_id] = asyncio.get_running_loop().create_future()
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    _set(
        task_id,
        status="input_required",
        statusMessage="waiting for approval",
        inputRequests={"approval": {"method": "elicitation/create", "params": {"mode": "form", "message": question, "requestedSchema": schema}}},
    )
    reply = await answers[task_id]
    del answers[task_id]
    tasks[task_id].pop("inputRequests", None)
    _set(task_id, status="working", statusMessage="approved")
    content = reply.get("content") or {}
    return _text(f"approval: {reply.get('action')} {content.get('answer', '')}".strip())


async def _forever(task_id: str) -> dict[str, Any]:
    for beat in itertools.count(1):
        _set(task_id, statusMessage=f"beat {beat}")
        await asyncio.sleep(POLL_MS / 1000)
    raise AssertionError("unreachable")


async def _fail(task_id: str) -> dict[str, Any]:
    await asyncio.sleep(POLL_MS / 1000)
    raise MCPError(code=-32603, message="the job failed on purpose")


async def _run(task_id: str, work) -> None:
    try:
        value = await work
    except asyncio.CancelledError:
        return
    except MCPError as exc:
        _set(task_id, status="failed", statusMessage=exc.error.message, error={"code": exc.error.code, "message": exc.error.message})
        return
    _set(task_id, status="completed", result=value)


class Tasks(Extension):
    identifier = EXTENSION

    def methods(self):
        return [
            MethodBinding("tasks/get", TaskParams, self.get),
            MethodBinding("tasks/update", UpdateParams, self.update),
            MethodBinding("tasks/cancel", TaskParams, self.cancel),
        ]

    async def intercept_tool_call(self, params, ctx, call_next):
        caps = ctx.session.client_capabilities
        declared = (caps.extensions or {}) if caps else {}
        if params.name not in TASK_TOOLS or EXTENSION not in declared:
            return await call_next(ctx)
        task_id = f"task-{next(ids)}"
        now = _now()
        tasks[task_id] = {"taskId": task_id, "status": "working", "createdAt": now, "lastUpdatedAt": now, "ttlMs": 60000, "pollIntervalMs": POLL_MS}
        args = params.arguments or {}
        work = {
            "job": lambda: _job(task_id, int(args.get("steps", 3)), int(args.get("ms", POLL_MS))),
            "approve": lambda: _approve(task_id, str(args.get("question", "approve?"))),
            "forever": lambda: _forever(task_id),
            "fail": lambda: _fail(task_id),
        }[params.name]()
        runners[task_id] = asyncio.ensure_future(_run(task_id, work))
        return {"resultType": "task", **{k: v for k, v in tasks[task_id].items() if k not in ("result", "error", "inputRequests")}}

    def _task(self, params) -> dict[str, Any]:
        task = tasks.get(params.task_id)
        if task is None:
            raise MCPError(code=-32602, message=f"Unknown task: {params.task_id}")
        return task

    async def get(self, ctx, params):
        return {"resultType": "complete", **self._task(params)}

    async def update(self, ctx, params):
        task = self._task(params)
        waiting = answers.get(task["taskId"])
        reply = (params.input_responses or {}).get("approval")
        if waiting is not None and not waiting.done() and isinstance(reply, dict):
            waiting.set_result(reply)
        return {"resultType": "complete"}

    async def cancel(self, ctx, params):
        global cancelled
        task = self._task(params)
        if task["status"] in TERMINAL:
            raise MCPError(code=-32602, message=f"Task {task['taskId']} is already {task['status']}")
        runner = runners.get(task["taskId"])
        if runner is not None:
            runner.cancel()
        cancelled += 1
        _set(task["taskId"], status="cancelled", statusMessage="cancelled by the client")
        tasks[task["taskId"]].pop("inputRequests", None)
        return {"resultType": "complete"}


class Frame(BaseModel):
    """A notification the SDK's typed vocabulary does not have (``notifications/tasks``)."""

    method: str
    params: dict[str, Any]


async def listen_for_tasks(ctx, params: SubscriptionsListenRequestParams, sdk_listen) -> SubscriptionsListenResult:
    """``subscriptions/listen`` naming ``taskIds``: ack the known ones, then push them (module docstring)."""
    asked = (params.notifications.model_extra or {}).get("taskIds")
    if not isinstance(asked, list):
        return await sdk_listen(ctx, params)
    known = [t for t in dict.fromkeys(asked) if isinstance(t, str) and t in tasks]
    meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
    send, recv = anyio.create_memory_object_stream[dict[str, Any]](1024)
    token = object()

    def push(task: dict[str, Any]) -> None:
        try:
            send.send_nowait(task)
        except (anyio.WouldBlock, anyio.ClosedResourceError):
            pass

    open_listens[token] = known
    enders[token] = send.close
    for task_id in known:
        watchers.setdefault(task_id, {})[token] = push
        push(dict(tasks[task_id]))  # buffered: the acknowledgement still goes first
    try:
        if ack_delay:
            await anyio.sleep(ack_delay)
        ack = {"notifications": {"taskIds": known}, "_meta": meta}
        await ctx.session.send_notification(
            Frame(method="notifications/subscriptions/acknowledged", params=ack), related_request_id=ctx.request_id
        )
        async for task in recv:
            await ctx.session.send_notification(
                Frame(method="notifications/tasks", params={**task, "_meta": meta}), related_request_id=ctx.request_id
            )
    finally:
        open_listens.pop(token, None)
        enders.pop(token, None)
        for task_id in known:
            watchers.get(task_id, {}).pop(token, None)
        send.close()
        recv.close()
    return SubscriptionsListenResult(_meta=meta)


class TaskParams(RequestParams):
    task_id: str


class UpdateParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


async def modern_only(ctx, call_next):
    """``--modern-only``: refuse the handshake (-32022), as a server that speaks only 2026-07-28 does."""
    if ctx.method == "initialize":
        raise MCPError(code=-32022, message="Unsupported protocol version", data={"supported": ["2026-07-28"]})
    return await call_next(ctx)


mcp = MCPServer(
    "sdk-task-server", version="1.0.0", extensions=[Tasks()], middleware=[modern_only] if "--modern-only" in sys.argv else []
)
_sdk_listen = mcp._lowlevel_server.get_request_handler("subscriptions/listen")
mcp._lowlevel_server.add_request_handler(
    "subscriptions/listen",
    _sdk_listen.params_type,
    lambda ctx, params: listen_for_tasks(ctx, params, _sdk_listen.handler),
)


@mcp.tool()
async def job(steps: int = 3, ms: int = POLL_MS) -> str:
    """A job of `steps` steps (a task for a client with the tasks extension)."""
    await asyncio.sleep(steps * ms / 1000)
    return f"job done after {steps} steps"


@mcp.tool()
def approve(question: str = "approve?") -> str:
    """Asks for approval (a task for a client with the tasks extension)."""
    return "approval: not asked (no tasks extension)"


@mcp.tool()
async def forever() -> str:
    """Runs until cancelled (a task for a client with the tasks extension)."""
    await asyncio.Event().wait()
    return "unreachable"


@mcp.tool()
def fail() -> str:
    """Fails (a task for a client with the tasks extension)."""
    raise ValueError("the job failed on purpose")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged (never a task)."""
    return text


@mcp.tool()
def cancelled_count() -> str:
    """How many tasks were cancelled so far."""
    return str(cancelled)


@mcp.tool()
def hold_acks(seconds: float) -> str:
    """Hold back every later task listen's acknowledgement by ``seconds`` (0: none)."""
    global ack_delay
    ack_delay = max(0.0, float(seconds))
    return str(ack_delay)


@mcp.tool()
def end_task_listens() -> str:
    """End every open task listen's stream, as a server may on its own; how many were open."""
    ending = list(enders.values())
    for end in ending:
        end()
    return str(len(ending))


@mcp.tool()
def task_listens() -> str:
    """The task ids of each task listen open now (JSON), oldest first."""
    return json.dumps(list(open_listens.values()))


def main() -> None:
    if "http" not in sys.argv[1:2]:
        mcp.run("stdio")
        return
    from serving import bind, port_of, serve

    sock = bind(int(sys.argv[sys.argv.index("--port") + 1]))
    serve(mcp.streamable_http_app(), sock, f"sdk_task_server: http://127.0.0.1:{port_of(sock)}/mcp")


if __name__ == "__main__":
    main()
