"""ToolHosts for the tool-mode tests.

``FakeHost`` is pure: a list of tool definitions, a set the caller's policy hides,
and tool functions; a hidden name is answered exactly as an unknown one.
``real_gateway`` is a real gateway (``compose/gateway.py``) with real stdio backends,
the tool mode under test installed in its pipeline and a surface layer playing the
policy's part; ``GatewayClient`` talks JSON-RPC to its session as a listener does.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from hopline.config.schema import GatewayConfig
from hopline.context import Principal
from hopline.jsonrpc import HoplineError, InvalidParams, request
from hopline.modes import build
from hopline.layers.session.gateway_session import GatewaySession
from hopline.layers.policy.visibility import Visibility
from hopline.pipeline import Item, ToolPlan

ToolFn = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}}


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


class FakeHost:
    def __init__(self, tools: list[dict[str, Any]], *, hidden: set[str] = frozenset(), functions: dict[str, ToolFn] | None = None, subject: str = "alice") -> None:
        self.principal = Principal(subject)
        self.tools = tools
        self.hidden = set(hidden)
        self.functions = functions or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.listed = 0

    async def visible_tools(self) -> list[dict[str, Any]]:
        self.listed += 1
        return [t for t in self.tools if t["name"] not in self.hidden]

    async def call_tool(self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
        if name in self.hidden or name not in {t["name"] for t in self.tools}:
            raise InvalidParams(f"Unknown tool: {name!r}")
        self.calls.append((name, arguments))
        function = self.functions.get(name)
        return await function(arguments) if function else text_result(f"{name} ok")


class HideTools:
    """A surface layer (the policy's part): ``subject`` may not see ``hidden`` (backend, name) pairs."""

    def __init__(self, subject: str, hidden: set[tuple[str, str]]) -> None:
        self.subject = subject
        self.hidden = hidden

    def visible(self, principal: Principal, item: Item) -> bool:
        return not (principal.subject == self.subject and item.kind == "tool" and (item.backend, item.name) in self.hidden)


class GatewayClient:
    """One caller of a real in-process gateway, speaking JSON-RPC to its session the
    way a listener does (``GatewaySession.handle``): the full dispatch, including the
    gateway's tool-mode integration and its surface layers."""

    _ids = itertools.count(1)

    def __init__(self, session: GatewaySession) -> None:
        self.session = session

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response body (``result`` or ``error``) for one request."""
        msg_id = next(self._ids)
        try:
            answer = await self.session.handle(request(msg_id, method, params), self.session.end)
        except HoplineError as exc:  # what the listener would turn into an error response
            return exc.to_response(msg_id).body
        return answer.body

    async def list_tools(self) -> list[dict[str, Any]]:
        return (await self.rpc("tools/list", {}))["result"]["tools"]

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.rpc("tools/call", {"name": name, "arguments": arguments})

    def host(self) -> Any:
        """The gateway's own ToolHost for this caller (``GatewaySession.tool_host``)."""
        return self.session.tool_host()


@asynccontextmanager
async def real_gateway(backends: dict[str, list[str]], *, mode: Any = None, surface: list[Any] = (), principal: Principal | None = None) -> AsyncIterator[GatewayClient]:
    config = GatewayConfig.model_validate({"backends": {b: {"command": argv[0], "args": argv[1:]} for b, argv in backends.items()}})
    gateway = build(config)
    gateway.pipeline.tools = ToolPlan.single(mode)
    gateway.pipeline.surface = list(surface)
    if surface:  # the surface's guard of invokes, as compose/pipeline.py puts it first
        gateway.pipeline.calls.insert(0, Visibility(surface))
    session = GatewaySession(gateway, stateful=True)
    if principal is not None:
        session.principal = principal
    gateway.sessions.add(session)
    try:
        yield GatewayClient(session)
    finally:
        await session.end.aclose()
        await gateway.aclose()
