"""The official SDK client (mcp 2.3.0) speaking Tasks, for tests/modes/test_gateway_tasks.py.

The SDK has no task runtime on either side, but its client has the extension seam a host
uses to add one: a :class:`~mcp.client.extension.ClientExtension` that declares
``io.modelcontextprotocol/tasks`` and claims ``resultType: "task"`` on ``tools/call``, and
typed requests sent through ``ClientSession.send_request`` (which stamps the 2026-07-28
``_meta`` and the ``Mcp-Name`` header, SEP-2663). Tests drive the task themselves:
``call_task`` returns the ``CreateTaskResult`` as data, ``task_rpc`` sends
``tasks/get``/``update``/``cancel`` and returns the result as data (or raises ``MCPError``).
"""

from __future__ import annotations

from typing import Any, Literal

from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict, TypeAdapter

from tests.peers import client

EXTENSION = "io.modelcontextprotocol/tasks"
AS_DATA = TypeAdapter(dict[str, Any])


class CreatedTask(Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


async def _not_here(created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
    raise AssertionError("tests drive their tasks themselves (call_task)")


class Tasks(ClientExtension):
    identifier = EXTENSION

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_not_here)]


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] | None = None


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


REQUESTS = {"tasks/get": GetTask, "tasks/update": UpdateTask, "tasks/cancel": CancelTask}


def tasks_client(url: str, *, headers: dict[str, str] | None = None, mode: str = "2026-07-28") -> tuple[Client, Any]:
    """The SDK client declaring the Tasks extension, with ``headers`` on every request, and its HTTP client."""
    http = create_mcp_http_client(headers=headers or {})
    return client(streamable_http_client(url, http_client=http), mode, extensions=[Tasks()]), http


async def call_task(c: Client, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """``tools/call`` answered with a task: the ``CreateTaskResult`` as wire data."""
    created = await c.session.call_tool(name, arguments or {}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created.model_dump(by_alias=True, mode="json")


async def task_rpc(c: Client, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    kind = REQUESTS[method]
    request = kind(params=kind.model_fields["params"].annotation(task_id=task_id, **params))
    return await c.session.send_request(request, AS_DATA)
