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

Guarantees:
- Ids are rewritten per connection (:mod:`hopline.acp.hops`); answers map back.
- Order: :meth:`Router.handle` emits outputs in arrival order and never waits,
  so per (source → destination) FIFO holds if the shell writes each
  connection's outputs in order. An update sent before a result stays before it.
- ``$/cancel_request`` is translated hop by hop, never tunnelled.
- Handshakes follow :mod:`hopline.acp.lifecycle`; a proxy of unknown dialect is
  offered D5, D4, D1 in turn (:data:`hopline.acp.dialects.PROBE_ORDER`), and
  traffic for it is held until it shows which one it speaks.
- A lost component answers everything awaited from it with the conductor's own
  error (never a hang); its own outstanding requests are cancelled downstream.
"""

from __future__ import annotations

from typing import Any, Callable

from hopline.acp import dialects
from hopline.acp.chain import PROXY_MODE, Chain
from hopline.acp.dialects import CANCEL_REQUEST, DIALECTS, ENVELOPES, PROBE_ORDER, PROXY_INIT_METHODS
from hopline.acp.hops import FORWARD, PROBE, Hops, Pending
from hopline.acp.lifecycle import REENTRY, TRAFFIC, Event, State, step
from hopline.jsonrpc import JSONRPC, HoplineError, InternalError, InvalidParams, InvalidRequest, Message, UnavailableError, error_response

DOWN, UP = 1, -1
Output = tuple[int, Message]
Tracer = Callable[[str, str, Message, "str | None", "str | None"], None]

ONLY_CONDUCTOR = "initialize/proxy requests are only sent by the conductor"
NOT_A_PROXY = "Proxy component did not accept proxy capability"
EXPECTED_HANDSHAKE = "expected a proxy handshake (proxy/initialize, _proxy/initialize or initialize with _meta.proxy): this conductor runs in proxy mode"


class Router:
    def __init__(self, chain: Chain, *, tracer: Tracer | None = None) -> None:
        n = len(chain.components)
        self.chain = chain
        self.proxy_mode = chain.mode == PROXY_MODE
        self.last = n + 1 if self.proxy_mode else n  # the last position
        self.names = ["parent" if self.proxy_mode else "client", *chain.names(), "successor"]
        self.is_proxy = [False, *(c.proxy for c in chain.components), False]
        self.state = [State.READY, *([State.IDLE] * n), State.IDLE]
        self.dialect: list[str | None] = [None, *(c.dialect for c in chain.components), None]
        self.probes: list[list[str]] = [[] for _ in range(n + 2)]
        self.refusals: list[list[str]] = [[] for _ in range(n + 2)]
        self.held: list[list[tuple]] = [[] for _ in range(n + 2)]
        self.why: list[str] = [""] * (n + 2)
        self.upstream_dialect: str | None = None  # proxy mode: how our parent speaks
        self._parent_handshake: Any = None
        self.hops = Hops(n + 1)
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
                return self._refuse(conn, body.get("id"), InvalidParams(str(exc)))
            plain, src, direction = None, (self.last if conn == 0 else conn), (UP if conn == 0 else DOWN)
        msg_id = body.get("id")
        if method == CANCEL_REQUEST:
            self._cancel(conn, params)
        elif direction == DOWN and (method == "initialize" or method in PROXY_INIT_METHODS):
            self._initialize(conn, msg_id, src, message, method, params)
        else:
            self._route(conn, msg_id, src, direction, method, params, plain)
        return out

    def lost(self, conn: int, reason: str) -> list[Output]:
        """Component ``conn`` is gone: answer, cancel and refuse what depended on it."""
        out = self._out = []
        self.state[conn] = step(self.state[conn], Event.EXITED)
        self.why[conn] = f"ACP component {self.names[conn]!r} exited ({reason})"
        awaited, sent = self.hops.lose(conn)
        for p in awaited:
            if p.origin is not None:
                self._reply(p.origin, p.origin_id, UnavailableError(f"{self.why[conn]} while handling {p.method!r}", backend=self.names[conn], reason="exited"), conn)
        for target, target_id in sent:  # it will never read these answers: stop the work
            if target and self.state[target] in (State.DEAD, State.BYPASSED):
                continue
            self._emit(target, conn, _note(CANCEL_REQUEST, {"requestId": target_id}), None, CANCEL_REQUEST)
        self._flush(conn)
        if self.chain.on_crash == "bypass" and self.is_proxy[conn]:
            self.state[conn] = step(self.state[conn], Event.BYPASS)
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

    def _route(self, conn: int, msg_id: Any, src: int, direction: int, method: str, params: Any, plain: Message | None) -> None:
        target = self._next(src, direction)
        if target > self.last:  # the agent has no successor: answer as the chain's end
            if msg_id is not None:
                self._reply(conn, msg_id, InvalidRequest(f"{self.names[src]!r} is the terminal agent and has no successor"), src)
            return
        self._deliver(target, direction, conn, msg_id, src, method, params, plain)

    def _deliver(self, t: int, direction: int, conn: int, msg_id: Any, src: int, method: str, params: Any, plain: Message | None) -> None:
        traffic = TRAFFIC[self.state[t]]
        if traffic == "hold":
            self.held[t].append((direction, conn, msg_id, src, method, params, plain))
            return
        if traffic != "deliver":
            if msg_id is not None:
                self._reply(conn, msg_id, self._refusal(t, method), src)
            return
        wrap = self._wrapper(t, direction)
        out_conn = 0 if t == self.last and self.proxy_mode else t
        if msg_id is None:
            if wrap is not None:
                message = wrap.wrap(method, params, None)
            else:
                message = plain if plain is not None else _note(method, params)
            self._emit(out_conn, src, message, wrap, method, t)
            return
        new_id = self.hops.open(out_conn, Pending(conn, msg_id, method, FORWARD, t, src))
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
        if pending.origin is not None:
            self._emit_answer(pending, message.replace(id=pending.origin_id), conn)

    def _emit_answer(self, pending: Pending, answer: Message, src: int) -> None:
        if pending.origin == 0 and self.upstream_dialect == "d1" and pending.origin_id == self._parent_handshake and "result" in answer.body:
            answer = answer.replace(result=dialects.mark_proxy(answer.body["result"]))
        self._emit(pending.origin, src, answer, None, pending.method, pending.source)  # type: ignore[arg-type]

    def _cancel(self, conn: int, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        where = self.hops.where(conn, request_id)
        if where is not None:  # unknown ids are ignored silently (reference §1.3)
            self._emit(where[0], conn, _note(CANCEL_REQUEST, {"requestId": where[1]}), None, CANCEL_REQUEST)

    # -- initialization ---------------------------------------------------------------
    def _initialize(self, conn: int, msg_id: Any, src: int, message: Message, method: str, params: Any) -> None:
        t = self._next(src, DOWN)
        if src == 0 and self.proxy_mode:
            handshake = dialects.handshake_dialect(message)
            if handshake is None:
                return self._reply(conn, msg_id, InvalidRequest("Invalid request", data=EXPECTED_HANDSHAKE), src)
            if self.state[t] is State.IDLE:
                self.upstream_dialect, self._parent_handshake = handshake, msg_id
        elif method in PROXY_INIT_METHODS:
            return self._reply(conn, msg_id, InvalidRequest("Invalid request", data=ONLY_CONDUCTOR), src)
        if msg_id is None:
            return  # an initialize notification means nothing
        if 0 < src < self.last and self.state[src] is State.PROBING:
            self._lock(src, Event.FORWARDED)  # it forwarded initialize: it speaks what we offered
        params = dialects.strip_proxy_mark(params)
        state = self.state[t]
        if state is not State.IDLE:
            if state in REENTRY:
                code, text = REENTRY[state]
                err: HoplineError = InvalidRequest(text) if code == -32600 else InternalError(text)
            else:
                err = self._refusal(t, method)
            return self._reply(conn, msg_id, err, src)
        if not self.is_proxy[t]:
            self.state[t] = step(state, Event.INITIALIZE)
            return self._deliver(t, DOWN, conn, msg_id, src, "initialize", params, None)
        self.probes[t] = [self.dialect[t]] if self.dialect[t] else list(PROBE_ORDER)
        self.state[t] = step(state, Event.OFFER)
        self._offer(t, Pending(conn, msg_id, "initialize", PROBE, t, src, params))

    def _offer(self, t: int, pending: Pending) -> None:
        d = self.dialect[t] = self.probes[t].pop(0)
        pending.dialect = d
        new_id = self.hops.open(t, pending)
        message = DIALECTS[d].handshake_request(new_id, pending.params)
        self._emit(t, pending.source, message, DIALECTS[d], message.body["method"])

    def _probe_answered(self, t: int, pending: Pending, message: Message) -> None:
        error, result = message.body.get("error"), message.body.get("result")
        dialect = DIALECTS[pending.dialect or "d5"]
        if self.state[t] is State.PROBING:
            # It answered without forwarding initialize first: whatever it said, it
            # did not act as a proxy (a D5 proxy MUST forward before answering).
            self.refusals[t].append(f"{dialect.handshake} ({dialect.name}): " + _summary(error))
            if self.probes[t]:
                self.state[t] = step(self.state[t], Event.REFUSED)
                return self._offer(t, pending)
            if error is not None and self.chain.components[t - 1].dialect is not None:
                return self._fail(t, pending, None, message)  # configured: its own refusal, unchanged
            return self._fail(t, pending, InvalidRequest(NOT_A_PROXY, data={"component": self.names[t], "tried": self.refusals[t]}))
        if error is None and not dialect.accepts(result):
            return self._fail(t, pending, InvalidRequest(NOT_A_PROXY, data={"component": self.names[t], "dialect": dialect.name, "tried": ["answered without _meta.proxy"]}))
        if error is None:
            self._lock(t, Event.ACCEPTED)
            if dialect.marks_initialize:
                message = message.replace(result=dialects.strip_proxy_mark(result))
        if pending.origin is not None:
            self._emit_answer(pending, message.replace(id=pending.origin_id), t)

    def _lock(self, t: int, event: Event) -> None:
        self.state[t] = step(self.state[t], event)
        self._flush(t)

    def _fail(self, t: int, pending: Pending, err: HoplineError | None, answer: Message | None = None) -> None:
        self.state[t] = step(self.state[t], Event.EXHAUSTED)
        self.why[t] = f"ACP component {self.names[t]!r} did not start as a proxy"
        if pending.origin is not None:
            if err is not None:
                self._reply(pending.origin, pending.origin_id, err, t)
            elif answer is not None:
                self._emit_answer(pending, answer.replace(id=pending.origin_id), t)
        self._flush(t)

    def _flush(self, t: int) -> None:
        held, self.held[t] = self.held[t], []
        for direction, conn, msg_id, src, method, params, plain in held:
            self._deliver(t, direction, conn, msg_id, src, method, params, plain)

    # -- small helpers --------------------------------------------------------------
    def _refusal(self, t: int, method: str) -> HoplineError:
        if self.state[t] is State.IDLE:
            return InvalidRequest("Invalid request", data="expected `initialize` request")
        if self.state[t] is State.FAILED:
            return UnavailableError(f"{self.why[t]}; {method!r} cannot be served", backend=self.names[t], reason="not-a-proxy")
        return UnavailableError(f"{self.why[t]}; {method!r} cannot be served", backend=self.names[t], reason="exited")

    def _reply(self, conn: int, msg_id: Any, err: HoplineError, src: int) -> list[Output]:
        if msg_id is not None:
            self._emit(conn, src, error_response(msg_id, err), None, None, conductor=True)
        return self._out

    def _refuse(self, conn: int, msg_id: Any, err: HoplineError) -> list[Output]:
        return self._reply(conn, msg_id, err, conn)

    def _emit(self, conn: int, src: int, message: Message, wrap: Any, method: str | None, to: int | None = None, conductor: bool = False) -> None:
        self._out.append((conn, message))
        if self.tracer is not None:
            dst = to if to is not None else conn
            self.tracer("conductor" if conductor else self.names[src], self.names[dst], message, wrap.name if wrap is not None else None, method)


def _summary(error: Any) -> str:
    if error is None:
        return "answered without forwarding initialize to its successor"
    if isinstance(error, dict):
        return f"error {error.get('code')} {error.get('message', '')}".rstrip()
    return f"error {error!r}"


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
