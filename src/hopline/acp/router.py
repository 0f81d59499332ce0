"""The conductor's routing core: one message in, the messages it causes out. No I/O.

Connections: ``0`` is upstream (the client in agent mode, the parent conductor
in proxy mode); ``1..n`` are the components, in chain order. Positions are the
same numbers, plus ``n+1`` in proxy mode: the conductor's own successor,
reached through the parent in the parent's successor envelope.

A message is classified once (reference §2.4): a successor envelope from a proxy
(or, in proxy mode, from the parent) travels *down* from that position, its
inner message unwrapped; anything else a component sends travels *up* to its
predecessor; what upstream sends plainly travels down to position 1. It is
delivered to the next live position: plainly going down, in the receiver's
dialect envelope going up to a proxy (or down to the parent's successor).
MCP-over-ACP traffic is the exception: it goes straight to the component that
declared the server, or back to the one that connected (:mod:`hopline.acp.mcp_routes`).

Guarantees:
- Ids are rewritten per connection (:mod:`hopline.acp.id_tables`); answers map back.
- Order: :meth:`Router.handle` emits outputs in arrival order and never waits,
  so per (source → destination) FIFO holds if the shell writes each
  connection's outputs in order. An update sent before a result stays before it.
- ``$/cancel_request`` is translated hop by hop, never tunnelled.
- Handshakes follow :mod:`hopline.acp.handshake` and :mod:`hopline.acp.lifecycle`;
  traffic for a proxy whose dialect is not known yet is held, in order.
- A lost component answers everything awaited from it with the conductor's own
  error (never a hang); its own outstanding requests are cancelled downstream.
  Under ``--on-crash restart`` a lost component's traffic (proxy or terminal
  agent) is then held until the shell has restarted it and
  :mod:`hopline.acp.sessions` has reloaded its sessions; sessions ended with
  ``session/close`` (or ``session/delete``) are not reloaded.
"""

from __future__ import annotations

from typing import Any, Callable

from hopline.acp import dialects, mcp_wire
from hopline.acp.chain import PROXY_MODE, Chain
from hopline.acp.dialects import CANCEL_REQUEST, DIALECTS, ENVELOPES, PROBE_ORDER, PROXY_INIT_METHODS
from hopline.acp.handshake import Handshakes
from hopline.acp.id_tables import FORWARD, PROBE, Hops, Pending
from hopline.acp.lifecycle import TRAFFIC, Event, State, step
from hopline.acp.mcp_routes import McpRoutes
from hopline.acp.sessions import Sessions
from hopline.jsonrpc import (
    JSONRPC,
    HoplineError,
    InvalidParams,
    InvalidRequest,
    Message,
    UnavailableError,
    error_response,
)

DOWN, UP = 1, -1
SESSION_END = frozenset({"session/close", "session/delete"})  # a successful answer ends the session
SESSION_TRACKED = mcp_wire.SESSION_SETUP | SESSION_END
Output = tuple[int, Message]
Tracer = Callable[[str, str, Message, "str | None", "str | None"], None]
Then = Callable[[Message], "Message | None"]


