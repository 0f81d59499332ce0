"""The gateway as a proxy: it declares its MCP server in every session and serves what reaches it.

See :mod:`hopline.acp.gateway` for the contract. The handshake, forwarding and
cancellation are :class:`hopline.acp.proxy_core.ProxyCore`'s; MCP-over-ACP
connections are :mod:`hopline.acp.gateway.provider`'s. Everything here runs on
the one reader path and never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Callable

from hopline.acp import mcp_wire
from hopline.acp.gateway.provider import Provider, Server
from hopline.acp.proxy_core import ProxyCore, feed
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import Backends, Channel

log = logging.getLogger("hopline.acp.gateway")


class GatewayProxy(ProxyCore):
    not_a_proxy = "hopline's gateway component runs only as a proxy (it was not offered the proxy role)"

    def __init__(self, out: Channel, backends: Backends, *, name: str = "hopline") -> None:
        super().__init__(out)
        self.name = name
        self.provider = Provider(self, backends)

    # -- hooks (see ProxyCore) -------------------------------------------------------------
    def initialized(self, result: dict[str, Any]) -> dict[str, Any]:
        if mcp_wire.consumer_shape(result) is None:
            log.warning(
                "gateway: the agent does not advertise ACP-transport MCP servers (mcpCapabilities.acp): "
                "unless the conductor bridges them, it will not see the gateway's tools "
                "(hopline acp --mcp-bridge http, or acp.mcp_bridge in the file)"
            )
        return result

    def setup(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], Callable]:
        """Every session gets a fresh server (its id is the session correlation key, reference §3.1)."""
        known = params.get("sessionId") if method in ("session/load", "session/resume") else None
        server = self.provider.declare(
            "url" if self.dialect == "d1" else "serverId", known if isinstance(known, str) else None
        )
        servers = params.get("mcpServers")
        params = {**params, "mcpServers": [*(servers if isinstance(servers, list) else []), self.declaration(server)]}

        def learn(answer: dict[str, Any]) -> dict[str, Any]:
            if "result" not in answer:
                self.provider.forget(server)  # the session was not set up: nobody will use it
                return answer
            result = answer["result"]
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                server.session = result["sessionId"]
            if server.session is not None and method in ("session/load", "session/resume"):
                for old in [
                    s for s in self.provider.servers.values() if s.session == server.session and s is not server
                ]:
                    self.provider.forget(old)  # the agent was given the new one for this session
            return answer

        return params, learn

    def declaration(self, server: Server) -> dict[str, Any]:
        if self.dialect == "d1":
            return {"type": "http", "name": self.name, "url": server.raw, "headers": []}
        return {"type": "acp", "name": self.name, "serverId": server.raw}

    def ended(self, session_id: str) -> None:
        self.provider.session_ended(session_id)

    def from_successor(self, msg_id: Any, method: str, params: Any) -> bool:
        return method in mcp_wire.MCP_METHODS and self.provider.handle(msg_id, method, params)

    def cancelled(self, msg_id: Any) -> None:
        self.provider.cancelled(msg_id)

    async def aclose(self) -> None:
        await self.provider.aclose()


async def serve(inbound: Channel, outbound: Channel, backends: Backends, *, name: str = "hopline") -> None:
    """Run the gateway component on one ACP connection until its input ends."""
    proxy = GatewayProxy(outbound, backends, name=name)
    writer = asyncio.create_task(proxy.write(), name="acp-gateway-write")

    def failed(message: Message) -> None:
        if message.is_request():
            proxy.answer(
                message.id, {"error": {"code": -32603, "message": "internal error in hopline's gateway component"}}
            )

    try:
        await feed(inbound, proxy.handle, name="gateway", on_error=failed)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proxy.aclose(), 10)
        proxy.close_queue()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer, 5)
        writer.cancel()
