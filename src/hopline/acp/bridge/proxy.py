"""The bridge as a proxy: session setup rewrites and MCP traffic from providers.

See :mod:`hopline.acp.bridge` for the contract. The handshake, forwarding and
cancellation are :class:`hopline.acp.proxy_core.ProxyCore`'s. Everything here is
called from the one reader loop and never waits: what it sends goes through one
ordered queue drained by :meth:`Bridge.write`.
"""

from __future__ import annotations

import logging
import secrets
import sys
from typing import Any, Callable

from hopline.acp import mcp_wire
from hopline.acp.bridge.mcp import AcpMcpChannel, LoopbackApp, Served, ServerBackends
from hopline.acp.proxy_core import ProxyCore
from hopline.layers.transport.channel import Channel
from hopline.transports.streamable_http_server import StreamableHttpListener

log = logging.getLogger("hopline.acp.bridge")
CONSUMER = {"serverId": "d4", "id": "d2"}  # how the bridge speaks to a server, by declaration shape


class Bridge(ProxyCore):
    not_a_proxy = "hopline's MCP-over-ACP bridge runs only as a proxy (it was not offered the proxy role)"

    def __init__(self, out: Channel, *, transport: str = "http") -> None:
        super().__init__(out)
        self.transport = transport
        self.app = LoopbackApp()
        self.base = ""  # http://127.0.0.1:PORT, once listening
        self.servers: dict[str, Served] = {}
        self.channels: dict[Any, AcpMcpChannel] = {}  # MCP-over-ACP connection id → channel
        self._connections = 0

    def mint_connection(self) -> str:
        self._connections += 1
        return f"bridge-{self._connections}"

    def consumer_dialect(self, server: Served) -> str:
        return CONSUMER.get(server.shape) or ("d1" if self.dialect == "d1" else "d3")

    # -- hooks (see ProxyCore) -------------------------------------------------------------
    def initialized(self, result: dict[str, Any]) -> dict[str, Any]:
        caps = dict(result.get("agentCapabilities") or {})
        mcp = dict(caps.get("mcpCapabilities") or {})
        if self.transport == "stdio" or mcp.get("http") is True:
            mcp["acp"] = True
        else:
            log.warning(
                "the agent does not advertise mcpCapabilities.http: "
                "ACP-transport servers it is given as HTTP may be ignored"
            )
        caps["mcpCapabilities"] = mcp
        result["agentCapabilities"] = caps
        return result

    def from_predecessor(self, msg_id: Any, method: str, params: Any) -> bool:
        return method in mcp_wire.MCP_METHODS and self._from_provider(msg_id, method, params)

    def setup(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], Callable]:
        """Every ACP-transport server becomes a loopback endpoint (learns its session from the answer)."""
        keys: list[str] = []
        servers = []
        for entry in params.get("mcpServers") or []:
            found = mcp_wire.declared(entry)
            if found is None:
                servers.append(entry)
                continue
            key, raw, shape = found
            served = self.servers.get(key) or self._serve(key, raw, shape, str(entry.get("name") or key))
            keys.append(key)
            url = self.base + served.path
            if self.transport == "stdio":
                servers.append(
                    {
                        "name": served.name,
                        "command": sys.executable,
                        "args": ["-m", "hopline", "relay", "--stdio", url],
                        "env": [],
                    }
                )
            else:
                servers.append({"type": "http", "name": served.name, "url": url, "headers": []})
        if method in ("session/load", "session/resume") and isinstance(params.get("sessionId"), str):
            self._session(keys, params["sessionId"])
        else:
            for key in keys:
                self.servers[key].setting_up += 1

        def learn(answer: dict[str, Any]) -> dict[str, Any]:
            result = answer.get("result")
            if method not in ("session/load", "session/resume"):
                for key in keys:
                    self.servers[key].setting_up -= 1
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                self._session(keys, result["sessionId"])
            for key in keys:
                if self.servers[key].setting_up <= 0:
                    self.servers[key].known()
            return answer

        return {**params, "mcpServers": servers}, learn

    def _serve(self, key: str, raw: str, shape: str, name: str) -> Served:
        served = self.servers[key] = Served(key, raw, shape, name, f"/mcp/{secrets.token_urlsafe(16)}")
        served.backends = ServerBackends(self, served)
        self.app.routes[served.path] = StreamableHttpListener(served.backends, served.sessions)
        return served

    def _session(self, keys: list[str], session_id: str) -> None:
        for key in keys:
            self.servers[key].session = session_id

    def _from_provider(self, msg_id: Any, method: str, params: Any) -> bool:
        try:
            op = mcp_wire.parse(method, params)
        except ValueError:
            return False
        if op is None or op.kind != mcp_wire.MESSAGE or op.connection is None:
            return False
        channel = self.channels.get(op.connection)
        if channel is None:
            if msg_id is not None:
                self.answer(
                    msg_id, {"error": {"code": -32602, "message": f"unknown MCP-over-ACP connection {op.connection!r}"}}
                )
            return True
        channel.deliver(op.method, op.params, msg_id)  # type: ignore[arg-type]
        return True

    async def aclose(self) -> None:
        for served in self.servers.values():
            await served.sessions.close_all("the bridge is stopping")
            await served.backends.aclose()
