"""MCP-over-ACP routing (reference §3): to servers by id, over connections with the conductor's ids.

What comes in: every ``mcp/*`` / ``_mcp/*`` message, in any dialect
(:mod:`hopline.acp.mcp_wire`). Who declared each server, in which dialect, and
how each receiver is shown it, is :mod:`hopline.acp.mcp_servers`.

- **Right to left.** What a consumer (the agent, or a bridge proxy) sends goes
  straight to the declarer, skipping the proxies between (they never own it),
  wrapped in the declarer's successor envelope. Connection ids the consumer
  sees are minted here (d1 consumers name their own), so two declarers can never
  collide; the declarer's own ids stay on its side.
- **Left to right.** What a declarer sends on a connection (progress, sampling)
  goes back to the consumer that opened it; a d5 provider's notification goes to
  the consumer of the request it names.
- **Translation.** Connect, message and disconnect are respelled for the other
  side; d5 ↔ connection dialects: a d5 consumer gets an implicit connection per
  server, a connection consumer of a d5 provider gets ``requestId``s minted
  here, and the ``{result}``/``{error}`` carrier is wrapped or unwrapped.
- **Session correlation.** Each request sent to a declarer carries the ACP session
  id the server was declared for, under ``params._meta["io.hopline/acp-session-id"]``
  of the inner MCP request (and of ``connect``), once the session id is known:
  traffic the agent sends while ``session/new`` is still unanswered cannot carry it.
- **Errors.** Unknown server: -32602 (d5: -33001, the TS binding's "server
  unavailable"); unknown connection: -32602 for a request, a notification is
  dropped. A declarer or consumer that exits takes its connections with it.

Sans-io: it only calls the router's delivery primitives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from hopline.acp import mcp_wire
from hopline.acp.mcp_servers import Declarations, Server, Tables
from hopline.acp.mcp_wire import CONNECT, DISCONNECT, MCP, MESSAGE, Op
from hopline.jsonrpc import JSONRPC, HoplineError, InvalidParams, InvalidRequest, Message, PeerError, error_response

DOWN, UP = 1, -1
CONDUCTOR_CODES = (-31001, -31002)  # the conductor's own errors: binding failures, never inner MCP errors


class Delivery(Tables, Protocol):
    """The router's delivery primitives called here (:class:`hopline.acp.router.Router` has them)."""

    def _deliver(
        self,
        t: int,
        direction: int,
        conn: Any,
        msg_id: Any,
        src: int,
        method: str,
        params: Any,
        plain: Message | None,
        then: Callable[[Message], Message | None] | None = None,
        request: bool | None = None,
    ) -> None: ...

    def _reply(self, conn: Any, msg_id: Any, err: HoplineError, src: int) -> list[tuple[int, Message]]: ...

    def _emit(
        self,
        conn: int,
        src: int,
        message: Message,
        wrap: Any,
        method: str | None,
        to: int | None = None,
        conductor: bool = False,
    ) -> None: ...


class McpServerUnavailable(HoplineError):
    code = -33001  # the d5 binding's "no registration is available for the requested server ID"


@dataclass(slots=True)
class Link:
    """One consumer's connection to one server, through the conductor."""

    server: Server
    consumer: int
    dialect: str  # the consumer's
    cid: Any  # the id the consumer knows it by
    shown: str  # the server id the consumer uses
    upstream: Any = None  # the declarer's id for it
    ready: bool = False
    queued: list = field(default_factory=list)
    active: list = field(default_factory=list)  # d5 consumers: requestIds in flight on it


