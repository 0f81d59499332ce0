"""The bridge's MCP side: each ACP-transport server as a loopback Streamable HTTP endpoint.

:class:`AcpMcpChannel` is an MCP :class:`~hopline.layers.transport.channel.Channel` whose
other end is an MCP-over-ACP connection: the first message opens it
(``mcp/connect`` in the bridge's spelling for that server), every MCP request
becomes one ``mcp/message`` request (with the ACP session id under
``params._meta["io.hopline/acp-session-id"]``; while the declaring ``session/new``
is unanswered, requests other than :data:`SET_UP` wait for it) whose ACP answer
comes back as the MCP answer, MCP notifications become ``mcp/message``
notifications (``notifications/cancelled`` becomes ``$/cancel_request`` of the
ACP request it names), and what the provider sends on the connection comes
back out of :meth:`receive`. Closing it disconnects.

:class:`ServerBackends` gives hopline's :class:`StreamableHttpListener` what it
asks of a backend (``Backends``): each handshake-era MCP session its own
connection; 2026-07-28 exchanges one shared connection per server behind a
:class:`~hopline.layers.session.mux.Multiplexer`. :class:`LoopbackApp` serves
one listener per server at ``/mcp/<random token>`` on 127.0.0.1 (Origin and
Host checked as for every hopline listener); the path is the credential.
:class:`Served` is one such server as the bridge serves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from hopline.acp import mcp_wire
from hopline.acp.proxy_core import Then
from hopline.binding import Era
from hopline.jsonrpc import JSONRPC, Message, UnavailableError
from hopline.layers.session.mux import Multiplexer
from hopline.layers.transport.channel import Channel, ChannelClosed
from hopline.layers.transport.inbox import Inbox
from hopline.transports import http_util as hu
from hopline.transports.session_table import SessionTable
from hopline.transports.streamable_http_server import StreamableHttpListener

_CLOSED = Message({"jsonrpc": JSONRPC, "method": "$/hopline/closed"})
# Requests an agent may send while it sets its MCP servers up, before its session/new is
# answered: relayed at once, possibly without the session id (holding them could deadlock).
SET_UP = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "logging/setLevel",
    }
)


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


class BridgeProxy(Protocol):
    """What a channel asks of the bridge proxy (:class:`hopline.acp.bridge.proxy.Bridge` has it)."""

    channels: dict[Any, AcpMcpChannel]

    def consumer_dialect(self, server: Served) -> str: ...

    def mint_connection(self) -> str: ...

    def request(self, method: str, params: Any, then: Then) -> int: ...

    def notify(self, method: str, params: Any) -> None: ...

    def answer(self, msg_id: Any, fields: dict[str, Any]) -> None: ...

    def cancel(self, our_id: int) -> None: ...


class AcpMcpChannel:
    def __init__(self, bridge: BridgeProxy, server: Served) -> None:
        self.bridge, self.server = bridge, server
        self.dialect = mcp_wire.MCP[bridge.consumer_dialect(server)]
        self.inbox: Inbox[Message] = Inbox()
        self.cid: Any = None
        self.state = "new"  # new → connecting → open → closed
        self.reason = "closed"
        self.queued: list[Message] = []
        self.in_flight: dict[Any, int] = {}  # MCP request id → ACP request id
        self.asked: dict[str, Any] = {}  # MCP id we gave a provider request → its ACP request id
        self._asked = 0

    # -- Channel ------------------------------------------------------------------------
    async def send(self, message: Message) -> None:
        if self.state == "closed":
            raise ChannelClosed(self.reason)
        if self.state == "new":
            self._connect()
        if self.state == "connecting":
            self.queued.append(message)
        else:
            self._relay(message)

    async def receive(self, timeout: float | None = None) -> Message:
        message = await self.inbox.get(timeout)
        if message is _CLOSED:
            self.inbox.push_front(_CLOSED)
            raise ChannelClosed(self.reason)
        return message

    def interrupt(self, exc: BaseException) -> None:
        self.inbox.interrupt(exc)

    async def aclose(self) -> None:
        if self.state == "open":
            method, params, is_request = mcp_wire.disconnect(self.dialect, self.cid)
            if is_request:
                self.bridge.request(method, params, lambda answer: None)
            else:
                self.bridge.notify(method, params)
        self._close("closed")

    def is_closed(self) -> bool:
        return self.state == "closed"

    # -- ACP side -----------------------------------------------------------------------
    def _connect(self) -> None:
        self.state = "connecting"
        own = self.bridge.mint_connection() if self.dialect.connector_names else None
        method, params = mcp_wire.connect(self.dialect, self.server.raw, own, self._meta())

        def connected(answer: dict[str, Any]) -> None:
            cid = own if own is not None else mcp_wire.connection_of(self.dialect, answer.get("result"))
            if "result" not in answer or cid is None or self.state != "connecting":
                return self._close(f"MCP-over-ACP connect failed: {answer.get('error', answer.get('result'))}")
            self.cid, self.state = cid, "open"
            self.bridge.channels[cid] = self
            queued, self.queued = self.queued, []
            for message in queued:
                self._relay(message)

        self.bridge.request(method, params, connected)

    def _relay(self, message: Message) -> None:
        body = message.body
        if "method" not in body:  # the MCP client answers something the provider asked
            acp_id = self.asked.pop(body.get("id"), None)  # type: ignore[arg-type]
            if acp_id is not None:
                self.bridge.answer(acp_id, {k: v for k, v in body.items() if k in ("result", "error")})
            return
        method, params, mcp_id = body["method"], body.get("params"), body.get("id")
        if method == "notifications/cancelled" and mcp_id is None:
            acp_id = self.in_flight.get(message.params.get("requestId"))
            if acp_id is not None:
                self.bridge.cancel(acp_id)
            return
        if mcp_id is None:
            self.bridge.notify(*mcp_wire.message(self.dialect, self.cid, method, params))
            return
        if self.server.session is None and self.server.setting_up > 0 and method not in SET_UP:
            self.server.waiting.append(lambda: self._resume(message))
            return  # a request that does something waits for the session id it must carry
        params = mcp_wire.with_session(params, self.server.session)
        inner = mcp_id if self.dialect.name == "d1" else None
        acp_method, acp_params = mcp_wire.message(self.dialect, self.cid, method, params, inner)
        self.in_flight[mcp_id] = self.bridge.request(
            acp_method, acp_params, lambda answer: self._answered(mcp_id, answer)
        )

    def _resume(self, message: Message) -> None:
        if self.state == "open":
            self._relay(message)

    def _answered(self, mcp_id: Any, answer: dict[str, Any]) -> None:
        self.in_flight.pop(mcp_id, None)
        fields = {k: v for k, v in answer.items() if k in ("result", "error")}
        self.inbox.put_nowait(Message({"jsonrpc": JSONRPC, "id": mcp_id, **fields}))

    def deliver(self, method: str, params: Any, acp_id: Any) -> None:
        """What the provider sent on this connection (``acp_id``: it is a request)."""
        body: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
        if params is not None:
            body["params"] = params
        if acp_id is not None:
            self._asked += 1
            body["id"] = f"acp-{self._asked}"
            self.asked[body["id"]] = acp_id
        self.inbox.put_nowait(Message(body))

    def _close(self, reason: str) -> None:
        if self.state == "closed":
            return
        self.state, self.reason = "closed", reason
        self.bridge.channels.pop(self.cid, None)
        for message in self.queued:
            if message.is_request():
                self.inbox.put_nowait(
                    UnavailableError(reason, backend=self.server.name, reason="backend_closed").to_response(message.id)
                )
        for acp_id in self.asked.values():
            self.bridge.answer(acp_id, {"error": {"code": -32603, "message": "the MCP client went away"}})
        self.queued, self.asked = [], {}
        self.inbox.put_nowait(_CLOSED)

    def _meta(self) -> dict[str, Any] | None:
        return {mcp_wire.SESSION_META_KEY: self.server.session} if self.server.session else None

    def __repr__(self) -> str:
        return f"<AcpMcpChannel {self.server.name} {self.state} cid={self.cid!r}>"


class ServerBackends:
    """``Backends`` for one ACP-transport server."""

    def __init__(self, bridge: BridgeProxy, server: Served) -> None:
        self.bridge, self.server = bridge, server
        self._mux: Multiplexer | None = None

    async def open_session(self, era: Era) -> Channel:
        return AcpMcpChannel(self.bridge, self.server)

    async def open_exchange(self, era: Era) -> Any:
        if self._mux is None or self._mux.is_closed():
            self._mux = Multiplexer(AcpMcpChannel(self.bridge, self.server), name=self.server.name)
        return self._mux.view()

    async def aclose(self) -> None:
        if self._mux is not None:
            await self._mux.aclose()


class LoopbackApp:
    """ASGI: one Streamable HTTP listener per served server, by path."""

    def __init__(self) -> None:
        self.routes: dict[str, StreamableHttpListener] = {}
        self.security = hu.SecurityPolicy(bound_host="127.0.0.1")

    async def __call__(self, scope: hu.Scope, receive: hu.Receive, send: hu.Send) -> None:
        if scope["type"] != "http":
            return
        headers = await hu.guard(scope, send, self.security)
        if headers is None:
            return
        listener = self.routes.get(scope["path"].rstrip("/"))
        if listener is None:
            await hu.send_bytes(send, 404, b"Not Found", b"text/plain")
            return
        await listener(scope, receive, send, headers)
