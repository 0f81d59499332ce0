"""The innermost call layers (Layer 6): one routed invoke's exchange with its backend session.

They run after every configured call layer (resilience, policy, observability), once per
attempt, so a retry after a reconnect binds the new backend session. ``EXCHANGE`` is the
pipeline's last step for every ``to_backend`` call of a gateway session, configured layers
or none. Which steps a call goes through is chosen once it is bound (the client's era, the
backend session's era, a subscription or not): a step that cannot apply is not in its chain.

- :class:`Bind`: the backend session the call goes to (an unavailable backend raises here,
  inside resilience, where the breaker counts it).
- :class:`EraMediation`: a handshake client's capabilities travel per request to a
  2026-07-28 backend (what it declared, so the backend may ask it for input; plus the Tasks
  extension, which the gateway takes on for it: ``task_mediation.py``).
- :class:`HeldInvoke`: a 2026-07-28 client's invoke on a handshake backend that may ask it
  for input (``held_invoke.py``).
- :class:`TaskMediation`: a handshake client's ``tools/call`` answered with a task, polled to
  its outcome (``task_mediation.py``).
- :class:`InputMediation`: an ``input_required`` answer to a handshake client, asked of it
  as server→client requests and retried (``mrtr.py``).
- :class:`SharedSubscription`: ``resources/(un)subscribe`` on a shared backend session,
  refcounted (``sharing.subscription``).
- :func:`send`: ``backend_session.call`` with the client as its ``owner`` (on a shared
  session, what the backend asks meanwhile comes to this client).

The steps after the pipeline (Layer 3's link rewriting, Layer 6's task adoption, the
2026-07-28 stamp) are the small functions at the end, which ``GatewaySession._forward`` runs.
What a step needs of the client comes through :class:`ExchangeClient` on ``Call.client``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

from hopline.binding import META_CLIENT_CAPABILITIES, PROMPTS_GET, RESOURCES_READ, TOOLS_CALL, Era
from hopline.jsonrpc import Message, notification
from hopline.layers.routing.apps import expose_read
from hopline.layers.routing.links import expose_links
from hopline.layers.session import held_invoke, sharing, task_mediation
from hopline.layers.session.sharing import SUBSCRIPTIONS
from hopline.layers.session.mrtr import mediate
from hopline.layers.session.task_calls import TASKS_EXTENSION
from hopline.layers.transport.loop import running_loop
from hopline.pipeline import Call, CallClient

if TYPE_CHECKING:
    from hopline.layers.discovery.backend import BackendSession
    from hopline.layers.routing.uris import UriMapper
    from hopline.layers.session.task_calls import TaskSettings

Step = Callable[[Call, "BackendSession", dict[str, Any]], Awaitable[Message]]


class ExchangeClient(CallClient, Protocol):
    """What the exchange steps need of the client beyond :class:`~hopline.pipeline.CallClient`:
    its backend sessions (``backend``; ``owns``: one of its own, not shared) and the task
    settings it runs under. A ``GatewaySession`` is one (and the ``owner`` of its calls)."""

    task_settings: TaskSettings

    async def backend(self, backend_id: str) -> BackendSession: ...

    def owns(self, session: BackendSession) -> bool: ...


def _client(call: Call) -> ExchangeClient:
    return call.client  # type: ignore[return-value]  # the session that made the call set itself


Chains = dict[tuple[bool, bool, bool], Step]


class Bind:
    """The first step, once per attempt: which backend session this attempt goes to, then the
    steps that apply to it: chosen by the client's era, the backend session's era and whether
    the call is a subscription (``chains``, built once), so a step that cannot apply costs
    nothing at all."""

    __slots__ = ("chains",)

    def __init__(self, chains: Chains) -> None:
        self.chains = chains

    async def __call__(self, call: Call) -> Message:
        session = await call.client.backend(call.backend)  # type: ignore[union-attr]  # (an ExchangeClient)
        ctx = call.context
        steps = self.chains[
            (ctx is not None and ctx.era is Era.MODERN, session.info.era is Era.MODERN, call.method in SUBSCRIPTIONS)
        ]
        return await steps(call, session, call.params)


class EraMediation:
    __slots__ = ("next",)

    def __init__(self, next: Step) -> None:
        self.next = next

    def __call__(self, call: Call, session: BackendSession, params: dict[str, Any]) -> Awaitable[Message]:
        client = _client(call)
        caps = client.client_capabilities
        if call.method == TOOLS_CALL and client.task_settings.mediate:
            caps = {**caps, "extensions": {**(caps.get("extensions") or {}), TASKS_EXTENSION: {}}}
        return self.next(
            call, session, {**params, "_meta": {**(params.get("_meta") or {}), META_CLIENT_CAPABILITIES: caps}}
        )


class HeldInvoke:
    __slots__ = ("next",)

    def __init__(self, next: Step) -> None:
        self.next = next

    def __call__(self, call: Call, session: BackendSession, params: dict[str, Any]) -> Awaitable[Message]:
        request = call.request
        if request is not None and held_invoke.applies(_client(call), session, request, params):
            return held_invoke.send(_client(call), request, call)
        return self.next(call, session, params)


class SharedSubscription:
    __slots__ = ("next",)

    def __init__(self, next: Step) -> None:
        self.next = next

    def __call__(self, call: Call, session: BackendSession, params: dict[str, Any]) -> Awaitable[Message]:
        if _client(call).owns(session):
            return self.next(call, session, params)
        return sharing.subscription(
            _client(call), session, call.method, params, lambda: self.next(call, session, params)
        )


class TaskMediation:
    __slots__ = ("next",)

    def __init__(self, next: Step) -> None:
        self.next = next

    def __call__(self, call: Call, session: BackendSession, params: dict[str, Any]) -> Awaitable[Message]:
        if call.method != TOOLS_CALL:
            return self.next(call, session, params)
        return self.mediated(call, session, params)

    async def mediated(self, call: Call, session: BackendSession, params: dict[str, Any]) -> Message:
        answer = await self.next(call, session, params)
        if task_mediation.is_task(answer) and _client(call).task_settings.mediate:
            return await settle(_client(call), session, call, answer)
        return answer


class InputMediation:
    __slots__ = ("next",)

    def __init__(self, next: Step) -> None:
        self.next = next

    async def __call__(self, call: Call, session: BackendSession, params: dict[str, Any]) -> Message:
        answer = await self.next(call, session, params)
        if not asks_input(answer):
            return answer
        return await mediate(
            _client(call).ask, lambda retry: self.next(call, session, retry), params, answer, backend=session.id
        )


def send(call: Call, session: BackendSession, params: dict[str, Any]) -> Awaitable[Message]:
    """The last step: the backend session's call, on behalf of (``owner``) the client."""
    client = _client(call)
    token = call.meta.get("progressToken")
    return session.call(
        call.method,
        params,
        on_progress=None if token is None else client.progress_relay(token),
        timeout=call.timeout,
        owner=client,
    )


