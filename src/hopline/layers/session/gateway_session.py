"""One client's view of the gateway: the dual handshake, composed lists, routed invokes.

Method table (draft §6.3: LIST-METHODS fan out, INVOKE-METHODS go to exactly one
backend). Names and URIs are namespaced on the way out and resolved on the way
in; a name that resolves to no backend is ``-32602`` naming it. Results of invokes
are forwarded unchanged (§8: results are not namespaced). Backend ids, progress
tokens and server→client requests are mapped by the session layer
(``RpcPeer``/``ClientEnd``), so nothing crosses between clients; on a shared backend
session, calls name their client (``owner``) so that what the backend asks or reports
meanwhile reaches it (``sharing.py``).

What the session reaches beyond its own state, it reaches through the :class:`Hub` it
is given (``hub.py``): discovery's registry, the routing tables, the call pipeline.
Which handler serves a method is routing's table (``layers/routing/tables.py``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import orjson

from hopline.binding import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    PROMPTS_LIST,
    RESOURCES_READ,
    TOOLS_CALL,
    TOOLS_LIST,
    Era,
    era_of_message,
    era_of_version,
)
from hopline.jsonrpc import InvalidParams, Message, MethodNotFound, notification, result
from hopline.context import ANONYMOUS, Context, Principal
from hopline.layers.capability import compose
from hopline.layers.capability.lists import LIST_KEYS, View, tools_in_modes
from hopline.layers.capability.toolmodes.host import SessionToolHost
from hopline.layers.discovery.backend import BackendInfo, BackendSession
from hopline.layers.routing import router
from hopline.layers.routing.catalog import Catalog, Entry
from hopline.layers.routing.paging import page
from hopline.layers.routing.tables import METHODS, REMOVED_IN_MODERN
from hopline.layers.session import exchange, sharing, task_calls, task_push
from hopline.layers.session.client_end import ClientEnd
from hopline.layers.session.links import CHANGE_SIGNALS, BackendLinks, still_starting
from hopline.layers.session.listen import LISTEN_KEYS, Listener
from hopline.layers.policy.visibility import Hidden
from hopline.layers.session.task_calls import KnownTasks, TaskSettings
from hopline.pipeline import Call, Item, ToolPlan
from hopline.layers.transport.loop import running_loop

if TYPE_CHECKING:
    from hopline.layers.session.held import Held
    from hopline.layers.session.hub import Hub

log = logging.getLogger("hopline.gateway")

MISSING_KEY = "io.hopline/missing-backends"
_LIST_KEY_SET = frozenset(LIST_KEYS.values())  # a result carrying one of these is a list


class GatewaySession:
    def __init__(self, hub: Hub, *, stateful: bool, endpoint: str | None = None) -> None:
        self.hub = hub
        self.stateful = stateful
        self.endpoint = endpoint  # the path of the endpoint it came through, if not the main one (its tool plan)
        self.end = ClientEnd(
            self.handle, on_notification=self._client_notification, on_close=self._closed, name="gateway-session"
        )
        self.client_capabilities: dict[str, Any] = {}
        self.links = BackendLinks(self, hub)  # its backend sessions (links.py)
        # ``await session.backend(id)``: the backend session a call goes to (bound once: no delegating frame per call)
        self.backend: Callable[[str], Awaitable[BackendSession]] = self.links.backend
        self._catalogs: dict[str, tuple[tuple, Catalog]] = {}
        self._binding = secrets.token_hex(16) if stateful else "stateless"  # cursors are bound to it
        self.principal: Principal = ANONYMOUS  # who this client is (a session is bound to one principal)
        self.sharer: Principal | None = None  # the principal of its own it shares backends as (sharing.sharer)
        self.held_call: Held | None = None  # its call held on a shared session, which the backend's requests go to
        self.subscriptions: dict[str, set[str]] = {}  # backend → the URIs this client subscribed to there
        self.arrival: list[Any] = []  # the hop sequence the client's first request came with (federation)
        self._known_tasks: KnownTasks | None = None  # its tasks, for their notifications (made when needed)
        self.acting_for: str | None = None  # a request handed over by another replica: its client session
        self.protocol_version: str | None = None  # what initialize negotiated (telemetry)
        self.opened = time.monotonic()  # for mcp.server.session.duration

    # -- its backends (BackendLinks) ----------------------------------------------------------
    @property
    def backends(self) -> dict[str, BackendSession | BaseException] | None:
        return self.links.backends

    @backends.setter
    def backends(self, value: dict[str, BackendSession | BaseException] | None) -> None:
        self.links.backends = value

    def live_backends(self) -> Awaitable[dict[str, BackendSession | BaseException]]:
        return self.links.live_backends()

    def listable(self, method: str) -> Awaitable[dict[str, BackendSession]]:
        return self.links.listable(method)

    def starts_within(self, limit: float) -> Awaitable[None]:
        return self.links.starts_within(limit)

    def unlisted(self, list_method: str, kind: str, name: str, request_id: Any) -> Awaitable[tuple[Any, Any]]:
        return self.links.unlisted(list_method, kind, name, request_id)

    def reloaded(self, gone: list[str], added: list[str]) -> Awaitable[None]:
        return self.links.reloaded(gone, added)

    def surface_changed(self) -> None:
        """What this session can reach changed: its catalogues are stale (and a stateful client is told)."""
        self._catalogs.clear()
        if self.stateful:
            for signal in CHANGE_SIGNALS:
                self.end.notify(notification(signal))

    # -- dispatch -------------------------------------------------------------------------
    async def handle(self, message: Message, end: ClientEnd) -> Message | None:
        method = message.method or ""
        route = METHODS.get(method)
        if route is None and not self.hub.routes.pass_on:
            raise MethodNotFound(f"Method not found: {method}")
        if method in REMOVED_IN_MODERN and not self.stateful and era_of_message(message.body) is Era.MODERN:
            raise MethodNotFound(f"Method not found: {method} (not part of the 2026-07-28 protocol)")
        principal = getattr(message, "principal", None)
        if principal is not None:
            self.principal = principal
        meta = message.meta
        if not self.stateful and isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
            self.client_capabilities = meta[
                META_CLIENT_CAPABILITIES
            ]  # which shared session of a handshake-era backend it gets
        chain: list[Any] = []
        if meta:  # a request that has been here before is refused, lists and handshakes included
            chain = self.hub.registry.arrived(meta)
            if chain and not self.arrival:
                self.arrival = chain  # carried on into this session's handshakes and list fetches
        return await _HANDLERS[route](self, message, self.context(message, chain, meta))

    def named(self, name: str) -> None:
        """Bind this session's cursors and tasks to ``name`` (the same on every replica)."""
        if self.stateful:
            self._binding = name

    def context(self, message: Message, hops: list[Any] | None = None, meta: dict[str, Any] | None = None) -> Context:
        """The exchange's context, made once as it arrives and passed down explicitly: who,
        which session, which era, its one deadline (the listener's, ``message.deadline``;
        without one, ``listen.request_timeout`` from now).
        ``meta``: the message's ``_meta`` where the caller has it already (``handle``); the era
        is read from it as ``era_of_message`` would (bench/profile_call.py: 7 calls fewer)."""
        deadline = message.deadline  # made by the listener as the request arrived
        if deadline is None and (timeout := self.hub.settings.listen.request_timeout) is not None:
            deadline = running_loop().time() + timeout
        if meta is None:
            meta = message.meta
        version = meta.get(META_PROTOCOL_VERSION) if meta else None
        if not self.stateful:
            era = Era.MODERN
        else:
            era = Era.HANDSHAKE if version is None else era_of_version(version)
        return Context(
            self.principal,
            self._binding if self.stateful else self.acting_for,
            era,
            deadline,
            hops if hops is not None else [],
            meta.get("traceparent") if meta else None,
            message.id,
            version if isinstance(version, str) else self.protocol_version,
        )

    # -- lists (the gateway's Catalogue, layers/capability/lists.py) ---------------------------
    def _cursor_binding(self) -> str:
        """Cursors are bound to the session, or for stateless requests to the principal."""
        return self._binding if self.stateful else f"p:{self.principal.key!r}"

    async def composed(self, list_method: str) -> Catalog:
        """This caller's catalogue of ``list_method`` (tools, prompts), composed afresh."""
        await self.hub.catalogue.fan_out(self, list_method, self._catalogs)
        return self._catalogs[list_method][1]

    catalog = composed  # (links.py: a name not in the last catalogue)

    def cached(self, list_method: str, name: str) -> tuple[Entry, Catalog] | None:
        """``name`` in the catalogue this caller last composed, while its backend's list is current."""
        return self.hub.catalogue.resolve_cached(
            self._catalogs, list_method, name, self.backends, stateful=self.stateful
        )

    async def visible_list(self, method: str) -> tuple[list[dict[str, Any]], list[str]]:
        """The composed list as this caller may see it (``Catalogue.view``)."""
        items, _backends, missing = await self.visible_entries(method)
        return items, missing

    async def visible_entries(self, method: str) -> View:
        """:meth:`visible_list` with the backend of each item (parallel to the items)."""
        catalogue = self.hub.catalogue
        return catalogue.view(method, self.principal, await catalogue.fan_out(self, method, self._catalogs))

    async def _pass_on(self, message: Message, ctx: Context) -> Message:
        """Sidecar mode: a method the gateway does not mediate goes to the one backend,
        through the pipeline (policy sees ``mcp.method``), and its answer comes back as is."""
        (backend_id,) = self.hub.registry.connectors
        return await self._forward(
            message, ctx, backend_id, message.params, target=message.method
        )  # the policy's item: the method

    async def _initialize(self, message: Message, ctx: Context) -> Message:
        params = message.params
        if not isinstance(params.get("protocolVersion"), str):  # the SDK's answer too (InitializeRequestParams)
            raise InvalidParams("initialize needs params.protocolVersion, a string", request_id=message.id)
        if not isinstance(params.get("capabilities", {}), dict):
            raise InvalidParams("initialize's params.capabilities must be an object", request_id=message.id)
        self.client_capabilities = params.get("capabilities") or {}  # an object or absent (checked above)
        backends = await self.links.handshake_backends()  # not held by one still starting: it joins later (links.py)
        g = self.hub
        value = compose.initialize_result(
            infos(backends),
            requested=params.get("protocolVersion"),
            name=g.settings.name,
            own_instructions=g.settings.instructions,
            reverse=g.routes.reverse,
            starting=any(still_starting(s) for s in backends.values()),
        )
        self.protocol_version = value.get("protocolVersion")
        return result(message.id, value)

    async def _discover(self, message: Message, ctx: Context) -> Message:
        g = self.hub
        backends = await self.live_backends()
        return result(
            message.id,
            compose.discover_result(
                infos(backends),
                name=g.settings.name,
                own_instructions=g.settings.instructions,
                reverse=g.routes.reverse,
            ),
        )

    async def _ping(self, message: Message, ctx: Context) -> Message:
        return result(message.id, {})

    async def _list(self, message: Message, ctx: Context) -> Message:
        method = message.method or ""
        plan = self.tool_plan
        if method == TOOLS_LIST and plan.modes:
            items, missing = await self.tools_in_modes(plan)
        else:
            items, missing = await self.visible_list(method)
        offset = 0
        cursor = message.params.get("cursor")
        binding = self._cursor_binding()
        if cursor is not None:
            state = self.hub.routes.cursors.decode(cursor, binding=binding) if isinstance(cursor, str) else {}
            offset = state.get("o", -1) if isinstance(state.get("o"), int) else -1
            if offset < 0:
                raise InvalidParams("Invalid cursor", request_id=message.id)
        chunk, next_offset = page(items, offset, self.hub.settings.routing.page_size)
        value: dict[str, Any] = {LIST_KEYS[method]: chunk}
        if next_offset is not None:
            value["nextCursor"] = self.hub.routes.cursors.encode({"o": next_offset}, binding=binding)
        if missing:
            value["_meta"] = {MISSING_KEY: missing}  # a partial answer says who is missing
        return result(message.id, self._stamp(value, modern=ctx.era is Era.MODERN))

    async def _invoke_named(self, message: Message, ctx: Context) -> Message:
        method = message.method or ""
        name = message.params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("params.name must be a string", request_id=message.id)
        plan = self.tool_plan
        if method == TOOLS_CALL and plan.modes:
            arguments = message.params.get("arguments")
            for mode_name, mode in plan.active:
                value = await mode.call(
                    self.tool_host(message.meta, mode=mode_name, context=ctx),
                    name,
                    arguments if isinstance(arguments, dict) else {},
                )
                if value is not None:
                    return result(message.id, self._stamp(value, modern=ctx.era is Era.MODERN))
        return await self.invoke_named(message, ctx)

    @property
    def known_tasks(self) -> KnownTasks:
        if self._known_tasks is None:
            self._known_tasks = KnownTasks(self.hub.settings.tasks.max_per_caller)
        return self._known_tasks

    @property
    def tool_plan(self) -> ToolPlan:
        """How this session's endpoint shows tools (Layer 7), as configured now."""
        return self.hub.pipeline.plan_for(self.endpoint)

    async def tools_in_modes(self, plan: ToolPlan) -> tuple[list[dict[str, Any]], list[str]]:
        """``tools/list`` under a plan with Search/Code modes: each mode's own tools stand
        in for its backends' tools; backends in Standard mode are listed in full."""
        return await tools_in_modes(
            plan, lambda: self.visible_entries(TOOLS_LIST), lambda mode: self.tool_host(mode=mode)
        )

    async def invoke_named(self, message: Message, ctx: Context) -> Message:
        """``tools/call`` or ``prompts/get`` on the catalogue (Standard mode's path)."""
        name = message.params["name"]
        if self.backends is None and not self.stateful:
            await (
                self.live_backends()
            )  # (no task when every shared session is up) so the latest catalogue can be checked
        route = await router.by_name(message.method or "", name, message.id, self)  # resolved once (routing/router.py)
        try:  # an item the caller may not see is refused as unknown by the visibility layer (policy/visibility.py)
            return await self._forward(
                message,
                ctx,
                route.backend,
                {**message.params, "name": route.target},
                target=route.target,
                exposed=name,
                definition=route.definition,
            )
        except Hidden:
            if not self.hub.routes.reverse:
                raise
            return await self._as_unknown(message, ctx, route.backend, name)  # hidden: as the server answers unknown

    async def _as_unknown(self, message: Message, ctx: Context, backend_id: str, name: str) -> Message:
        """Reverse and Sidecar mode: a name the policy hides is answered as the server answers
        a name it does not know (no oracle): the backend is asked for a name nobody has, and
        its answer names the one the client asked for. Never through the call layers (the
        refusal was audited); nothing by that name runs."""
        probe = f"hopline-unknown-{secrets.token_hex(12)}"
        session = await self.backend(backend_id)
        params = {**message.params, "name": probe}
        answer = await session.call(
            message.method or "", params, timeout=self.hub.registry.timeout_for(backend_id), owner=self
        )
        body = orjson.loads(orjson.dumps(answer.body).replace(probe.encode(), orjson.dumps(name)[1:-1]))
        value = body.get("result")
        if ctx.era is Era.MODERN and isinstance(value, dict):
            body["result"] = self._stamp(value, modern=True, backend_id=backend_id)
        return Message(body)

    def progress_relay(self, token: Any):
        """Backend progress for one call, delivered under the client's own token (and type)."""

        def relay(m: Message) -> None:
            self.end.notify(notification("notifications/progress", {**m.params, "progressToken": token}))

        return relay

    async def _invoke_uri(self, message: Message, ctx: Context) -> Message:
        uri = message.params.get("uri")
        route = router.by_uri(uri, self.hub.routes.uris, self.hub.registry.connectors, message.id)
        backend, original = route.backend, route.target  # resolved once (routing/router.py)
        # A hidden resource is refused as unknown by the visibility layer (policy/visibility.py), so its
        # backend's capabilities are not asked first (no oracle: its answer is the unknown one).
        if message.method in ("resources/subscribe", "resources/unsubscribe") and self.hub.pipeline.visible(
            self.principal, Item(route.kind, backend, original, {"uri": original})
        ):
            caps = (await self.backend(backend)).info.capabilities.get("resources") or {}
            if not (isinstance(caps, dict) and caps.get("subscribe")):
                raise MethodNotFound(
                    f"backend {backend} does not support resource subscriptions", request_id=message.id
                )
        answer = await self._forward(
            message, ctx, backend, {**message.params, "uri": original}, target=original, exposed=uri
        )
        if message.method != RESOURCES_READ and "result" in answer.body:  # kept, to re-subscribe after a reconnect
            held = self.subscriptions.setdefault(backend, set())
            (held.add if message.method == "resources/subscribe" else held.discard)(original)
        return answer

    async def _complete(self, message: Message, ctx: Context) -> Message:
        ref = message.params.get("ref") if isinstance(message.params.get("ref"), dict) else {}
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            catalog = await self.composed(PROMPTS_LIST)
            entry = catalog.resolve(ref["name"])
            if entry is None:
                raise InvalidParams(f"Unknown prompt: {ref['name']!r}", request_id=message.id)
            return await self._forward(  # a hidden prompt is refused as unknown by the visibility layer
                message,
                ctx,
                entry.backend,
                {**message.params, "ref": {**ref, "name": entry.original}},
                target=entry.original,
                exposed=ref["name"],
                definition=catalog.item(ref["name"]),
            )
        target = self.hub.routes.uris.resolve(ref.get("uri")) if isinstance(ref.get("uri"), str) else None
        if target is None:
            raise InvalidParams("completion/complete: unknown ref", request_id=message.id)
        shown, ref = ref["uri"], {**ref, "uri": target[1]}  # a hidden template is refused as unknown (visibility layer)
        return await self._forward(message, ctx, target[0], {**message.params, "ref": ref}, exposed=shown)

    async def _task(self, message: Message, ctx: Context) -> Message:
        """``tasks/*`` to the backend holding the caller's own task (``task_calls.py``)."""
        return await task_calls.route(self, message, ctx)

    async def _task_list(self, message: Message, ctx: Context) -> Message:
        """``tasks/list`` (2025-11-25): the caller's own tasks, answered by the gateway."""
        return await task_calls.listing(self, message, ctx)

    async def _listen(self, message: Message, ctx: Context) -> Message | None:
        """``subscriptions/listen`` (2026-07-28): acknowledge what the gateway will deliver,
        then stream CHANGE-SIGNALs, the asked-for resource updates and the asked-for tasks'
        status until the client closes the stream (which cancels this). A resource URI is
        honoured when it routes to a backend that supports subscriptions and the caller may
        see it; a task id when it is the caller's own task (``task_push.py``)."""
        asked = message.params.get("notifications") if isinstance(message.params.get("notifications"), dict) else {}
        agreed: dict[str, Any] = {key: True for key in LISTEN_KEYS if asked.get(key)}
        listener = Listener(self.end, message.id, agreed)
        targets = await self._subscribable(asked.get("resourceSubscriptions"))
        if targets:
            agreed["resourceSubscriptions"] = [exposed for exposed, _ in targets]
        wait = self.hub.settings.routing.list_timeout
        push = self.hub.task_push
        routes: list[Any] = []
        pushing = asyncio.ensure_future(push.subscribe(self, ctx, listener, asked.get("taskIds"), wait=wait))
        try:
            await self.hub.backend_listens.subscribe(listener, [target for _, target in targets], wait=wait)
            routes = await pushing
            if "taskIds" in asked:
                agreed["taskIds"] = task_push.acknowledged(routes, asked["taskIds"])
            listener.send("notifications/subscriptions/acknowledged", {"notifications": agreed})
            push.start(routes)
            self.hub.listeners.add(listener)
            await asyncio.Event().wait()  # until the client goes away
        finally:
            if not pushing.done():
                pushing.cancel()  # it closes what it opened
            elif not routes and not pushing.cancelled() and pushing.exception() is None:
                routes = pushing.result()
            push.unsubscribe(routes)  # first: nothing more of its tasks is relayed
            self.hub.listeners.discard(listener)
            self.hub.backend_listens.unsubscribe(listener)
        return None

    async def _subscribable(self, uris: Any) -> list[tuple[str, tuple[str, str]]]:
        if not isinstance(uris, list):
            return []
        backends = await self.live_backends()
        pipeline = self.hub.pipeline
        out: list[tuple[str, tuple[str, str]]] = []
        for uri in dict.fromkeys(u for u in uris if isinstance(u, str)):
            target = self.hub.routes.uris.resolve(uri)
            session = backends.get(target[0]) if target is not None else None
            if target is None or not isinstance(session, BackendSession):
                continue
            caps = session.info.capabilities.get("resources")
            if not (isinstance(caps, dict) and caps.get("subscribe")):
                continue
            if pipeline.surface and not pipeline.visible(
                self.principal, Item("resource", target[0], target[1], {"uri": target[1]})
            ):
                continue
            out.append((uri, target))
        return out

    async def _set_level(self, message: Message, ctx: Context) -> Message:
        sessions = [
            s for s in (await self.live_backends()).values() if isinstance(s, BackendSession) and s.supports("logging")
        ]
        shared = sharing.shared_of(self)
        sets = (
            sharing.set_level(self, s, message.params) if s in shared else s.call("logging/setLevel", message.params)
            for s in sessions
        )
        await asyncio.gather(*sets, return_exceptions=True)
        return result(message.id, {})

    async def _forward(
        self,
        message: Message,
        ctx: Context,
        backend_id: str,
        params: dict[str, Any],
        *,
        target: str | None = None,
        exposed: str | None = None,
        definition: dict[str, Any] | None = None,
    ) -> Message:
        """The routed invoke through the call layers, ending in the exchange with the backend
        session (``exchange.py``); then its links exposed, its task adopted, its stamp."""
        method = message.method or ""
        # The exchange's one deadline, no later than the backend's own timeout from now.
        timeout = self.hub.registry.timeout_for(backend_id)
        left = ctx.remaining(running_loop().time())
        if left is not None and (timeout is None or left < timeout):
            timeout = left
        call = Call(
            method,
            backend_id,
            params,
            ctx.principal,
            target=target,
            exposed=exposed,
            session=self._binding,
            definition=definition,
            meta=message.meta,
            timeout=timeout,
            context=ctx,
            client=self,
            request=message,
        )
        answer = await self.hub.pipeline.run(call, exchange.EXCHANGE)
        if method in exchange.LINKED and not self.hub.routes.reverse:
            answer = exchange.expose(answer, method, backend_id, self.hub.routes.uris)
        if method == TOOLS_CALL and task_calls.created(answer.body.get("result")) is not None:
            # A created task is bound to its caller, under an id the gateway owns.
            answer = await task_calls.adopt(self, ctx, backend_id, target or "", answer)
        if ctx.era is Era.MODERN and isinstance(answer.body.get("result"), dict):
            return Message(
                {**answer.body, "result": self._stamp(answer.body["result"], modern=True, backend_id=backend_id)}
            )
        return answer

    # -- what the exchange's call layers reach of this client (exchange.ExchangeClient) ----------
    async def ask(self, method: str, params: Any) -> Message:
        return await self.end.ask(method, params)

    def notify(self, message: Message) -> None:
        self.end.notify(message)

    def owns(self, session: BackendSession) -> bool:
        return session in self.links.owned

    @property
    def task_settings(self) -> TaskSettings:
        return self.hub.settings.tasks

    def _stamp(self, value: dict[str, Any], *, modern: bool, backend_id: str | None = None) -> dict[str, Any]:
        if not modern:
            return value
        g = self.hub
        return compose.stamp(
            value,
            name=g.settings.name,
            reverse=g.routes.reverse,
            backend_id=backend_id,
            is_list=not _LIST_KEY_SET.isdisjoint(value),  # one call (a generator was five per call)
        )

    # -- traffic the backends start -----------------------------------------------------------
    def _server_request_from(self, backend_id: str):
        """A backend's request to the client (sampling, elicitation, roots), through the
        call layers in the to_client direction, to the client whose session it is."""

        async def ask(call: Call) -> Message:
            return await self.end.ask(call.method, call.params)

        async def relay(message: Message) -> Message:
            pipeline = self.hub.pipeline
            if not pipeline.calls:
                return await self.end.ask(message.method or "", message.body.get("params"))
            call = Call(
                message.method or "",
                backend_id,
                message.params,
                self.principal,
                direction="to_client",
                session=self._binding,
                meta=message.meta,
            )
            return await pipeline.run(call, ask)

        return relay

    def tool_host(
        self, meta: dict[str, Any] | None = None, *, mode: str | None = None, context: Context | None = None
    ) -> SessionToolHost:
        """The host a tool mode runs on for this caller (``mode``: only that mode's backends).
        ``context``: the exchange whose tool runs, so its inner calls share its deadline."""
        return SessionToolHost(self, meta or {}, plan=self.tool_plan, mode=mode, context=context)

    def _backend_notification(self, backend_id: str):
        def deliver(message: Message) -> None:
            method = message.method or ""
            if method in CHANGE_SIGNALS:
                return  # handled through on_changed, once per kind
            found = self.backends.get(backend_id) if self.backends is not None else None
            if self.hub.task_push.deliver(backend_id, found if isinstance(found, BackendSession) else None, message):
                return  # a task's push update: to the listen that asked, and only there
            if task_calls.is_task_message(message):  # only to this session, and only for its own task
                related = task_calls.relate(self, backend_id, message)
                if related is not None:
                    self.end.notify(related)
                return
            if method == "notifications/resources/updated" and isinstance(message.params.get("uri"), str):
                params = {**message.params, "uri": self.hub.routes.uris.expose(backend_id, message.params["uri"])}
                self.end.notify(notification(method, params))
                return
            self.end.notify(message)  # logs and unknown notifications pass through

        return deliver

    def backend_changed(self, backend_id: str, method: str) -> None:
        self._catalogs.clear()
        if self.stateful:
            self.end.notify(notification(method))

    async def _client_notification(self, message: Message, end: ClientEnd) -> None:
        # Sidecar mode mediates every message: the client's own notifications reach its backend session too.
        if (
            message.method == "notifications/roots/list_changed"
            or self.hub.routes.pass_on
            and message.method != "notifications/initialized"
        ):
            for s in (self.backends or {}).values():
                if isinstance(s, BackendSession) and s in self.links.owned:
                    await s.peer.notify(message.method or "", message.params or None)

    async def _closed(self, end: ClientEnd) -> None:
        self.hub.sessions.discard(self)
        if self.sharer is not None:
            self.hub.sharing.forget(self)  # the backend sessions of a principal that was this session alone
        if self.stateful:
            self.hub.observability.session_ended(time.monotonic() - self.opened, self.protocol_version)
        links = self.links
        if not self.stateful and not links.owned and not links.tasks:
            return  # a 2026-07-28 exchange holds nothing of its own (sharing.release would return at once)
        await links.cancel_tasks()  # its backends' starts and reconnects end with it
        await sharing.release(self)  # its subscriptions and log level on shared sessions
        owned, links.owned = links.owned, []
        await asyncio.gather(*(s.aclose() for s in owned), return_exceptions=True)


def infos(sessions: dict[str, BackendSession | BaseException]) -> dict[str, BackendInfo]:
    return {b: s.info for b, s in sessions.items() if isinstance(s, BackendSession)}


_HANDLERS = {
    "initialize": GatewaySession._initialize,
    "discover": GatewaySession._discover,
    "ping": GatewaySession._ping,
    "list": GatewaySession._list,
    "by_name": GatewaySession._invoke_named,
    "by_uri": GatewaySession._invoke_uri,
    "complete": GatewaySession._complete,
    "set_level": GatewaySession._set_level,
    "task": GatewaySession._task,
    "task_list": GatewaySession._task_list,
    "listen": GatewaySession._listen,
    None: GatewaySession._pass_on,  # Sidecar: not in the table, passed on mediated
}