class Router(Handshakes):
    def __init__(self, chain: Chain, *, tracer: Tracer | None = None) -> None:
        n = len(chain.components)
        self.chain = chain
        self.proxy_mode = chain.mode == PROXY_MODE
        self.last = n + 1 if self.proxy_mode else n  # the last position
        self.names = ["parent" if self.proxy_mode else "client", *chain.names(), "successor"]
        self.is_proxy = [False, *(c.proxy for c in chain.components), False]
        self.state = [State.READY, *([State.IDLE] * n), State.IDLE]
        self.dialect: list[str | None] = [chain.client_dialect, *(c.dialect for c in chain.components), None]
        self.probes: list[list[str]] = [[] for _ in range(n + 2)]
        self.refusals: list[list[str]] = [[] for _ in range(n + 2)]
        self.held: list[list[tuple]] = [[] for _ in range(n + 2)]
        self.why: list[str] = [""] * (n + 2)
        self.answers: list[Any] = [None] * (n + 2)  # each position's answer to initialize
        self.init_params: list[Any] = [None] * (n + 2)  # the initialize params each proxy was offered
        self.restarts = [0] * (n + 2)  # consecutive restarts of each proxy
        self.upstream_dialect: str | None = None  # proxy mode: how our parent speaks
        self._parent_handshake: Any = None
        self.hops = Hops(n + 1)
        self.mcp = McpRoutes(self)
        self.sessions = Sessions(self)
        self.tracer = tracer
        self._out: list[Output] = []

    # -- entry points -------------------------------------------------------------
    def handle(self, conn: int, message: Message) -> list[Output]:
        out = self._out = []
        body = message.body
        if "method" not in body:
            self._answer_arrived(conn, message)
            return out
        method, params, plain = body["method"], body.get("params"), message
        src, direction = conn, (DOWN if conn == 0 else UP)
        if method in ENVELOPES and (self.is_proxy[conn] or (conn == 0 and self.proxy_mode)):
            try:
                method, params = dialects.unwrap(message)  # type: ignore[misc]
            except ValueError as exc:
                return self._reply(conn, body.get("id"), InvalidParams(str(exc)), conn)
            plain, src, direction = None, (self.last if conn == 0 else conn), (UP if conn == 0 else DOWN)
        msg_id = body.get("id")
        if method == CANCEL_REQUEST:
            self._cancel(conn, params)
        elif direction == DOWN and (method == "initialize" or method in PROXY_INIT_METHODS):
            self._initialize(conn, msg_id, src, message, method, params)
        elif method in mcp_wire.MCP_METHODS and self.mcp.handle(conn, msg_id, src, direction, method, params):
            pass
        elif direction == DOWN and msg_id is not None and (err := self.sessions.refusal(params)) is not None:
            self._reply(conn, msg_id, err, src)
        else:
            self._route(conn, msg_id, src, direction, method, params, plain)
        return out

    def lost(self, conn: int, reason: str) -> list[Output]:
        """Component ``conn`` is gone: answer, cancel and refuse what depended on it."""
        out = self._out = []
        self.state[conn] = step(self.state[conn], Event.EXITED)
        self.why[conn] = f"ACP component {self.names[conn]!r} exited ({reason})"
        policy = self.chain.policy(conn)
        if policy == "restart" and self.answers[conn] is None:
            policy = "fail"  # it never took its place: the client's initialize already failed
        elif policy == "restart" and self.restarts[conn] >= self.chain.restart_attempts:
            policy = "fail"
            self.why[conn] += f"; not restarted again after {self.restarts[conn]} attempt(s)"
        awaited, sent = self.hops.lose(conn)
        for p in awaited:
            if p.ends is not None:  # a session/close cut short: the session is gone anyway
                self.sessions.closed(p.ends)
            err = UnavailableError(
                f"{self.why[conn]} while handling {p.method!r}", backend=self.names[conn], reason="exited"
            )
            self._settle(p, error_response(None, err), conn, conductor=True)
        for target, target_id in sent:  # it will never read these answers: stop the work
            if target and self.state[target] in (State.DEAD, State.BYPASSED):
                continue
            self._emit(target, conn, _note(CANCEL_REQUEST, {"requestId": target_id}), None, CANCEL_REQUEST)
        self.mcp.lost(conn)
        if policy != "restart":
            self._flush(conn)  # what waited for it is refused (bypass: routed around it)
        if policy == "bypass":
            self.state[conn] = step(self.state[conn], Event.BYPASS)
        elif policy == "restart":
            self.restarts[conn] += 1
            self.state[conn] = step(self.state[conn], Event.RESTART)
        return out

    def in_flight(self, conn: int) -> int:
        """Requests from ``conn`` not answered yet (forwarded, or held for a probing proxy)."""
        held = sum(1 for queue in self.held for item in queue if item[1] == conn and item[2] is not None)
        return self.hops.in_flight_from(conn) + held

    # -- routing ------------------------------------------------------------------
    def _next(self, pos: int, direction: int) -> int:
        t = pos + direction
        while 0 < t < self.last and self.state[t] is State.BYPASSED:
            t += direction
        return t

    def _route(
        self, conn: int, msg_id: Any, src: int, direction: int, method: str, params: Any, plain: Message | None
    ) -> None:
        target = self._next(src, direction)
        if target > self.last:  # the agent has no successor: answer as the chain's end
            if msg_id is not None:
                self._reply(
                    conn, msg_id, InvalidRequest(f"{self.names[src]!r} is the terminal agent and has no successor"), src
                )
            return
        self._deliver(target, direction, conn, msg_id, src, method, params, plain)

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
        then: Then | None = None,
        request: bool | None = None,
    ) -> None:
        """Send one message to position ``t`` (``request``: with no origin, the conductor's own)."""
        traffic = TRAFFIC[self.state[t]]
        if traffic == "hold-down":
            traffic = "hold" if direction == DOWN else "deliver"
        if traffic == "hold":
            self.held[t].append((direction, conn, msg_id, src, method, params, plain, then, request))
            return
        is_request = msg_id is not None if request is None else request
        if traffic != "deliver":
            if is_request:
                self._settle(
                    Pending(conn, msg_id, method, then=then),
                    error_response(None, self._refusal(t, method)),
                    src,
                    conductor=True,
                )
            return
        setup = ends = None
        if direction == DOWN and method in SESSION_TRACKED:
            if method in SESSION_END:
                sid = params.get("sessionId") if isinstance(params, dict) else None
                ends = sid if isinstance(sid, str) else None
            else:
                new, keys = self.mcp.servers.setup(src, t, method, params)
                plain, params, setup = (None if new is not params else plain), new, (new, keys)
        elif direction == UP and self.sessions.replaying and self.sessions.muted(src, method, params):
            return  # history a restarted component's session/load replays: everyone above it has it
        wrap = self._wrapper(t, direction)
        out_conn = 0 if t == self.last and self.proxy_mode else t
        if not is_request:
            if wrap is not None:
                message = wrap.wrap(method, params, None)
            else:
                message = plain if plain is not None else _note(method, params)
            self._emit(out_conn, src, message, wrap, method, t)
            return
        new_id = self.hops.open(
            out_conn, Pending(conn, msg_id, method, FORWARD, t, src, then=then, setup=setup, ends=ends)
        )
        if wrap is not None:
            message = wrap.wrap(method, params, new_id)
        elif plain is not None:
            message = plain.replace(id=new_id)
        else:
            message = _request(new_id, method, params)
        self._emit(out_conn, src, message, wrap, method, t)

    def _wrapper(self, t: int, direction: int) -> dialects.Dialect | None:
        if direction == DOWN:
            return DIALECTS[self.upstream_dialect or "d5"] if (self.proxy_mode and t == self.last) else None
        return DIALECTS[self.dialect[t] or PROBE_ORDER[0]] if self.is_proxy[t] else None

    def _answer_arrived(self, conn: int, message: Message) -> None:
        pending = self.hops.close(conn, message.body.get("id"))
        if pending is None:
            return  # unknown id (or an orphan's answer after a crash): nothing waits for it
        if pending.kind == PROBE:
            self._probe_answered(conn, pending, message)
            return
        result = message.body.get("result")
        if pending.method == "initialize" and result is not None:
            self.answers[pending.position] = result
        elif pending.setup is not None:
            self.sessions.setup_answered(pending, message)
        elif pending.ends is not None and "result" in message.body:
            self.sessions.closed(pending.ends)
        self._settle(pending, message, conn)

    def _settle(self, pending: Pending, answer: Message, src: int, *, conductor: bool = False) -> None:
        """An answer for ``pending``: through its ``then`` hook, then back to its origin."""
        if pending.then is not None:
            answer = pending.then(answer)  # type: ignore[assignment]
            if answer is None:
                return
        if pending.origin is not None:
            self._emit_answer(pending, answer.replace(id=pending.origin_id), src, conductor)

    def _emit_answer(self, pending: Pending, answer: Message, src: int, conductor: bool = False) -> None:
        if (
            pending.origin == 0
            and self.upstream_dialect == "d1"
            and pending.origin_id == self._parent_handshake
            and "result" in answer.body
        ):
            answer = answer.replace(result=dialects.mark_proxy(answer.body["result"]))
        self._emit(pending.origin, src, answer, None, pending.method, pending.source, conductor)  # type: ignore[arg-type]

    def _cancel(self, conn: int, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        where = self.hops.where(conn, request_id)
        if where is not None:  # unknown ids are ignored silently (reference §1.3)
            self._emit(where[0], conn, _note(CANCEL_REQUEST, {"requestId": where[1]}), None, CANCEL_REQUEST)

    def _flush(self, t: int) -> None:
        held, self.held[t] = self.held[t], []
        for direction, conn, msg_id, src, method, params, plain, then, request in held:
            if (
                direction == DOWN
                and msg_id is not None
                and self.sessions.lost
                and (err := self.sessions.refusal(params)) is not None
            ):
                self._settle(Pending(conn, msg_id, method, then=then), error_response(None, err), src, conductor=True)
                continue  # it waited for a restart that lost its session
            self._deliver(t, direction, conn, msg_id, src, method, params, plain, then, request)

    def request_now(self, t: int, method: str, params: Any, then: Then) -> None:
        """The conductor's own request to proxy ``t``, as if from its predecessor, whatever ``t``'s state."""
        new_id = self.hops.open(t, Pending(None, None, method, FORWARD, t, t - 1, then=then))
        self._emit(t, t - 1, _request(new_id, method, params), None, method)

    # -- small helpers --------------------------------------------------------------
    def _refusal(self, t: int, method: str) -> HoplineError:
        if self.state[t] is State.IDLE:
            return InvalidRequest("Invalid request", data="expected `initialize` request")
        if self.state[t] is State.FAILED:
            return UnavailableError(
                f"{self.why[t]}; {method!r} cannot be served", backend=self.names[t], reason="not-a-proxy"
            )
        return UnavailableError(f"{self.why[t]}; {method!r} cannot be served", backend=self.names[t], reason="exited")

    def _reply(self, conn: Any, msg_id: Any, err: HoplineError, src: int) -> list[Output]:
        if msg_id is not None and conn is not None:
            self._emit(conn, src, error_response(msg_id, err), None, None, conductor=True)
        return self._out

    def _emit(
        self,
        conn: int,
        src: int,
        message: Message,
        wrap: Any,
        method: str | None,
        to: int | None = None,
        conductor: bool = False,
    ) -> None:
        self._out.append((conn, message))
        if self.tracer is not None:
            dst = to if to is not None else conn
            self.tracer(
                "conductor" if conductor else self.names[src],
                self.names[dst],
                message,
                wrap.name if wrap is not None else None,
                method,
            )


def _note(method: str, params: Any) -> Message:
    body: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
    if params is not None:
        body["params"] = params
    return Message(body)


def _request(msg_id: int, method: str, params: Any) -> Message:
    body: dict[str, Any] = {"jsonrpc": JSONRPC, "id": msg_id, "method": method}
    if params is not None:
        body["params"] = params
    return Message(body)