def chain() -> Bind:
    """The steps bound to one another for each case, outermost first (built once: no allocation
    per call). A handshake client on a 2026-07-28 backend: era, task and input mediation; a
    2026-07-28 client on a handshake backend: held invoke; a subscription: shared subscriptions."""
    chains: Chains = {}
    for modern in (False, True):
        for modern_backend in (False, True):
            for subscription in (False, True):
                step: Step = send
                if subscription:
                    step = SharedSubscription(step)
                if not modern and modern_backend:
                    # input_required is a 2026-07-28 result: a handshake backend asks by server→client requests
                    step = EraMediation(TaskMediation(InputMediation(step)))
                if modern and not modern_backend:
                    step = HeldInvoke(step)
                chains[(modern, modern_backend, subscription)] = step
    return Bind(chains)


EXCHANGE = chain()


async def settle(client: ExchangeClient, session: BackendSession, call: Call, answer: Message) -> Message:
    """A handshake client's call answered with a task: polled to its outcome (task_mediation.py)."""
    token = call.meta.get("progressToken")

    async def backend_call(method: str, params: dict[str, Any], timeout: float | None) -> Message:
        return await session.call(method, params, timeout=timeout, owner=client)

    def progress(count: int, text: str | None) -> None:
        params: dict[str, Any] = {"progressToken": token, "progress": count}
        if text is not None:
            params["message"] = text
        client.notify(notification("notifications/progress", params))

    return await task_mediation.settle(
        backend_call,
        client.ask,
        answer,
        settings=client.task_settings,
        deadline=None if call.timeout is None else running_loop().time() + call.timeout,
        progress=None if token is None else progress,
        backend=session.id,
    )


def asks_input(answer: Message) -> bool:
    """Whether an answer asks for input (``mrtr.mediate`` has work to do): looked at here, so
    that the common answer costs no coroutine (bench/profile_call.py: 6 calls fewer per call)."""
    value = answer.body.get("result")
    return isinstance(value, dict) and value.get("resultType") == "input_required"


# -- after the pipeline ----------------------------------------------------------------------
LINKED = (TOOLS_CALL, PROMPTS_GET, RESOURCES_READ)


def expose(answer: Message, method: str, backend_id: str, uris: UriMapper) -> Message:
    """Layer 3: links the client can read back (and an App's contents under the URI it asked for)."""
    value = answer.body.get("result")
    linked = (
        expose_read(value, backend_id, uris)
        if method == RESOURCES_READ
        else expose_links(method, value, backend_id, uris)
    )
    return answer if linked is None else Message({**answer.body, "result": linked})
