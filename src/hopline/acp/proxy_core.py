"""What every hopline proxy component shares: the handshake, forwarding both ways, cancellation.

A proxy component (the bridge, :mod:`hopline.acp.bridge`; the gateway,
:mod:`hopline.acp.gateway`) sits in a chain between its predecessor (the
conductor, speaking for the client side) and its successor (reached through
the conductor in successor envelopes). :class:`ProxyCore` does the part that
does not depend on what the proxy is for:

- **Handshake.** It accepts whichever proxy handshake it is offered (D5/D2
  ``proxy/initialize``, D4/D3 ``_proxy/initialize``, D1 ``initialize`` with
  ``_meta.proxy``), forwards ``initialize`` to its successor before answering
  (D5 rule) and answers in the same dialect (D1: echoing ``_meta.proxy``). A
  plain ``initialize`` (not offered the role) is refused: it runs only as a proxy.
- **Forwarding.** What the predecessor sends goes down, wrapped in the
  handshake dialect's successor envelope; what arrives in an envelope from the
  successor goes up plainly. Answers map back to the ids they came with.
- **Cancellation.** A ``$/cancel_request`` is translated to this hop's own id of
  the request it names, never tunnelled.
- **Hooks** for subclasses (each runs on the reader's path and never waits):
  :meth:`initialized` (the answer to ``initialize`` on its way up),
  :meth:`setup` (a ``session/new|load|resume|fork`` on its way down, and what to
  do with its answer), :meth:`ended` (a session closed or deleted),
  :meth:`from_predecessor` / :meth:`from_successor` (messages the proxy serves
  itself instead of forwarding), :meth:`cancelled` (a cancel for one of those).

Everything it sends goes through one ordered queue drained by :meth:`write`, so
the reader never waits on a slow peer and the order of what it sends is kept.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from hopline.acp import dialects, mcp_wire
from hopline.acp.dialects import CANCEL_REQUEST, DIALECTS, ENVELOPES
from hopline.jsonrpc import JSONRPC, Message
from hopline.layers.transport.channel import Channel, ChannelClosed

log = logging.getLogger("hopline.acp")

Then = Callable[[dict[str, Any]], None]
Rewrite = Callable[[dict[str, Any]], dict[str, Any]]
SESSION_END = frozenset({"session/close", "session/delete"})


class ProxyCore:
    #: what a plain ``initialize`` (the role not offered) is answered with
    not_a_proxy = "this hopline component runs only as a proxy (it was not offered the proxy role)"

    def __init__(self, out: Channel) -> None:
        self.out = out
        self.dialect = "d5"  # our handshake's, once offered
        self._next = 0
        self._waiting: dict[int, Then] = {}  # our request id → what to do with its answer
        self._relayed: dict[Any, int] = {}  # the predecessor's request id → ours for it (for cancels)
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()

    # -- hooks ------------------------------------------------------------------------------
    def initialized(self, result: dict[str, Any]) -> dict[str, Any]:
        """The successor's ``initialize`` result, as this proxy answers it upward."""
        return result

    def setup(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], Rewrite | None]:
        """A session setup going down: the params to forward, and a hook for its answer."""
        return params, None

    def ended(self, session_id: str) -> None:
        """``session_id`` was closed or deleted (its answer was a success)."""

    def from_predecessor(self, msg_id: Any, method: str, params: Any) -> bool:
        """A plain message the proxy serves itself; False: forward it down."""
        return False

    def from_successor(self, msg_id: Any, method: str, params: Any) -> bool:
        """A message from the successor (unwrapped) the proxy serves itself; False: forward it up."""
        return False

    def cancelled(self, msg_id: Any) -> None:
        """``$/cancel_request`` for ``msg_id``, which was not forwarded (the proxy may be serving it)."""

    # -- sending (never waits: one writer task keeps the order) ------------------------------
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

    def request(self, method: str, params: Any, then: Then) -> int:
        """Our own request to the predecessor."""
        self._next += 1
        self._waiting[self._next] = then
        self._send({"id": self._next, "method": method, "params": params})
        return self._next

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def request_down(self, method: str, params: Any, then: Then) -> int:
        """Our own request to the successor (in our dialect's envelope)."""
        self._next += 1
        self._waiting[self._next] = then
        self._queue.put_nowait(DIALECTS[self.dialect].wrap(method, params, self._next))
        return self._next

    def notify_down(self, method: str, params: Any) -> None:
        self._queue.put_nowait(DIALECTS[self.dialect].wrap(method, params, None))

    def answer(self, msg_id: Any, fields: dict[str, Any]) -> None:
        self._send({"id": msg_id, **fields})

    def cancel(self, our_id: int) -> None:
        self._send({"method": CANCEL_REQUEST, "params": {"requestId": our_id}})

    # -- receiving ------------------------------------------------------------------------------
    def handle(self, message: Message) -> None:
        body = message.body
        method, msg_id, params = body.get("method"), body.get("id"), body.get("params")
        if method is None:
            then = self._waiting.pop(msg_id, None)  # type: ignore[arg-type]
            if then is not None:
                then(body)
            return
        if method in ENVELOPES:
            return self._from_successor(msg_id, message)
        handshake = dialects.handshake_dialect(message)
        if handshake is not None:
            self.dialect = handshake
            return self._down("initialize", dialects.strip_proxy_mark(params), msg_id, self._initialized)
        if method == "initialize":
            if msg_id is not None:
                self.answer(msg_id, {"error": {"code": -32600, "message": self.not_a_proxy}})
            return
        if method == CANCEL_REQUEST:
            their = params.get("requestId") if isinstance(params, dict) else None
            ours = self._relayed.get(their)  # type: ignore[arg-type]
            if ours is not None:
                self.cancel(ours)
            else:
                self.cancelled(their)
            return
        if self.from_predecessor(msg_id, method, params):
            return
        then: Rewrite | None = None
        if method in mcp_wire.SESSION_SETUP and isinstance(params, dict):
            params, then = self.setup(method, params)
        elif method in SESSION_END and isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            then = self._ending(params["sessionId"])
        self._down(method, params, msg_id, then)

    def _from_successor(self, msg_id: Any, message: Message) -> None:
        try:
            inner, inner_params = dialects.unwrap(message)  # type: ignore[misc]
        except ValueError as exc:
            if msg_id is not None:
                self.answer(msg_id, {"error": {"code": -32602, "message": str(exc)}})
            return
        if self.from_successor(msg_id, inner, inner_params):
            return
        if msg_id is None:
            self._send({"method": inner, **({"params": inner_params} if inner_params is not None else {})})
            return

        def back(answer: dict[str, Any]) -> None:
            self._relayed.pop(msg_id, None)
            self.answer(msg_id, _outcome(answer))

        self._relayed[msg_id] = self.request(inner, inner_params, back)

    def _down(self, method: str, params: Any, their_id: Any, then: Rewrite | None = None) -> None:
        if their_id is None:
            self.notify_down(method, params)
            return

        def back(answer: dict[str, Any]) -> None:
            self._relayed.pop(their_id, None)
            self.answer(their_id, _outcome(then(answer) if then is not None else answer))

        self._relayed[their_id] = self.request_down(method, params, back)

    def _initialized(self, answer: dict[str, Any]) -> dict[str, Any]:
        result = answer.get("result")
        if not isinstance(result, dict):
            return answer
        result = self.initialized(dict(result))
        if self.dialect == "d1":
            result = dialects.mark_proxy(result)
        return {**answer, "result": result}

    def _ending(self, session_id: str) -> Rewrite:
        def then(answer: dict[str, Any]) -> dict[str, Any]:
            if "result" in answer:
                self.ended(session_id)
            return answer

        return then


async def feed(
    inbound: Any, handle: Callable[[Message], None], *, name: str, on_error: Callable[[Message], None] | None = None
) -> None:
    """Hand every message from ``inbound`` to ``handle`` until the channel closes. A bug in
    ``handle`` costs that one message (logged, and ``on_error`` may answer it), never the chain."""
    while True:
        try:
            message = await inbound.receive()
        except ChannelClosed:
            return
        try:
            handle(message)
        except Exception:
            log.exception("%s: failed to handle %r", name, message)
            if on_error is not None:
                on_error(message)


def _outcome(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k in ("result", "error")}
