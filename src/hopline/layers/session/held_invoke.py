"""A 2026-07-28 client's invoke on a handshake-era backend that may ask for input
(sampling, elicitation, roots): run it on a backend session of its own, held open across
the client's MRTR retries (``layers/session/held.py``).

Used when the client declared one of those capabilities. With ``mediate_input`` (on by
default for HTTP backends; for a stdio backend it means a process per such call, so it is
opt-in) the call runs on a backend session of its own; otherwise on the shared backend
session of the client's capability set, where what the backend asks while this call is the
only one in flight comes to the held call (``GatewaySession.held_call``, sharing.py), and
anything else is refused. Progress and logs of the held call go to the round whose
request is waiting (``Held.attend``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Protocol

from hopline.binding import META_CLIENT_CAPABILITIES, Era
from hopline.context import principal_fields
from hopline.jsonrpc import InvalidParams, Message, result
from hopline.layers.session.held import Held
from hopline.pipeline import Call

if TYPE_CHECKING:
    from hopline.context import Principal
    from hopline.layers.discovery.backend import BackendSession
    from hopline.layers.session.held import HeldCalls
    from hopline.layers.session.hub import Replicas, Settings


class HeldSource(Protocol):
    """Layer 2's registry, as a held call uses it: a backend session of the call's own, and
    how long the backend is given to answer."""

    async def connect(
        self,
        backend_id: str,
        *,
        era: Era,
        client_capabilities: dict[str, Any],
        on_request: Callable[[Message], Any],
        on_notification: Callable[[Message], None],
        principal: Principal,
    ) -> BackendSession: ...

    def timeout_for(self, backend_id: str) -> float | None: ...


class HeldHub(Protocol):
    """What a held call reaches beyond its client: the held calls, the other replicas (which may
    hold it), the registry, the backends' settings (``mediate_input``)."""

    held: HeldCalls
    replicas: Replicas | None
    registry: HeldSource
    settings: Settings


class HeldClient(Protocol):
    """The client session a held call is for (a ``GatewaySession``)."""

    hub: HeldHub
    principal: Principal
    held_call: Held | None  # its call held on a shared session, which the backend's requests go to

    async def backend(self, backend_id: str) -> BackendSession: ...

    def notify(self, message: Message) -> None: ...

    def progress_relay(self, token: Any) -> Callable[[Message], None]: ...


ASKS = ("sampling", "elicitation", "roots")
RETRY_KEYS = ("inputResponses", "requestState")


def applies(gs: HeldClient, session: BackendSession, message: Message, params: dict[str, Any]) -> bool:
    if session.info.era is not Era.HANDSHAKE:
        return False
    if gs.hub.held.is_ours(params.get("requestState")):
        return True
    return bool(_asks(message))


def _dedicated(gs: HeldClient, backend_id: str) -> bool:
    """Whether a held call runs on a backend session of its own (``mediate_input``)."""
    spec = gs.hub.settings.backends[backend_id]
    return spec.mediate_input if spec.mediate_input is not None else spec.url is not None


async def _handed(gs: HeldClient, replica: str, message: Message, call: Call) -> Message:
    """The client's retry, answered by the replica that holds its call (as this caller)."""
    answer = await gs.hub.replicas.forward(replica, message.body, principal_fields(gs.principal), call.timeout)
    return Message(answer)


def _asks(message: Message) -> dict[str, Any]:
    caps = message.meta.get(META_CLIENT_CAPABILITIES)
    return {k: v for k, v in caps.items() if k in ASKS} if isinstance(caps, dict) else {}


async def send(gs: HeldClient, message: Message, call: Call) -> Message:
    """One round: start the held call, or resume it with the client's answers; then the
    backend's final answer, or an ``input_required`` result naming the held call."""
    g = gs.hub
    owner = gs.principal.key
    state = call.params.get("requestState")
    there = g.held.elsewhere(state)
    if there is not None and g.replicas is not None:  # held by another replica: it answers
        return await _handed(gs, there, message, call)
    if g.held.is_ours(state):
        held = g.held.take(state, owner)
        if held is None:
            raise InvalidParams("Unknown or expired requestState", request_id=message.id)
        held.answer(call.params.get("inputResponses"))
    else:
        caps = _asks(message)
        params = {k: v for k, v in call.params.items() if k not in RETRY_KEYS}

        async def start(held: Held) -> Message:
            if not _dedicated(gs, call.backend):  # on the shared session: what it asks meanwhile comes here
                gs.held_call = held
                shared = await gs.backend(call.backend)
                return await shared.call(call.method, params, timeout=call.timeout, on_progress=held.progress, owner=gs)
            dedicated = await g.registry.connect(
                call.backend,
                era=Era.HANDSHAKE,
                client_capabilities=caps,
                on_request=held.on_request,
                on_notification=held.notified,
                principal=gs.principal,
            )
            try:
                # on_progress: the peer mints its own token and the held call relays to each round's
                return await dedicated.call(call.method, params, timeout=call.timeout, on_progress=held.progress)
            finally:
                asyncio.ensure_future(dedicated.aclose())

        if g.replicas is not None:  # the state we hand out names this replica: be reachable first
            await g.replicas.ready(1.0)
        held = g.held.hold(owner, start, on_expire=_expired)
    token = message.meta.get("progressToken")
    held.attend(
        None if token is None else gs.progress_relay(token), _logs_to(gs)
    )  # this round's request hears what the call reports
    try:
        step = await held.next_step(g.registry.timeout_for(call.backend))
    except BaseException:
        g.held.release(held)
        held.abandon("the gateway gave up on this call")
        raise
    finally:
        held.attend(None, None)  # between rounds there is no stream to report on
    if isinstance(step, Message):
        g.held.release(held)
        return step
    g.held.touch(held, _expired)
    return result(message.id, step)


def _logs_to(gs: HeldClient) -> Callable[[Message], None]:
    def deliver(message: Message) -> None:
        if (
            message.method == "notifications/message"
        ):  # logs; list changes and the rest are the shared session's business
            gs.notify(message)

    return deliver


def _expired(held: Held) -> None:
    pass  # abandon() already answered the backend and cancelled the call (its session closes)