class McpRoutes:
    def __init__(self, router: Delivery) -> None:
        self.r = router
        self.servers = Declarations(router)
        self.links: dict[tuple[int, Any], Link] = {}  # (consumer, its connection id)
        self.upstream: dict[tuple[int, Any], Link] = {}  # (declarer, its connection id)
        self.implicit: dict[tuple[int, str], Link] = {}  # d5 consumers: (consumer, server key)
        self.requests: dict[tuple[str, Any], Link] = {}  # requests to d5 providers: (server key, requestId)
        self._minted = 0

    # -- messages ---------------------------------------------------------------------
    def handle(self, conn: int, msg_id: Any, src: int, direction: int, method: str, params: Any) -> bool:
        """Route one ``mcp/*`` message; False if it is not ours (the router routes it plainly)."""
        try:
            op = mcp_wire.parse(method, params)
        except ValueError as exc:
            self.r._reply(conn, msg_id, InvalidParams(str(exc)), src)
            return True
        if op is None:
            return False
        if direction == DOWN:
            return self._from_provider(conn, msg_id, src, op)
        if op.kind == CONNECT:
            self._connect(conn, msg_id, src, op)
        elif op.kind == DISCONNECT:
            self._disconnect(conn, msg_id, src, op)
        elif op.dialect == "d5":
            server = self.servers.get(op.key)  # type: ignore[arg-type]
            if server is None:
                self.r._reply(conn, msg_id, McpServerUnavailable(f"no MCP-over-ACP server {op.raw!r} is declared"), src)
                return True
            link = self.implicit.get((src, server.key))
            if link is None:
                link = self.implicit[(src, server.key)] = Link(server, src, "d5", server.key, op.raw)  # type: ignore[arg-type]
                self._open(link, None, None)
            self._send_up(link, conn, msg_id, op)
        elif (link := self.links.get((src, op.connection))) is not None:
            self._send_up(link, conn, msg_id, op)
        else:
            self.r._reply(conn, msg_id, InvalidParams(f"unknown MCP-over-ACP connection {op.connection!r}"), src)
        return True

    def _connect(self, conn: int, msg_id: Any, src: int, op: Op) -> None:
        server = self.servers.get(op.key)  # type: ignore[arg-type]
        if server is None:
            self.r._reply(conn, msg_id, InvalidParams(f"no MCP-over-ACP server {op.raw!r} is declared"), src)
            return
        cid = op.connection if op.dialect == "d1" else self._mint("hopline-mcp-")
        if cid is None or (src, cid) in self.links:
            self.r._reply(conn, msg_id, InvalidParams(f"MCP-over-ACP connection id {cid!r} is missing or in use"), src)
            return
        link = self.links[(src, cid)] = Link(server, src, op.dialect, cid, op.raw)  # type: ignore[arg-type]
        self._open(link, conn, msg_id)

    def _open(self, link: Link, conn: Any, msg_id: Any) -> None:
        server = link.server
        d = MCP[server.dialect]
        if d.connectionless:
            link.ready = True
            self._result(conn, msg_id, mcp_wire.connected(MCP[link.dialect], link.cid, None), link.consumer)
            return
        upstream = self._mint("hopline-mcp-") if d.connector_names else None
        method, params = mcp_wire.connect(d, server.raw, upstream, self._meta(server))

        def then(answer: Message) -> Message | None:
            result = answer.body.get("result")
            if result is not None:
                uid = upstream if upstream is not None else mcp_wire.connection_of(d, result)
                if uid is not None:
                    link.upstream, link.ready = uid, True
                    self.upstream[(server.declarer, uid)] = link
                    self._drain(link)
                    return answer.replace(result=mcp_wire.connected(MCP[link.dialect], link.cid, result))
                answer = error_response(
                    None, PeerError("the MCP-over-ACP provider answered connect without a connection id")
                )
            elif server.declarer == 0 and server.dialect == "d4" and _code(answer) == -32601:
                server.dialect = "d5"  # a client that speaks only the connectionless binding
                link.ready = True
                self._drain(link)
                return Message(
                    {"jsonrpc": JSONRPC, "id": None, "result": mcp_wire.connected(MCP[link.dialect], link.cid, None)}
                )
            self._forget(link)
            for q_conn, q_id, _ in link.queued:
                self._emit(q_conn, q_id, "error", answer.body.get("error"), link.consumer)
            return answer

        self.r._deliver(
            server.declarer,
            UP,
            conn if msg_id is not None else None,
            msg_id,
            link.consumer,
            method,
            params,
            None,
            then,
            True,
        )

    def _send_up(self, link: Link, conn: int, msg_id: Any, op: Op) -> None:
        if not link.ready:
            link.queued.append((conn, msg_id, op))
            return
        server = link.server
        d = MCP[server.dialect]
        params = mcp_wire.with_session(op.params, server.session) if msg_id is not None else op.params
        then: Callable[[Message], Message | None] | None = None
        if d.connectionless:
            if msg_id is None:
                return  # the connectionless binding carries no consumer → provider notifications
            rid = op.request_id if link.dialect == "d5" else self._mint("hopline-req-")
            method, params = mcp_wire.message(d, server.raw, op.method, params, rid)  # type: ignore[arg-type]
            self.requests[(server.key, rid)] = link
            then = self._finish(link, rid, unwrap=link.dialect != "d5")
        else:
            inner_id = (
                (op.request_id if op.request_id is not None else self._mint(""))
                if d.name == "d1" and msg_id is not None
                else None
            )
            method, params = mcp_wire.message(d, link.upstream, op.method, params, inner_id)  # type: ignore[arg-type]
            if link.dialect == "d5" and msg_id is not None:
                link.active.append(op.request_id)
                then = self._finish(link, op.request_id, wrap=True)
        self.r._deliver(server.declarer, UP, conn, msg_id, link.consumer, method, params, None, then)

    def _finish(
        self, link: Link, rid: Any, *, unwrap: bool = False, wrap: bool = False
    ) -> Callable[[Message], Message]:
        def then(answer: Message) -> Message:
            self.requests.pop((link.server.key, rid), None)
            if rid in link.active:
                link.active.remove(rid)
            body = answer.body
            if unwrap and "result" in body:
                kind, value = mcp_wire.from_outcome(body["result"])
                return Message({"jsonrpc": JSONRPC, "id": body.get("id"), kind: value})
            if wrap and ("result" in body or _code(answer) not in CONDUCTOR_CODES):
                return Message({"jsonrpc": JSONRPC, "id": body.get("id"), "result": mcp_wire.outcome(body)})
            return answer

        return then

    def _disconnect(self, conn: int, msg_id: Any, src: int, op: Op) -> None:
        link = self.links.get((src, op.connection))
        if link is None:
            self.r._reply(conn, msg_id, InvalidParams(f"unknown MCP-over-ACP connection {op.connection!r}"), src)
            return
        self._forget(link)
        d = MCP[link.server.dialect]
        if link.ready and not d.connectionless:
            method, params, is_request = mcp_wire.disconnect(d, link.upstream)
            if is_request:
                origin = conn if msg_id is not None else None
                self.r._deliver(link.server.declarer, UP, origin, msg_id, src, method, params, None, _emptied, True)
                return
            self.r._deliver(link.server.declarer, UP, None, None, src, method, params, None)
        self._result(conn, msg_id, {}, src)

    def _from_provider(self, conn: int, msg_id: Any, src: int, op: Op) -> bool:
        if op.kind != MESSAGE:
            return False  # connect/disconnect come from the connecting side; not ours to route
        link = (
            self.requests.get((op.key, op.request_id))
            if op.dialect == "d5"
            else self.upstream.get((src, op.connection))
        )  # type: ignore[arg-type]
        if link is None:
            self.r._reply(
                conn, msg_id, InvalidParams(f"unknown MCP-over-ACP connection {op.connection or op.request_id!r}"), src
            )
            return True
        consumer = MCP[link.dialect]
        if consumer.connectionless:
            if msg_id is not None:
                self.r._reply(
                    conn,
                    msg_id,
                    InvalidRequest(
                        "the consumer speaks connectionless MCP-over-ACP (d5), "
                        "which carries no provider-to-consumer requests"
                    ),
                    src,
                )
                return True
            rid = op.request_id if op.dialect == "d5" else (link.active[-1] if link.active else None)
            if rid is None:
                return True  # tied to no request in flight: dropped, as the binding says
            method, params = mcp_wire.message(consumer, link.shown, op.method, op.params, rid)  # type: ignore[arg-type]
        else:
            inner_id = op.request_id if link.dialect == "d1" and op.dialect == "d1" and msg_id is not None else None
            method, params = mcp_wire.message(consumer, link.cid, op.method, op.params, inner_id)  # type: ignore[arg-type]
        self.r._deliver(link.consumer, DOWN, conn, msg_id, src, method, params, None)
        return True

    # -- losses and helpers ---------------------------------------------------------------
    def lost(self, pos: int) -> None:
        """Position ``pos`` is gone: its servers and every connection to or from it end."""
        self.servers.lost(pos)
        for link in {id(x): x for x in (*self.links.values(), *self.implicit.values())}.values():
            if link.server.declarer != pos and link.consumer != pos:
                continue
            self._forget(link)
            d = MCP[link.server.dialect]
            if link.consumer == pos and link.ready and not d.connectionless:  # tell the provider
                method, params, is_request = mcp_wire.disconnect(d, link.upstream)
                self.r._deliver(link.server.declarer, UP, None, None, pos, method, params, None, None, is_request)

    def _forget(self, link: Link) -> None:
        for table in (self.links, self.upstream, self.implicit, self.requests):
            for k in [k for k, v in table.items() if v is link]:
                del table[k]

    def _drain(self, link: Link) -> None:
        queued, link.queued = link.queued, []
        for conn, msg_id, op in queued:
            self._send_up(link, conn, msg_id, op)

    def _meta(self, server: Server) -> dict[str, Any] | None:
        return {mcp_wire.SESSION_META_KEY: server.session} if server.session else None

    def _mint(self, prefix: str) -> Any:
        self._minted += 1
        return f"{prefix}{self._minted}" if prefix else self._minted

    def _result(self, conn: Any, msg_id: Any, value: Any, src: int) -> None:
        self._emit(conn, msg_id, "result", value, src)

    def _emit(self, conn: Any, msg_id: Any, kind: str, value: Any, src: int) -> None:
        if conn is not None and msg_id is not None:
            self.r._emit(
                conn, src, Message({"jsonrpc": JSONRPC, "id": msg_id, kind: value}), None, None, conductor=True
            )


def _code(answer: Message) -> Any:
    err = answer.body.get("error")
    return err.get("code") if isinstance(err, dict) else None


def _emptied(answer: Message) -> Message:
    return answer.replace(result={}) if "result" in answer.body else answer
