"""Version mediation the hard way round (reference/mcp-wire.md §9 "MRTR"): a 2026-07-28
client in front of a handshake-era backend that asks for input mid-call.

The backend sends a server→client request (sampling, elicitation, roots) and waits; a
2026-07-28 client cannot receive one, but it can answer an ``input_required`` result and
retry. So the gateway holds the backend call open (:class:`Held`), turns each backend
request into an entry of ``inputRequests``, hands the client a ``requestState`` that names
the held call, and on the retry answers the waiting backend request with the client's
``inputResponses`` and waits for what the backend does next: another request (another
round) or the final result.

Contract
- A held call belongs to the principal that started it; a ``requestState`` presented by
  anyone else, unknown, or expired is treated as unknown.
- ``requestState`` is ``hopline-held:`` + 192 random bits: unguessable, so it needs no
  signature, and it only means something to this process. Behind a load balancer the
  replica's id comes first (``hopline-held:<replica>.<random>``): a retry reaching another
  replica is handed to this one (transports/replica_link.py, :meth:`HeldCalls.elsewhere`).
- A held call the client abandons expires after ``ttl`` seconds: its backend requests
  are answered with an error and its backend session closed (``on_expire``).
- Progress and logs of the held call reach the client request of the round in flight
  (each round is its own request, with its own stream and progress token:
  :meth:`Held.attend`); between rounds there is no stream, and they are dropped.
- Sans-io apart from futures: the gateway supplies the backend call and the session.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from typing import Any, Awaitable, Callable

from hopline.jsonrpc import InternalError, Message, result

PREFIX = "hopline-held:"


class Held:
    def __init__(self, token: str, owner: Any) -> None:
        self.token = token
        self.owner = owner
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.pending: dict[str, tuple[Message, asyncio.Future[Message]]] = {}
        self.task: asyncio.Task | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self._keys = itertools.count(1)
        self.on_progress: Callable[[Message], None] | None = None  # this round's client request, while it waits
        self.on_notification: Callable[[Message], None] | None = None

    def attend(
        self, on_progress: Callable[[Message], None] | None, on_notification: Callable[[Message], None] | None
    ) -> None:
        """Route what the backend reports (progress, logs) to the round now waiting (None: drop)."""
        self.on_progress, self.on_notification = on_progress, on_notification

    def progress(self, message: Message) -> None:
        if self.on_progress is not None:
            self.on_progress(message)

    def notified(self, message: Message) -> None:
        if self.on_notification is not None:
            self.on_notification(message)

    @property
    def state(self) -> str:
        return PREFIX + self.token

    async def on_request(self, message: Message) -> Message:
        """The backend asks the client something: park it until the client's retry."""
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self.events.put_nowait(("ask", (message, future)))
        return await future

    def finished(self, answer: Message | BaseException) -> None:
        self.events.put_nowait(("done", answer))

    async def next_step(self, timeout: float | None) -> Message | dict[str, Any]:
        """The backend's final answer (a Message), or an ``input_required`` result value
        carrying every request the backend is now waiting on."""
        kind, value = await asyncio.wait_for(self.events.get(), timeout)
        if kind == "done":
            if isinstance(value, BaseException):
                raise value
            return value
        self._park(*value)
        while not self.events.empty():  # requests asked together travel together
            kind, more = self.events.get_nowait()
            if kind == "done":  # the call ended while asking: the asks are moot
                self.events.put_nowait((kind, more))
                break
            self._park(*more)
        requests = {
            key: {"method": m.method, "params": m.body.get("params") or {}} for key, (m, _f) in self.pending.items()
        }
        return {"resultType": "input_required", "inputRequests": requests, "requestState": self.state}

    def _park(self, message: Message, future: asyncio.Future[Message]) -> None:
        self.pending[f"hopline-{next(self._keys)}"] = (message, future)

    def answer(self, responses: Any) -> None:
        """The client's ``inputResponses``: each answers the backend request of its key;
        a request left unanswered gets an error (the backend decides what that means)."""
        responses = responses if isinstance(responses, dict) else {}
        pending, self.pending = self.pending, {}
        for key, (message, future) in pending.items():
            if future.done():
                continue
            reply = responses.get(key)
            if isinstance(reply, dict):
                future.set_result(result(message.id, reply))
            else:
                future.set_result(
                    InternalError(f"the client gave no answer to {message.method}").to_response(message.id)
                )

    def abandon(self, why: str) -> None:
        for message, future in self.pending.values():
            if not future.done():
                future.set_result(InternalError(why).to_response(message.id))
        self.pending = {}
        if self.task is not None:
            self.task.cancel()


class HeldCalls:
    """Every held call of one gateway, by ``requestState``."""

    def __init__(self, ttl: float = 300.0, replica: str | None = None) -> None:
        self.ttl = ttl
        self.replica = replica  # this process's id among replicas (None: alone)
        self._held: dict[str, Held] = {}

    def hold(self, owner: Any, start: Callable[[Held], Awaitable[Message]], on_expire: Callable[[Held], None]) -> Held:
        token = secrets.token_urlsafe(24)
        held = Held(token if self.replica is None else f"{self.replica}.{token}", owner)
        self._held[held.token] = held

        async def run() -> None:
            try:
                held.finished(await start(held))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # delivered to whoever waits for the next step
                held.finished(exc)

        held.task = asyncio.ensure_future(run())
        self.touch(held, on_expire)
        return held

    def touch(self, held: Held, on_expire: Callable[[Held], None]) -> None:
        if held.expiry is not None:
            held.expiry.cancel()

        def expire() -> None:
            if self._held.pop(held.token, None) is not None:
                held.abandon("the client did not come back for this call in time")
                on_expire(held)

        held.expiry = asyncio.get_running_loop().call_later(self.ttl, expire)

    def take(self, state: Any, owner: Any) -> Held | None:
        """The held call ``state`` names, if it exists and belongs to ``owner``."""
        if not isinstance(state, str) or not state.startswith(PREFIX):
            return None
        held = self._held.get(state[len(PREFIX) :])
        return held if held is not None and held.owner == owner else None

    def release(self, held: Held) -> None:
        self._held.pop(held.token, None)
        if held.expiry is not None:
            held.expiry.cancel()

    def is_ours(self, state: Any) -> bool:
        return isinstance(state, str) and state.startswith(PREFIX)

    def elsewhere(self, state: Any) -> str | None:
        """The replica holding the call ``state`` names, when it is another one."""
        if self.replica is None or not self.is_ours(state):
            return None
        replica, dot, _ = state[len(PREFIX) :].partition(".")
        return replica if dot and replica != self.replica else None

    def __len__(self) -> int:
        return len(self._held)
