"""The proxy handshake, as the routing core runs it (reference §2.3; lifecycle in :mod:`hopline.acp.lifecycle`).

The first ``initialize`` reaching a proxy position offers it the proxy role in
its configured dialect, or in D5, D4, D1 in turn (:data:`hopline.acp.dialects.PROBE_ORDER`)
while it refuses; traffic for it is held until it forwards ``initialize`` to its
successor, which shows the dialect it speaks. A terminal agent is initialised
plainly. Every successful answer is kept per position (:attr:`Router.answers`):
a restarted proxy (``--on-crash restart``) is offered the role again with the
same params, and its forwarded ``initialize`` is answered from that cache,
because its successor is already initialised and must not be asked twice. A
restarted terminal agent is sent the same plain ``initialize`` again; its new
answer replaces the cached one (its ``loadSession`` decides how sessions come back).

Mixed into :class:`hopline.acp.router.Router`; no I/O, no state of its own.
"""

from __future__ import annotations

from typing import Any

from hopline.acp import dialects
from hopline.acp.dialects import DIALECTS, PROBE_ORDER, PROXY_INIT_METHODS
from hopline.acp.id_tables import PROBE, Pending
from hopline.acp.lifecycle import REENTRY, Event, State, step
from hopline.jsonrpc import JSONRPC, HoplineError, InternalError, InvalidRequest, Message

ONLY_CONDUCTOR = "initialize/proxy requests are only sent by the conductor"
NOT_A_PROXY = "Proxy component did not accept proxy capability"
EXPECTED_HANDSHAKE = (
    "expected a proxy handshake (proxy/initialize, _proxy/initialize or initialize with _meta.proxy): "
    "this conductor runs in proxy mode"
)
DOWN = 1


class Handshakes:
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
        if 0 < src < self.last and self.state[src] is State.REJOINING:
            return self._answer_from_cache(conn, msg_id, src, t)
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
        self.init_params[t] = params  # a restarted component is offered the same again
        if not self.is_proxy[t]:
            self.state[t] = step(state, Event.INITIALIZE)
            return self._deliver(t, DOWN, conn, msg_id, src, "initialize", params, None)
        self.probes[t] = [self.dialect[t]] if self.dialect[t] else list(PROBE_ORDER)
        self.state[t] = step(state, Event.OFFER)
        self._offer(t, Pending(conn, msg_id, "initialize", PROBE, t, src, params))

    def _answer_from_cache(self, conn: int, msg_id: Any, src: int, t: int) -> None:
        """A restarted proxy forwards ``initialize``: its successor already answered it once."""
        cached = self.answers[t]
        if cached is None:
            return self._reply(conn, msg_id, self._refusal(t, "initialize"), src)
        self._emit(conn, t, Message({"jsonrpc": JSONRPC, "id": msg_id, "result": cached}), None, "initialize", src)

    def rejoin(self, t: int) -> list:
        """The shell restarted component ``t``: offer a proxy the role again, in the dialect
        it spoke; initialise a terminal agent again, with the params it had."""
        out = self._out = []
        pending = Pending(None, None, "initialize", PROBE, t, t - 1, self.init_params[t])
        if not self.is_proxy[t]:
            self.state[t] = step(self.state[t], Event.INITIALIZE)
            new_id = self.hops.open(t, pending)
            self._emit(
                t,
                t - 1,
                Message({"jsonrpc": JSONRPC, "id": new_id, "method": "initialize", "params": self.init_params[t]}),
                None,
                "initialize",
            )
            return out
        self.state[t] = step(self.state[t], Event.OFFER)
        self.probes[t] = [self.dialect[t] or PROBE_ORDER[0]]
        self._offer(t, pending)
        return out

    def _offer(self, t: int, pending: Pending) -> None:
        d = self.dialect[t] = self.probes[t].pop(0)
        pending.dialect = d
        new_id = self.hops.open(t, pending)
        message = DIALECTS[d].handshake_request(new_id, pending.params)
        self._emit(t, pending.source, message, DIALECTS[d], message.body["method"])

    def _probe_answered(self, t: int, pending: Pending, message: Message) -> None:
        error, result = message.body.get("error"), message.body.get("result")
        dialect = DIALECTS[pending.dialect or "d5"]
        if self.state[t] is State.REJOINING:
            accepted = error is None and (dialect.accepts(result) if self.is_proxy[t] else isinstance(result, dict))
            if accepted and not self.is_proxy[t]:
                self.answers[t] = result  # what the new agent process supports (loadSession) decides the reload
            return self._rejoin_answered(t, accepted)
        if self.state[t] is State.PROBING:
            # It answered without forwarding initialize first: whatever it said, it
            # did not act as a proxy (a D5 proxy MUST forward before answering).
            self.refusals[t].append(f"{dialect.handshake} ({dialect.name}): " + _summary(error))
            if self.probes[t]:
                self.state[t] = step(self.state[t], Event.REFUSED)
                return self._offer(t, pending)
            if error is not None and self.chain.components[t - 1].dialect is not None:
                return self._fail(t, pending, None, message)  # configured: its own refusal, unchanged
            return self._fail(
                t, pending, InvalidRequest(NOT_A_PROXY, data={"component": self.names[t], "tried": self.refusals[t]})
            )
        if error is None and not dialect.accepts(result):
            return self._fail(
                t,
                pending,
                InvalidRequest(
                    NOT_A_PROXY,
                    data={
                        "component": self.names[t],
                        "dialect": dialect.name,
                        "tried": ["answered without _meta.proxy"],
                    },
                ),
            )
        if error is None:
            self._lock(t, Event.ACCEPTED)
            if dialect.marks_initialize:
                message = message.replace(result=dialects.strip_proxy_mark(result))
            self.answers[t] = message.body.get("result")
        if pending.origin is not None:
            self._emit_answer(pending, message.replace(id=pending.origin_id), t)

    def _rejoin_answered(self, t: int, accepted: bool) -> None:
        if accepted:
            self.state[t] = step(self.state[t], Event.ACCEPTED)
            self.sessions.reload(t)
            return
        self.state[t] = step(self.state[t], Event.EXHAUSTED)
        role = "accept the proxy role" if self.is_proxy[t] else "answer initialize"
        self.why[t] = f"ACP component {self.names[t]!r} did not {role} after a restart"
        self._flush(t)

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


def _summary(error: Any) -> str:
    if error is None:
        return "answered without forwarding initialize to its successor"
    if isinstance(error, dict):
        return f"error {error.get('code')} {error.get('message', '')}".rstrip()
    return f"error {error!r}"
