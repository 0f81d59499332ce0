"""One connection's messages run against a :class:`~hopline.demo.protocol.DemoProtocol`:
shared by the demo's stdio server and by in-process servers built on the same protocol
(Conversion mode's ``ProtocolChannel``).

- Each request is admitted synchronously, in arrival order (the era lock and
  ``initialize`` take effect before any later request starts), then runs in a task of
  its own, so a slow call never holds up another; answers leave in completion order.
- ``notifications/cancelled {requestId}`` cancels that request's task; it gets no answer.
- A request id still in flight is refused with -32600 (answers are never cross-wired).
- Responses are ignored: these servers send no requests.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from hopline.demo.context import Request
from hopline.demo.protocol import DemoProtocol
from hopline.jsonrpc import (
    Id,
    InternalError,
    InvalidRequest,
    Message,
    ProtocolError,
    result,
)

log = logging.getLogger("hopline.demo")


class Outbox(Protocol):
    def send(self, body: dict[str, Any]) -> None: ...  # noqa: E704

    async def drain(self) -> None: ...  # noqa: E704


class Dispatcher:
    def __init__(self, protocol: DemoProtocol, outbox: Outbox, *, name: str = "demo") -> None:
        self.protocol, self.outbox, self.name = protocol, outbox, name
        self.inflight: dict[Id, asyncio.Task[None]] = {}

    def dispatch(self, msg: Message) -> None:
        body = msg.body
        if msg.is_response():
            log.debug("ignoring a response for id %r: this server sends no requests", msg.id)
        elif msg.is_notification():
            self._on_notification(body)
        elif msg.id in self.inflight:
            self.outbox.send(InvalidRequest(f"request id {msg.id!r} is already in flight").to_response(msg.id).body)
        else:
            try:
                outcome = self.protocol.admit(body, self.outbox)
            except ProtocolError as exc:
                self.outbox.send(exc.to_response(msg.id).body)
                return
            if isinstance(outcome, Request):
                self.inflight[outcome.id] = asyncio.create_task(
                    self._run(outcome), name=f"{self.name}-request-{outcome.id}"
                )
            else:
                self.outbox.send(result(msg.id, outcome).body)

    def cancel_all(self) -> None:
        for task in list(self.inflight.values()):
            task.cancel()

    def _on_notification(self, body: dict[str, Any]) -> None:
        if body["method"] != "notifications/cancelled":
            self.protocol.notify(body)
            return
        params = body.get("params") or {}
        request_id = params.get("requestId")
        task = self.inflight.get(request_id) if isinstance(request_id, (str, int)) else None
        if task is not None:
            log.info(
                "%s: request %r cancelled by the client (%s)",
                self.name,
                request_id,
                params.get("reason", "no reason given"),
            )
            task.cancel()

    async def _run(self, req: Request) -> None:
        try:
            value = await self.protocol.call(req)
        except asyncio.CancelledError:
            return  # cancelled by the client or at shutdown: no answer
        except ProtocolError as exc:
            self.outbox.send(exc.to_response(req.id).body)
        except Exception:
            log.exception("%s: %s failed", self.name, req.method)
            self.outbox.send(InternalError(f"internal error in {req.method}").to_response(req.id).body)
        else:
            self.outbox.send(result(req.id, value).body)
        finally:
            self.inflight.pop(req.id, None)
        await self.outbox.drain()
