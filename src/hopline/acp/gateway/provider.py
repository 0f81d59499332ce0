"""The gateway's MCP side: MCP-over-ACP connections served by hopline gateway sessions.

What comes in: the ``mcp/*`` / ``_mcp/*`` messages a consumer (the agent, or a
bridge acting for it) sends to a server this component declared, in whatever
spelling the conductor uses toward it (:mod:`hopline.acp.mcp_wire`, d1..d5).
What goes out: their answers, and what the gateway sends on its own
(progress, logs, list changes; sampling, elicitation and roots requests), to the
consumer through the successor.

- **Links.** Each MCP-over-ACP connection (d1..d4: ``connect`` → ``message`` … →
  ``disconnect``) is one MCP client session of the gateway
  (``backends.open_session(Era.HANDSHAKE)``, a :class:`~hopline.layers.session.client_end.ClientEnd`),
  so each gets its own backend sessions, as every gateway client does. The
  connectionless d5 binding has no connections: one session per server (that is,
  per ACP session, since every ACP session gets its own server) serves them all.
- **Ids.** An MCP request travels to the gateway under the id of the ACP request
  that carried it (unique on this connection), so its answer needs no table to
  go back; d5 answers are wrapped as ``{"result": {result|error}}``.
- **Session correlation.** Requests carry the ACP session id under
  ``params._meta["io.hopline/acp-session-id"]`` (set by hopline's conductor or
  bridge; added here from the session the server was declared in when missing),
  and the gateway passes ``_meta`` on to the backend that serves the call.
- **Exactly one answer.** A ``$/cancel_request`` for a call in flight cancels it in
  the gateway and is answered -32800 at once; a link that closes answers what it
  still owes with an error. d5 carries no server → client requests: those are
  refused to the gateway at once. Provider notifications in d5 go out under the
  ``requestId`` of the request whose ``progressToken`` they name (else the latest).

Every link's work runs in one task owned by the :class:`Provider`; nothing here
blocks the proxy's reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hopline.acp import mcp_wire
from hopline.acp.mcp_wire import CONNECT, DISCONNECT, MCP, McpDialect, Op
from hopline.binding import Era
from hopline.jsonrpc import JSONRPC, Message
from hopline.layers.transport.channel import Backends, ChannelClosed

if TYPE_CHECKING:
    from hopline.acp.proxy_core import ProxyCore

log = logging.getLogger("hopline.acp.gateway")


@dataclass(slots=True, eq=False)
class Server:
    """One MCP server over ACP, declared in one ACP session."""

    key: str  # the id without ``acp:``
    raw: str  # as declared
    session: str | None = None
    links: set[Link] = field(default_factory=set)


class Provider:
    def __init__(self, proxy: ProxyCore, backends: Backends) -> None:
        self.proxy = proxy
        self.backends = backends
        self.servers: dict[str, Server] = {}
        self.links: dict[Any, Link] = {}  # connection id → link (d1..d4)
        self.implicit: dict[str, Link] = {}  # server key → its d5 link
        self.serving: dict[Any, Link] = {}  # ACP request id → the link serving it
        self.tasks: set[asyncio.Task] = set()
        self._minted = 0

    # -- servers --------------------------------------------------------------------------
    def declare(self, shape: str, session: str | None) -> Server:
        """A fresh server for one session setup, its id in ``shape`` (``serverId`` or ``url``)."""
        raw = f"acp:{uuid.uuid4()}" if shape == "url" else f"hopline-gateway-{secrets.token_hex(8)}"
        server = self.servers[mcp_wire.key_of(raw)] = Server(mcp_wire.key_of(raw), raw, session)
        return server

    def forget(self, server: Server) -> None:
        self.servers.pop(server.key, None)
        for link in list(server.links):
            link.close()

    def session_ended(self, session: str) -> None:
        for server in [s for s in self.servers.values() if s.session == session]:
            self.forget(server)

    # -- messages from consumers --------------------------------------------------------------
    def handle(self, msg_id: Any, method: str, params: Any) -> bool:
        """Serve one MCP-over-ACP message from the consumer side (False: it is not one)."""
        try:
            op = mcp_wire.parse(method, params)
        except ValueError as exc:
            if msg_id is not None:
                self.proxy.answer(msg_id, {"error": {"code": -32602, "message": str(exc)}})
            return True
        if op is None:
            return False
        if op.kind == CONNECT:
            return self._connect(msg_id, op)
        if op.kind == DISCONNECT:
            link = self.links.get(op.connection)
            if link is None:
                return self._unknown(msg_id, f"unknown MCP-over-ACP connection {op.connection!r}")
            link.close()
            if msg_id is not None:
                self.proxy.answer(msg_id, {"result": {}})
            return True
        if op.dialect == "d5":
            server = self.servers.get(op.key)  # type: ignore[arg-type]
            if server is None:
                return self._unknown(msg_id, f"no MCP-over-ACP server {op.raw!r} is served here (any more)", -33001)
            link = self.implicit.get(server.key)
            if link is None:
                link = self.implicit[server.key] = Link(self, server, None, MCP["d5"])
        else:
            link = self.links.get(op.connection)
            if link is None:
                return self._unknown(msg_id, f"unknown MCP-over-ACP connection {op.connection!r}")
        link.deliver(msg_id, op)
        return True

    def _unknown(self, msg_id: Any, message: str, code: int = -32602) -> bool:
        """Addressed to us (the conductor routes MCP-over-ACP to its declarer) but stale: an error,
        never a forward (our predecessor would route it back here)."""
        if msg_id is not None:
            self.proxy.answer(msg_id, {"error": {"code": code, "message": message}})
        return True

    def _connect(self, msg_id: Any, op: Op) -> bool:
        server = self.servers.get(op.key)  # type: ignore[arg-type]
        if server is None:
            return self._unknown(msg_id, f"no MCP-over-ACP server {op.raw!r} is served here (any more)")
        d = MCP[op.dialect]
        if d.connector_names:
            cid = op.connection
        else:
            self._minted += 1
            cid = f"gw-{self._minted}"
        if cid is None or cid in self.links:
            if msg_id is not None:
                self.proxy.answer(
                    msg_id,
                    {"error": {"code": -32602, "message": f"MCP-over-ACP connection id {cid!r} is missing or in use"}},
                )
            return True
        self.links[cid] = Link(self, server, cid, d)
        if msg_id is not None:
            self.proxy.answer(msg_id, {"result": mcp_wire.connected(d, cid, None)})
        return True

    def cancelled(self, msg_id: Any) -> None:
        link = self.serving.get(msg_id)
        if link is not None:
            link.cancel(msg_id)

    async def aclose(self) -> None:
        for link in {id(x): x for x in (*self.links.values(), *self.implicit.values())}.values():
            link.close()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=10)
        left = list(self.tasks)  # what did not finish in time is stopped, and awaited
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left)


class Link:
    """One MCP client session of the gateway, reached over MCP-over-ACP."""

    def __init__(self, provider: Provider, server: Server, cid: Any, dialect: McpDialect) -> None:
        self.provider, self.server, self.cid, self.dialect = provider, server, cid, dialect
        self.queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self.served: dict[Any, Any] = {}  # ACP (= MCP) request id → its d5 requestId
        self.tokens: dict[Any, Any] = {}  # d5: progressToken → requestId
        self.closed = False
        server.links.add(self)
        task = asyncio.create_task(self._run(), name=f"acp-gateway-link-{server.key}")
        provider.tasks.add(task)
        task.add_done_callback(provider.tasks.discard)

    def deliver(self, msg_id: Any, op: Op) -> None:
        """One MCP message from the consumer, for the gateway."""
        if self.closed:
            if msg_id is not None:
                self.provider.proxy.answer(
                    msg_id, {"error": {"code": -32602, "message": "the MCP-over-ACP connection is closed"}}
                )
            return
        body: dict[str, Any] = {"jsonrpc": JSONRPC, "method": op.method}
        params = op.params
        if msg_id is not None:
            params = mcp_wire.with_session(params, self.server.session)
            self.served[msg_id] = op.request_id
            self.provider.serving[msg_id] = self
            token = _progress_token(params)
            if token is not None and self.dialect.connectionless:
                self.tokens[token] = op.request_id
            body["id"] = msg_id
        if params is not None:
            body["params"] = params
        self.queue.put_nowait(Message(body))

    def cancel(self, msg_id: Any) -> None:
        if msg_id in self.served:
            self._owed(msg_id)
            self.queue.put_nowait(
                Message(
                    {
                        "jsonrpc": JSONRPC,
                        "method": "notifications/cancelled",
                        "params": {"requestId": msg_id, "reason": "cancelled by the consumer"},
                    }
                )
            )
            self.provider.proxy.answer(msg_id, {"error": {"code": -32800, "message": "Request cancelled"}})

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)

    # -- the gateway session -------------------------------------------------------------------
    async def _run(self) -> None:
        reader: asyncio.Task | None = None
        end = None
        try:
            end = await self.provider.backends.open_session(Era.HANDSHAKE)
            reader = asyncio.create_task(self._read(end), name=f"acp-gateway-read-{self.server.key}")
            while (message := await self.queue.get()) is not None:
                await end.send(message)
        except ChannelClosed:
            pass
        except Exception:  # a bug costs this connection, never the chain
            log.exception("gateway: MCP-over-ACP connection %r failed", self.cid)
        finally:
            self._forget()
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
            if end is not None:
                await end.aclose()
            for msg_id in list(self.served):
                self._answer(
                    msg_id,
                    {"error": {"code": -32603, "message": "the gateway's MCP session for this connection ended"}},
                    own=True,
                )

    async def _read(self, end: Any) -> None:
        while True:
            try:
                message = await end.receive()
            except ChannelClosed:
                return
            body = message.body
            if "method" not in body:
                msg_id = body.get("id")
                if msg_id in self.served:
                    self._answer(msg_id, {k: v for k, v in body.items() if k in ("result", "error")})
            elif "id" not in body:
                self._notify(body["method"], body.get("params"))
            else:
                self._ask(body["id"], body["method"], body.get("params"))

    def _answer(self, msg_id: Any, fields: dict[str, Any], *, own: bool = False) -> None:
        """The answer to ``msg_id``, once: the gateway's (d5: as the inner outcome, even an
        MCP error), or ``own``, this binding's failure (an outer error in every dialect)."""
        self._owed(msg_id)
        if self.dialect.connectionless and not own:
            fields = {"result": mcp_wire.outcome(fields)}
        self.provider.proxy.answer(msg_id, fields)

    def _owed(self, msg_id: Any) -> None:
        rid = self.served.pop(msg_id, None)
        self.provider.serving.pop(msg_id, None)
        if self.tokens:
            for token in [t for t, r in self.tokens.items() if r == rid]:
                del self.tokens[token]

    def _notify(self, method: str, params: Any) -> None:
        if self.closed:
            return
        if not self.dialect.connectionless:
            self.provider.proxy.notify_down(*mcp_wire.message(self.dialect, self.cid, method, params))
            return
        token = _progress_token(params, key="progressToken")
        rid = self.tokens.get(token) if token is not None else None
        if rid is None and self.served:
            rid = next(reversed(self.served.values()))
        if rid is not None:  # tied to no request in flight: dropped, as the binding says
            self.provider.proxy.notify_down(*mcp_wire.message(self.dialect, self.server.raw, method, params, rid))

    def _ask(self, mcp_id: Any, method: str, params: Any) -> None:
        """The gateway asks the consumer something (sampling, elicitation, roots)."""
        if self.dialect.connectionless or self.closed:
            error = {
                "code": -32601,
                "message": f"{method}: the connectionless MCP-over-ACP binding (d5) "
                "carries no server-to-client requests",
            }
            self.queue.put_nowait(Message({"jsonrpc": JSONRPC, "id": mcp_id, "error": error}))
            return

        def back(answer: dict[str, Any]) -> None:
            fields = {k: v for k, v in answer.items() if k in ("result", "error")}
            if not self.closed:
                self.queue.put_nowait(Message({"jsonrpc": JSONRPC, "id": mcp_id, **fields}))

        inner = mcp_id if self.dialect.name == "d1" else None
        self.provider.proxy.request_down(*mcp_wire.message(self.dialect, self.cid, method, params, inner), back)

    def _forget(self) -> None:
        self.closed = True
        self.server.links.discard(self)
        p = self.provider
        if p.links.get(self.cid) is self:
            del p.links[self.cid]
        if p.implicit.get(self.server.key) is self:
            del p.implicit[self.server.key]

    def __repr__(self) -> str:
        return (
            f"<Link {self.server.key} {self.dialect.name} cid={self.cid!r} "
            f"served={len(self.served)} closed={self.closed}>"
        )


def _progress_token(params: Any, key: str = "") -> Any:
    """A request's ``_meta.progressToken`` (``key``: a notification's own ``progressToken``)."""
    if not isinstance(params, dict):
        return None
    if key:
        return params.get(key)
    meta = params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, dict) else None
