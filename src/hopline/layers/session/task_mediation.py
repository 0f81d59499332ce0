"""Version mediation for Tasks (reference/mcp-wire.md §8 "2026-07-28 extension"): a handshake-era
client's ``tools/call`` that a 2026-07-28 backend answered with a task.

A handshake-era client cannot read ``resultType: "task"``, so the gateway, which declared the
Tasks extension on that client's behalf (``tasks.mediate``), finishes the task for it and
answers the call with the task's own outcome, as if the backend had answered inline.

Contract of :func:`settle`
- Polls ``tasks/get`` every ``pollIntervalMs`` the backend suggests (``tasks.poll_interval``
  if it suggests none; never faster than ``tasks.min_poll_interval``) until the task is
  terminal: ``completed`` → its ``result``; ``failed`` → its ``error``; ``cancelled`` (by the
  backend) → -31001 ``task_cancelled``.
- ``input_required``: each of the task's ``inputRequests`` becomes a request to the client
  (as :mod:`~hopline.layers.session.mrtr` does for ``input_required`` results) and the
  answers go back with ``tasks/update``; a request is asked once.
- Bounded by ``deadline`` (the call's own): past it the task is cancelled (``tasks/cancel``)
  and the client gets -31002.
- ``progress`` (the client gave a progress token): each new status or status message is one
  ``notifications/progress`` (progress 1, 2, …; ``message`` the status message).
- The client's ``notifications/cancelled`` (or its going away) cancels the handler, hence
  this: the task is cancelled at the backend (bounded) before the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from hopline.jsonrpc import BackendTimeout, Message, UnavailableError

if TYPE_CHECKING:
    from hopline.layers.session.task_calls import TaskSettings

CANCEL_WAIT = 5.0

Call = Callable[[str, dict[str, Any], float | None], Awaitable[Message]]
Ask = Callable[[str, Any], Awaitable[Message]]
Progress = Callable[[int, str | None], None]


def is_task(answer: Message) -> bool:
    value = answer.body.get("result")
    return isinstance(value, dict) and value.get("resultType") == "task" and isinstance(value.get("taskId"), str)


async def settle(
    call: Call,
    ask: Ask,
    answer: Message,
    *,
    settings: TaskSettings,
    deadline: float | None,
    progress: Progress | None,
    backend: str,
) -> Message:
    loop = asyncio.get_running_loop()
    value: dict[str, Any] = answer.body["result"]
    task_id: str = value["taskId"]
    seen: tuple[Any, Any] | None = None
    count = 0
    asked: set[str] = set()
    try:
        while True:
            status = value.get("status")
            if progress is not None and (status, value.get("statusMessage")) != seen:
                count += 1
                message = value.get("statusMessage")
                progress(count, message if isinstance(message, str) else status)
            seen = (status, value.get("statusMessage"))
            if status == "completed":
                outcome = value.get("result")
                return Message({**answer.body, "result": outcome if isinstance(outcome, dict) else {}})
            if status == "failed":
                error = value.get("error")
                if not isinstance(error, dict):
                    error = {"code": -32603, "message": f"task {task_id} failed at backend {backend}"}
                return Message({"jsonrpc": "2.0", "id": answer.body.get("id"), "error": error})
            if status == "cancelled":
                text = f"backend {backend} cancelled the task"
                raise UnavailableError(text, backend=backend, reason="task_cancelled")
            if status == "input_required":
                await _answer_input(call, ask, task_id, value.get("inputRequests"), asked, _left(loop, deadline))
            wait = _interval(value.get("pollIntervalMs"), settings)
            left = _left(loop, deadline)
            if left is not None and left <= wait:
                await _cancel(call, task_id)
                raise BackendTimeout(f"backend {backend}: the task did not finish in time (cancelled)", backend=backend)
            await asyncio.sleep(wait)
            got = await call("tasks/get", {"taskId": task_id}, _left(loop, deadline))
            if not isinstance(got.body.get("result"), dict):
                return Message({**got.body, "id": answer.body.get("id")})  # the backend's error, as it gave it
            value = got.body["result"]
    except asyncio.CancelledError:
        await _cancel(call, task_id)
        raise


async def _answer_input(
    call: Call, ask: Ask, task_id: str, requests: Any, asked: set[str], timeout: float | None
) -> None:
    if not isinstance(requests, dict):
        return
    fresh = {k: r for k, r in requests.items() if isinstance(r, dict) and k not in asked}
    if not fresh:
        return
    asked.update(fresh)
    replies = await asyncio.gather(*(ask(r.get("method", ""), r.get("params")) for r in fresh.values()))
    responses = {key: reply.body.get("result", {}) for key, reply in zip(fresh, replies)}
    await call("tasks/update", {"taskId": task_id, "inputResponses": responses}, timeout)


async def _cancel(call: Call, task_id: str) -> None:
    with contextlib.suppress(Exception):  # best effort: the backend's TTL ends it otherwise
        await asyncio.wait_for(call("tasks/cancel", {"taskId": task_id}, CANCEL_WAIT), CANCEL_WAIT)


def _interval(poll_ms: Any, settings: TaskSettings) -> float:
    if isinstance(poll_ms, (int, float)) and not isinstance(poll_ms, bool) and poll_ms > 0:
        return max(poll_ms / 1000, settings.min_poll_interval)
    return max(settings.poll_interval, settings.min_poll_interval)


def _left(loop: asyncio.AbstractEventLoop, deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - loop.time(), 0.0)
