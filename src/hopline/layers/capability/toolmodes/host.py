"""The gateway's side of Layer 7 tool modes: a :class:`ToolHost` for one caller.

A tool mode (Search, Code) never reaches a backend by itself: it asks this host for
the caller's visible tools (Standard mode's ``tools/list``, after routing, surface
layers and withdrawn backends) and calls a tool by its exposed name through the same
path as a client's ``tools/call`` (routing, policy, resilience, audit, trace). A
hidden or unknown name raises ``InvalidParams`` exactly as ``tools/call`` does; a
JSON-RPC error the backend answered is raised as :class:`ToolCallError` carrying the
backend's code, message and data unchanged.

Where an endpoint shows backends in different modes (tool groups), a mode's host sees
only the backends in that mode: its index, its ``Available tools`` and what it can
call. A name of another group's tool is answered as unknown, as a hidden one is.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

from hopline.binding import TOOLS_CALL, TOOLS_LIST
from hopline.context import Context, Principal
from hopline.jsonrpc import HoplineError, InvalidParams, Message
from hopline.pipeline import ToolPlan

_ids = itertools.count(1)


class ToolCallError(HoplineError):
    """A JSON-RPC error answered for a tool call made on a tool mode's behalf."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "tool call failed")), data=error.get("data"))
        code = error.get("code")
        self.code = code if isinstance(code, int) else -32603


class ToolSession(Protocol):
    """The client session a tool mode runs for (``GatewaySession``): its lists and its invoke path."""

    principal: Principal

    async def visible_list(self, method: str) -> tuple[list[dict[str, Any]], list[str]]: ...

    async def visible_entries(self, method: str) -> tuple[list[dict[str, Any]], list[str], list[str]]: ...

    async def invoke_named(self, message: Message, ctx: Context) -> Message: ...

    def context(self, message: Message) -> Context: ...


class SessionToolHost:
    def __init__(
        self,
        session: ToolSession,
        meta: dict[str, Any],
        *,
        plan: ToolPlan | None = None,
        mode: str | None = None,
        context: Context | None = None,
    ) -> None:
        self.session = session
        self.context = context  # the exchange running the mode's tool: inner calls share its deadline
        self.meta = meta  # the client's _meta of the request that runs the mode's tool (trace context…)
        # Only the backends the plan puts in ``mode`` (None: every backend).
        self.plan, self.mode = (
            (plan, mode) if plan is not None and mode is not None and not plan.uniform(mode) else (None, None)
        )

    @property
    def principal(self) -> Principal:
        return self.session.principal

    async def visible_tools(self) -> list[dict[str, Any]]:
        if self.plan is None:
            items, _missing = await self.session.visible_list(TOOLS_LIST)
            return items
        items, backends, _missing = await self.session.visible_entries(TOOLS_LIST)
        plan, mode = self.plan, self.mode
        return [item for item, backend in zip(items, backends) if plan.mode_of(backend) == mode]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        if self.plan is not None and not any(t.get("name") == name for t in await self.visible_tools()):
            raise InvalidParams(f"Unknown tool: {name!r}")  # another group's tool: not this mode's to call
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        merged = {**self.meta, **(meta or {})}
        merged.pop("progressToken", None)  # progress of an inner call has no client token to go to
        if merged:
            params["_meta"] = merged
        request = Message(
            {"jsonrpc": "2.0", "id": f"hopline-tool-{next(_ids)}", "method": TOOLS_CALL, "params": params}
        )
        answer = await self.session.invoke_named(request, self.context or self.session.context(request))
        error = answer.body.get("error")
        if isinstance(error, dict):
            raise ToolCallError(error)
        value = answer.body.get("result")
        return value if isinstance(value, dict) else {}
