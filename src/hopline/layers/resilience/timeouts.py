"""Deadlines per backend and per method/tool: the tightest one wins (draft §11.2, F5).

In: a :class:`~hopline.pipeline.Call` (its ``timeout`` may already be set).
Out: the same call with ``timeout`` set to the tightest of that, the gateway's
``listen.request_timeout``, the backend's ``backends.<id>.timeout``, the method's
and the tool's (``resilience.timeouts``).

The transport enforces ``call.timeout``: ``RpcPeer.call`` raises
:class:`~hopline.jsonrpc.BackendTimeout` (-31002, ``data.reason = "timeout"``) and
sends ``notifications/cancelled`` to the backend (over Streamable HTTP in the
2026-07-28 era the upstream closes that request's stream instead, which is that
era's cancellation). This layer adds a backstop a little after the deadline, so
that no step between here and the transport (input mediation, a layer that
waits) can outlive it: the client always gets exactly one answer, promptly.
"""

from __future__ import annotations

import asyncio
from typing import Mapping

from hopline.jsonrpc import BackendTimeout, Message
from hopline.pipeline import Call, Next
from hopline.layers.transport.loop import running_loop

BACKSTOP = 1.0  # seconds after the deadline before this layer gives up itself


def _expire(task: asyncio.Task | None, fired: list[bool]) -> None:
    if task is not None and not task.done():
        fired.append(True)
        task.cancel()


def tightest(*candidates: float | None) -> float | None:
    best = None
    for c in candidates:  # a plain loop: no list or min() per call on the hot path
        if c is not None and (best is None or c < best):
            best = c
    return best


class Timeouts:
    __slots__ = ("default", "backends", "methods", "tools", "backstop")

    def __init__(
        self,
        *,
        default: float | None = None,
        backends: Mapping[str, float] | None = None,
        methods: Mapping[str, float] | None = None,
        tools: Mapping[str, Mapping[str, float]] | None = None,
        backstop: float = BACKSTOP,
    ) -> None:
        self.default = default  # listen.request_timeout: no call waits longer than this
        self.backends = dict(backends or {})
        self.methods = dict(methods or {})
        self.tools = {b: dict(t) for b, t in (tools or {}).items()}
        self.backstop = backstop

    def deadline_for(self, call: Call) -> float | None:
        tool = None
        if call.target is not None and call.method == "tools/call":
            per_backend = self.tools.get(call.backend)
            tool = per_backend.get(call.target) if per_backend else None
        return tightest(
            call.timeout, self.default, self.backends.get(call.backend), self.methods.get(call.method), tool
        )

    async def __call__(self, call: Call, next: Next) -> Message:
        if call.direction != "to_backend":
            return await next(call)
        limit = call.timeout = self.deadline_for(call)
        if limit is None:
            return await next(call)
        # One timer handle rather than asyncio.timeout(): same effect, half the CPU per call.
        loop = running_loop()
        task = asyncio.current_task(loop)
        fired: list[bool] = []
        handle = loop.call_at(loop.time() + limit + self.backstop, _expire, task, fired)
        try:
            return await next(call)
        except asyncio.CancelledError:
            if not fired or task is None or task.uncancel() > 0:
                raise  # not ours, or someone else cancelled too
            call.event("timeout.backstop", backend=call.backend, seconds=limit)
            raise BackendTimeout(
                f"backend {call.backend} did not answer {call.method} within {limit:g} s", backend=call.backend
            ) from None
        finally:
            handle.cancel()

    def __repr__(self) -> str:
        return (
            f"<Timeouts backends={len(self.backends)} methods={len(self.methods)} "
            f"tools={sum(map(len, self.tools.values()))}>"
        )
