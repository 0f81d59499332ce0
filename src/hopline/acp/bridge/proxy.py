"""The bridge as a proxy: forwarding both ways, the handshake, and session setup rewrites.

See :mod:`hopline.acp.bridge` for the contract. Everything here is called from
the one reader loop and never waits: what it sends goes through one ordered
queue drained by :meth:`Bridge.write`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from hopline.acp import dialects, mcp_wire
from hopline.acp.bridge.mcp import AcpMcpChannel, LoopbackApp, ServerBackends
from hopline.acp.dialects import CANCEL_REQUEST, DIALECTS, ENVELOPES
from hopline.jsonrpc import JSONRPC, Message
from hopline.transports.base import Channel, ChannelClosed
from hopline.transports.http_session import SessionTable
from hopline.transports.streamable_http_server import StreamableHttpListener

log = logging.getLogger("hopline.acp.bridge")
CONSUMER = {"serverId": "d4", "id": "d2"}  # how the bridge speaks to a server, by declaration shape


@dataclass(slots=True)
class Served:
    key: str
    raw: str
    shape: str
    name: str
    path: str
    session: str | None = None
    backends: Any = None
    sessions: SessionTable = field(default_factory=SessionTable)
    setting_up: int = 0  # session/new|fork naming it, not answered yet
    waiting: list[Callable[[], None]] = field(default_factory=list)  # requests held for the session id

    def known(self) -> None:
        """The session id is known (or will not be): release what waited for it."""
        waiting, self.waiting = self.waiting, []
        for resume in waiting:
            resume()


class Bridge:
    def __init__(self, out: Channel, *, transport: str = "http") -> None:
        self.out = out
        self.transport = transport
        self.dialect = "d5"  # our handshake's, once offered
        self.app = LoopbackApp()
        self.base = ""  # http://127.0.0.1:PORT, once listening
        self.servers: dict[str, Served] = {}
        self.channels: dict[Any, AcpMcpChannel] = {}  # MCP-over-ACP connection id → channel
        self._next = 0
        self._connections = 0
        self._waiting: dict[int, Callable[[dict[str, Any]], None]] = {}  # our id → what to do with the answer
        self._downstream: dict[Any, int] = {}  # the conductor's request id → ours for it (for cancels)
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()

    # -- sending (never waits: one writer task keeps the order) -------------------------
    def _send(self, body: dict[str, Any]) -> None:
        self._queue.put_nowait(Message({"jsonrpc": JSONRPC, **body}))

    async def write(self) -> None:
        """Drain the queue in order until :meth:`close_queue`'s end mark."""
        while (message := await self._queue.get()) is not None:
            try:
                await self.out.send(message)
            except ChannelClosed:
                return

    def close_queue(self) -> None:
        self._queue.put_nowait(None)

    def request(self, method: str, params: Any, then: Callable[[dict[str, Any]], None]) -> int:
        """Our own request to the predecessor (the conductor)."""
        self._next += 1
        self._waiting[self._next] = then
        self._send({"id": self._next, "method": method, "params": params})
        return self._next

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def answer(self, msg_id: Any, fields: dict[str, Any]) -> None:
        self._send({"id": msg_id, **fields})

    def cancel(self, our_id: int) -> None:
        self._send({"method": CANCEL_REQUEST, "params": {"requestId": our_id}})

    def mint_connection(self) -> str:
        self._connections += 1
        return f"bridge-{self._connections}"

    def consumer_dialect(self, server: Served) -> str:
        return CONSUMER.get(server.shape) or ("d1" if self.dialect == "d1" else "d3")

    # -- receiving ----------------------------------------------------------------------
    def handle(self, message: Message) -> None:
        body = message.body
        method, msg_id, params = body.get("method"), body.get("id"), body.get("params")
        if method is None:
            then = self._waiting.pop(msg_id, None)  # type: ignore[arg-type]
            if then is not None:
                then(body)
            return
        if method in ENVELOPES:  # from our successor, on its way up: pass it on plainly
            inner, inner_params = dialects.unwrap(message)  # type: ignore[misc]
            if msg_id is None:
                self._send({"method": inner, **({"params": inner_params} if inner_params is not None else {})})
                return

            def back(answer: dict[str, Any]) -> None:
                self._downstream.pop(msg_id, None)
                self.answer(msg_id, _outcome(answer))

            self._downstream[msg_id] = self.request(inner, inner_params, back)
            return
        handshake = dialects.handshake_dialect(message)
        if handshake is not None:
            self.dialect = handshake
            return self._down("initialize", dialects.strip_proxy_mark(params), msg_id, self._initialized)
        if method == "initialize" and msg_id is not None:
            return self.answer(msg_id, {"error": {"code": -32600, "message": "hopline's MCP-over-ACP bridge runs only as a proxy (it was not offered the proxy role)"}})
        if method == CANCEL_REQUEST:
            ours = self._downstream.get((params or {}).get("requestId"))
            if ours is not None:
                self.cancel(ours)
            return
        if method in mcp_wire.MCP_METHODS and self._from_provider(msg_id, method, params):
            return
        then = None
        if method in mcp_wire.SESSION_SETUP and isinstance(params, dict):
            params, then = self._rewrite(method, params)
        self._down(method, params, msg_id, then)

    def _down(self, method: str, params: Any, their_id: Any, then: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        wrap = DIALECTS[self.dialect]
        if their_id is None:
            self._queue.put_nowait(wrap.wrap(method, params, None))
            return
        self._next += 1
        ours = self._next
        self._downstream[their_id] = ours

        def back(answer: dict[str, Any]) -> None:
            self._downstream.pop(their_id, None)
            self.answer(their_id, _outcome(then(answer) if then is not None else answer))

        self._waiting[ours] = back
        self._queue.put_nowait(wrap.wrap(method, params, ours))

    def _initialized(self, answer: dict[str, Any]) -> dict[str, Any]:
        result = answer.get("result")
        if not isinstance(result, dict):
            return answer
        result = dict(result)
        caps = dict(result.get("agentCapabilities") or {})
        mcp = dict(caps.get("mcpCapabilities") or {})
        if self.transport == "stdio" or mcp.get("http") is True:
            mcp["acp"] = True
        else:
            log.warning("the agent does not advertise mcpCapabilities.http: ACP-transport servers it is given as HTTP may be ignored")
        caps["mcpCapabilities"] = mcp
        result["agentCapabilities"] = caps
        if self.dialect == "d1":
            result = dialects.mark_proxy(result)
        return {**answer, "result": result}

    def _rewrite(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], Callable]:
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
                servers.append({"name": served.name, "command": sys.executable, "args": ["-m", "hopline", "relay", "--stdio", url], "env": []})
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
                self.answer(msg_id, {"error": {"code": -32602, "message": f"unknown MCP-over-ACP connection {op.connection!r}"}})
            return True
        channel.deliver(op.method, op.params, msg_id)  # type: ignore[arg-type]
        return True

    async def aclose(self) -> None:
        for served in self.servers.values():
            await served.sessions.close_all("the bridge is stopping")
            await served.backends.aclose()


def _outcome(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k in ("result", "error")}
