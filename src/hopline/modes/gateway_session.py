"""One client's view of the gateway: the dual handshake, composed lists, routed invokes.

Method table (draft §6.3: LIST-METHODS fan out, INVOKE-METHODS go to exactly one
backend). Names and URIs are namespaced on the way out and resolved on the way
in; a name that resolves to no backend is ``-32602`` naming it. Results of invokes
are forwarded unchanged (§8: results are not namespaced). Backend ids, progress
tokens and server→client requests are mapped by the session layer
(``RpcPeer``/``ClientEnd``), so nothing crosses between clients.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import TYPE_CHECKING, Any

from hopline.binding import META_CLIENT_CAPABILITIES, Era, era_of_message
from hopline.jsonrpc import InvalidParams, Message, MethodNotFound, UnavailableError, notification, result
from hopline.layers.capability import compose
from hopline.layers.discovery.backend import BackendSession
from hopline.layers.pipeline import ANONYMOUS, Call, Item, Kind, Principal
from hopline.layers.routing.catalog import BackendNames, Catalog, Collision
from hopline.layers.routing.paging import page
from hopline.layers.session.client_end import ClientEnd
from hopline.layers.session.listen import LISTEN_KEYS, Listener
from hopline.layers.session.mrtr import mediate

from hopline.modes.gateway_tools import SessionToolHost

if TYPE_CHECKING:
    from hopline.modes.gateway import Gateway

log = logging.getLogger("hopline.gateway")

NAMED = frozenset({"tools/list", "prompts/list"})  # lists whose items have names to namespace
LIST_KEYS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"}
KINDS: dict[str, Kind] = {"tools/list": "tool", "prompts/list": "prompt", "resources/list": "resource", "resources/templates/list": "resourceTemplate"}
MISSING_KEY = "io.hopline/missing-backends"
CHANGE_SIGNALS = ("notifications/prompts/list_changed", "notifications/resources/list_changed", "notifications/tools/list_changed")


class GatewaySession:
    def __init__(self, gateway: Gateway, *, stateful: bool) -> None:
        self.gateway = gateway
        self.stateful = stateful
        self.end = ClientEnd(self.handle, on_notification=self._client_notification, on_close=self._closed, name="gateway-session")
        self.client_capabilities: dict[str, Any] = {}
        self.backends: dict[str, BackendSession | BaseException] | None = None
        self._owned: list[BackendSession] = []
        self._catalogs: dict[str, tuple[tuple, Catalog]] = {}
        self._connecting: asyncio.Future | None = None
        self._binding = secrets.token_hex(16) if stateful else "stateless"  # cursors are bound to it
        self._reconnecting: dict[str, asyncio.Task] = {}
        self.principal: Principal = ANONYMOUS  # who this client is (a session is bound to one principal)

    # -- backends ---------------------------------------------------------------------
    async def open_backend(self, backend_id: str) -> BackendSession:
        session = await self.gateway.connect(
            backend_id, era=Era.HANDSHAKE, client_capabilities=self.client_capabilities, on_request=self._server_request_from(backend_id), on_notification=self._backend_notification(backend_id)
        )
        session.on_changed = lambda s, method: self.backend_changed(s.id, method)
        session.on_closed = self._backend_lost
        self._owned.append(session)
        return session

    async def live_backends(self) -> dict[str, BackendSession | BaseException]:
        if self.backends is None:
            if self._connecting is None:
                self._connecting = asyncio.ensure_future(self.gateway.sessions_for(list(self.gateway.connectors), self))
            self.backends = await asyncio.shield(self._connecting)
            if self.stateful:
                for backend_id, found in self.backends.items():
                    if not isinstance(found, BackendSession):
                        self._schedule_reconnect(backend_id)
        return self.backends

    def _schedule_reconnect(self, backend_id: str) -> None:
        """Keep trying a backend that failed or went away; when it answers, its
        capabilities reappear and the client gets the CHANGE-SIGNAL (draft §6.7)."""
        if backend_id in self._reconnecting or self.end.is_closed():
            return
        task = asyncio.create_task(self._reconnect(backend_id), name=f"reconnect-{backend_id}")
        self._reconnecting[backend_id] = task
        task.add_done_callback(lambda _t, b=backend_id: self._reconnecting.pop(b, None))

    async def _reconnect(self, backend_id: str) -> None:
        delay = self.gateway.config.routing.retry_after
        while not self.end.is_closed() and backend_id in self.gateway.connectors:
            await asyncio.sleep(delay)
            try:
                (found,) = (await self.gateway.sessions_for([backend_id], self)).values()
            except Exception as exc:  # never let a reconnect loop die silently
                found = exc
            if isinstance(found, BackendSession):
                if self.backends is not None:
                    self.backends[backend_id] = found
                log.info("backend %s is back", backend_id)
                self.surface_changed()
                return
            delay = min(delay * 2, 60.0)

    def _backend_lost(self, backend: BackendSession) -> None:
        if self.backends is not None and self.backends.get(backend.id) is backend:
            self.backends[backend.id] = UnavailableError(f"backend {backend.id} went away", backend=backend.id)
            self.surface_changed()
            self._schedule_reconnect(backend.id)

    async def reloaded(self, gone: list[str], added: list[str]) -> None:
        """The configuration changed under this session: drop what went, connect what came."""
        if self.backends is None:
            return  # not connected yet: the next request sees the new configuration
        for backend_id in gone:
            found = self.backends.pop(backend_id, None)
            task = self._reconnecting.pop(backend_id, None)
            if task is not None:
                task.cancel()
            if isinstance(found, BackendSession) and found in self._owned:
                self._owned.remove(found)
                await found.aclose()
        if added:
            self.backends.update(await self.gateway.sessions_for(added, self))
            for backend_id in added:
                if not isinstance(self.backends.get(backend_id), BackendSession):
                    self._schedule_reconnect(backend_id)
        self.surface_changed()

    def surface_changed(self) -> None:
        self._catalogs.clear()
        if self.stateful:
            for signal in CHANGE_SIGNALS:
                self.end.notify(notification(signal))

    async def backend(self, backend_id: str) -> BackendSession:
        found = (await self.live_backends()).get(backend_id)
        if not isinstance(found, BackendSession) or found.is_closed():
            raise UnavailableError(f"backend {backend_id} is unavailable", backend=backend_id, reason="backend_unavailable")
        return found

    # -- dispatch -------------------------------------------------------------------------
    async def handle(self, message: Message, end: ClientEnd) -> Message | None:
        method = message.method or ""
        handler = _METHODS.get(method)
        if handler is None:
            raise MethodNotFound(f"Method not found: {method}")
        principal = getattr(message, "principal", None)
        if principal is not None:
            self.principal = principal
        return await handler(self, message)

    async def _initialize(self, message: Message) -> Message:
        params = message.params
        self.client_capabilities = params.get("capabilities") if isinstance(params.get("capabilities"), dict) else {}
        backends = await self.live_backends()
        g = self.gateway
        value = compose.initialize_result(g.infos(backends), requested=params.get("protocolVersion"), name=g.config.name, own_instructions=g.config.instructions, reverse=g.reverse)
        return result(message.id, value)

    async def _discover(self, message: Message) -> Message:
        g = self.gateway
        backends = await self.live_backends()
        return result(message.id, compose.discover_result(g.infos(backends), name=g.config.name, own_instructions=g.config.instructions, reverse=g.reverse))

    async def _ping(self, message: Message) -> Message:
        return result(message.id, {})

    async def _list(self, message: Message) -> Message:
        method = message.method or ""
        mode = self.gateway.pipeline.tool_mode
        if method == "tools/list" and mode is not None:
            shown = await mode.tools(self.tool_host())
            if shown is not None:  # progressive disclosure: the mode's own tools stand in for the catalogue
                return result(message.id, self._stamp({"tools": shown}, modern=self._modern(message)))
        items, missing = await self.visible_list(method)
        offset = 0
        cursor = message.params.get("cursor")
        binding = self._cursor_binding()
        if cursor is not None:
            state = self.gateway.cursors.decode(cursor, binding=binding) if isinstance(cursor, str) else {}
            offset = state.get("o", -1) if isinstance(state.get("o"), int) else -1
            if offset < 0:
                raise InvalidParams("Invalid cursor", request_id=message.id)
        chunk, next_offset = page(items, offset, self.gateway.config.routing.page_size)
        value: dict[str, Any] = {LIST_KEYS[method]: chunk}
        if next_offset is not None:
            value["nextCursor"] = self.gateway.cursors.encode({"o": next_offset}, binding=binding)
        if missing:
            value["_meta"] = {MISSING_KEY: missing}  # a partial answer says who is missing
        return result(message.id, self._stamp(value, modern=self._modern(message)))

    def _cursor_binding(self) -> str:
        """Cursors are bound to the session, or for stateless requests to the principal."""
        return self._binding if self.stateful else f"p:{self.principal.key!r}"

    async def _composed(self, method: str) -> None:
        await self._fan_out(method)

    async def visible_list(self, method: str) -> tuple[list[dict[str, Any]], list[str]]:
        """The composed list as this caller may see it: items of withdrawn backends
        (an open breaker) and items the surface layers hide are left out. Filtered
        once per (list, backends' versions, gate state, principal) and cached."""
        items, refs, missing, key = await self._fan_out(method)
        pipeline = self.gateway.pipeline
        if not pipeline.surface and not pipeline.gates:
            return items, missing
        g = self.gateway
        cache_key = (key, g.gate_version, self.principal.key)
        cached = g.visible_cache.get(cache_key)
        if cached is None:
            kind = KINDS[method]
            withdrawn = sorted({b for b, _ in refs if not pipeline.available(b)})
            keep = [item for item, (backend, name) in zip(items, refs) if backend not in withdrawn and pipeline.visible(self.principal, Item(kind, backend, name, item))]
            cached = (keep, withdrawn)
            g.visible_cache[cache_key] = cached
            while len(g.visible_cache) > 1024:
                g.visible_cache.pop(next(iter(g.visible_cache)))
        keep, withdrawn = cached
        return keep, sorted({*missing, *withdrawn}) if withdrawn else missing

    def _check_visible(self, kind: Kind, backend: str, name: str, definition: dict[str, Any] | None, shown: str, request_id: Any) -> None:
        """An item the caller may not see is answered exactly like one that does not exist."""
        pipeline = self.gateway.pipeline
        if pipeline.surface and not pipeline.visible(self.principal, Item(kind, backend, name, definition or {})):
            what = {"tool": "tool", "prompt": "prompt"}.get(kind, "resource")
            raise InvalidParams(f"Unknown {what}: {shown!r}", request_id=request_id)

    async def _fan_out(self, method: str) -> tuple[list[dict[str, Any]], list[tuple[str, str]], list[str], tuple]:
        """Every healthy backend's list, composed. A backend that fails or outlasts the
        list timeout is left out of this answer (fail-open) and named in ``missing``."""
        loop = asyncio.get_running_loop()
        live = {b: s for b, s in (await self.live_backends()).items() if isinstance(s, BackendSession) and not s.is_closed()}
        # A backend whose list just failed is not asked again (and waited for) on every request.
        backends = {b: s for b, s in live.items() if s.list_failed_until.get(method, 0.0) <= loop.time()}
        missing = sorted(set(self.gateway.connectors) - set(backends))
        limit = self.gateway.config.routing.list_timeout
        fetched = await asyncio.gather(*(asyncio.wait_for(s.list_all(method), limit) for s in backends.values()), return_exceptions=True)
        lists: dict[str, list[dict[str, Any]]] = {}
        for (backend_id, session), items in zip(backends.items(), fetched):
            if isinstance(items, BaseException):
                log.warning("backend %s: %s failed: %s", backend_id, method, "timed out" if isinstance(items, asyncio.TimeoutError) else items)
                session.list_failed_until[method] = loop.time() + self.gateway.config.routing.retry_after
                missing.append(backend_id)
                continue
            lists[backend_id] = items
        version_key = (method, tuple((b, backends[b].version) for b in sorted(lists)))
        if method in NAMED:
            catalog = self._catalog(method, lists, backends)
            return catalog.items, [(e.backend, e.original) for e in catalog.entries], sorted(missing), (version_key, catalog.version)
        key = LIST_KEYS[method]
        field = "uriTemplate" if key == "resourceTemplates" else "uri"
        expose = self.gateway.uris.expose_template if field == "uriTemplate" else self.gateway.uris.expose
        out: list[dict[str, Any]] = []
        refs: list[tuple[str, str]] = []
        for backend_id in sorted(lists):
            for item in lists[backend_id]:
                if isinstance(item.get(field), str):
                    out.append({**item, field: expose(backend_id, item[field])})
                    refs.append((backend_id, item[field]))
        return out, refs, sorted(missing), version_key

    def _catalog(self, method: str, lists: dict[str, list[dict[str, Any]]], backends: dict[str, BackendSession]) -> Catalog:
        """The composed names, built once per (list method, backend list versions) for the
        whole gateway: every session and stateless request with the same backends shares it."""
        key = (method, tuple((b, backends[b].version) for b in sorted(lists)))
        g = self.gateway
        catalog = g.catalogs.get(key)
        if catalog is not None:
            self._catalogs[method] = (key, catalog)
            return catalog
        options = {b: BackendNames(prefix=(cfg.prefix and not g.reverse), priority=cfg.priority, rename=cfg.rename) for b, cfg in g.config.backends.items()}
        catalog = Catalog.build(lists, namespace=g.namespace, strategy=Collision(g.config.routing.collision), options=options, order=list(g.config.backends))
        for line in catalog.diagnostics:
            log.info("catalog %s: %s", method, line)
        g.catalogs[key] = catalog
        while len(g.catalogs) > 256:
            g.catalogs.pop(next(iter(g.catalogs)))
        self._catalogs[method] = (key, catalog)
        return catalog

    async def _invoke_named(self, message: Message) -> Message:
        method = message.method or ""
        name = message.params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("params.name must be a string", request_id=message.id)
        mode = self.gateway.pipeline.tool_mode
        if method == "tools/call" and mode is not None:
            arguments = message.params.get("arguments")
            value = await mode.call(self.tool_host(message.meta), name, arguments if isinstance(arguments, dict) else {})
            if value is not None:
                return result(message.id, self._stamp(value, modern=self._modern(message)))
        return await self.invoke_named(message)

    async def invoke_named(self, message: Message) -> Message:
        """``tools/call`` or ``prompts/get`` on the catalogue (Standard mode's path)."""
        method = message.method or ""
        list_method = "tools/list" if method == "tools/call" else "prompts/list"
        name = message.params["name"]
        kind: Kind = "tool" if method == "tools/call" else "prompt"
        found = self._resolve_cached(list_method, name)
        if found is None:  # not in the surface this session last saw: compose it afresh
            await self._composed(list_method)
            catalog = self._catalogs[list_method][1]
            found = (catalog.resolve(name), catalog)
        entry, catalog = found
        if entry is None:
            raise InvalidParams(f"Unknown {kind}: {name!r}", request_id=message.id)
        definition = catalog.item(name)
        self._check_visible(kind, entry.backend, entry.original, definition, name, message.id)
        return await self._forward(message, entry.backend, {**message.params, "name": entry.original}, target=entry.original, exposed=name, definition=definition)

    def _progress_relay(self, token: Any):
        """Backend progress for one call, delivered under the client's own token (and type)."""

        def relay(m: Message) -> None:
            self.end.notify(notification("notifications/progress", {**m.params, "progressToken": token}))

        return relay

    def _resolve_cached(self, list_method: str, name: str) -> tuple[Any, Catalog] | None:
        """Resolve against the catalogue already composed, if it is still current for the
        backend that owns the name, so an invoke never waits on other backends' lists."""
        cached = self._catalogs.get(list_method)
        entry = cached[1].resolve(name) if cached is not None else None
        if entry is None or self.backends is None:
            return None
        owner = self.backends.get(entry.backend)
        versions = dict(cached[0][1])
        if isinstance(owner, BackendSession) and versions.get(entry.backend) == owner.version:
            return entry, cached[1]
        return None

    async def _invoke_uri(self, message: Message) -> Message:
        uri = message.params.get("uri")
        target = self.gateway.uris.resolve(uri) if isinstance(uri, str) else None
        if target is None or target[0] not in self.gateway.connectors:
            raise InvalidParams(f"Unknown resource: {uri!r}", request_id=message.id)
        self._check_visible("resource", target[0], target[1], {"uri": target[1]}, uri, message.id)  # type: ignore[arg-type]
        if message.method in ("resources/subscribe", "resources/unsubscribe"):
            caps = (await self.backend(target[0])).info.capabilities.get("resources") or {}
            if not (isinstance(caps, dict) and caps.get("subscribe")):
                raise MethodNotFound(f"backend {target[0]} does not support resource subscriptions", request_id=message.id)
        return await self._forward(message, target[0], {**message.params, "uri": target[1]}, target=target[1], exposed=uri)

    async def _complete(self, message: Message) -> Message:
        ref = message.params.get("ref") if isinstance(message.params.get("ref"), dict) else {}
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            await self._composed("prompts/list")
            catalog = self._catalogs["prompts/list"][1]
            entry = catalog.resolve(ref["name"])
            if entry is None:
                raise InvalidParams(f"Unknown prompt: {ref['name']!r}", request_id=message.id)
            self._check_visible("prompt", entry.backend, entry.original, catalog.item(ref["name"]), ref["name"], message.id)
            return await self._forward(message, entry.backend, {**message.params, "ref": {**ref, "name": entry.original}}, target=entry.original, exposed=ref["name"])
        target = self.gateway.uris.resolve(ref.get("uri")) if isinstance(ref.get("uri"), str) else None
        if target is None:
            raise InvalidParams("completion/complete: unknown ref", request_id=message.id)
        self._check_visible("resourceTemplate", target[0], target[1], {"uriTemplate": target[1]}, ref["uri"], message.id)
        return await self._forward(message, target[0], {**message.params, "ref": {**ref, "uri": target[1]}})

    async def _task(self, message: Message) -> Message:
        """Tasks extension (2026-07-28): a task id names its backend (``backend:id``)."""
        task_id = message.params.get("taskId")
        target = self.gateway.tasks.resolve(task_id) if isinstance(task_id, str) else None
        if target is None or target[0] not in self.gateway.connectors:
            raise InvalidParams(f"Unknown task: {task_id!r}", request_id=message.id)
        return await self._forward(message, target[0], {**message.params, "taskId": target[1]})

    async def _listen(self, message: Message) -> Message | None:
        """``subscriptions/listen`` (2026-07-28): acknowledge what the gateway will deliver,
        then stream CHANGE-SIGNALs until the client closes the stream (which cancels this)."""
        asked = message.params.get("notifications") if isinstance(message.params.get("notifications"), dict) else {}
        agreed = {key: True for key in LISTEN_KEYS if asked.get(key)}
        listener = Listener(self.end, message.id, agreed)
        listener.send("notifications/subscriptions/acknowledged", {"notifications": agreed})
        self.gateway.listeners.add(listener)
        try:
            await asyncio.Event().wait()  # until the client goes away
        finally:
            self.gateway.listeners.discard(listener)
        return None

    async def _set_level(self, message: Message) -> Message:
        sessions = [s for s in (await self.live_backends()).values() if isinstance(s, BackendSession) and s.supports("logging")]
        await asyncio.gather(*(s.call("logging/setLevel", message.params) for s in sessions), return_exceptions=True)
        return result(message.id, {})

    async def _forward(self, message: Message, backend_id: str, params: dict[str, Any], *, target: str | None = None, exposed: str | None = None, definition: dict[str, Any] | None = None) -> Message:
        session = await self.backend(backend_id)
        token = message.meta.get("progressToken")
        on_progress = None if token is None else self._progress_relay(token)
        modern = self._modern(message)
        if not modern and session.info.era is Era.MODERN:
            # A handshake client's capabilities travel per request to a 2026-07-28 backend
            # (truthfully: only what this client declared), so the backend may ask for input.
            params = {**params, "_meta": {**(params.get("_meta") or {}), META_CLIENT_CAPABILITIES: self.client_capabilities}}

        async def send(call: Call) -> Message:
            answer = await session.call(call.method, call.params, on_progress=on_progress, timeout=call.timeout)
            if not modern:
                answer = await mediate(self.end.ask, lambda retry: session.call(call.method, retry, on_progress=on_progress, timeout=call.timeout), call.params, answer, backend=session.id)
            return answer

        pipeline = self.gateway.pipeline
        method = message.method or ""
        if pipeline.calls:
            call = Call(method, backend_id, params, self.principal, target=target, exposed=exposed, session=self._binding, definition=definition, meta=message.meta)
            answer = await pipeline.run(call, send)
        else:
            answer = await send(Call(method, backend_id, params))
        value = answer.body.get("result")
        if isinstance(value, dict) and isinstance(value.get("taskId"), str):
            # A created task (or a task's status) names its task by the gateway's id.
            answer = Message({**answer.body, "result": {**value, "taskId": self.gateway.tasks.expose(backend_id, value["taskId"])}})
        if self._modern(message) and isinstance(answer.body.get("result"), dict):
            return Message({**answer.body, "result": self._stamp(answer.body["result"], modern=True, backend=session)})
        return answer

    def _modern(self, message: Message) -> bool:
        return not self.stateful or era_of_message(message.body) is Era.MODERN

    def _stamp(self, value: dict[str, Any], *, modern: bool, backend: BackendSession | None = None) -> dict[str, Any]:
        if not modern:
            return value
        g = self.gateway
        return compose.stamp(value, name=g.config.name, reverse=g.reverse, backend_id=backend.id if backend else None, is_list=any(k in value for k in LIST_KEYS.values()))

    # -- traffic the backends start -----------------------------------------------------------
    def _server_request_from(self, backend_id: str):
        """A backend's request to the client (sampling, elicitation, roots), through the
        call layers in the to_client direction, to the client whose session it is."""

        async def ask(call: Call) -> Message:
            return await self.end.ask(call.method, call.params)

        async def relay(message: Message) -> Message:
            pipeline = self.gateway.pipeline
            if not pipeline.calls:
                return await self.end.ask(message.method or "", message.body.get("params"))
            call = Call(message.method or "", backend_id, message.params, self.principal, direction="to_client", session=self._binding, meta=message.meta)
            return await pipeline.run(call, ask)

        return relay

    def tool_host(self, meta: dict[str, Any] | None = None) -> SessionToolHost:
        return SessionToolHost(self, meta or {})

    def _backend_notification(self, backend_id: str):
        def deliver(message: Message) -> None:
            method = message.method or ""
            if method in CHANGE_SIGNALS:
                return  # handled through on_changed, once per kind
            if method == "notifications/resources/updated" and isinstance(message.params.get("uri"), str):
                params = {**message.params, "uri": self.gateway.uris.expose(backend_id, message.params["uri"])}
                self.end.notify(notification(method, params))
                return
            self.end.notify(message)  # logs and unknown notifications pass through

        return deliver

    def backend_changed(self, backend_id: str, method: str) -> None:
        self._catalogs.clear()
        if self.stateful:
            self.end.notify(notification(method))

    async def _client_notification(self, message: Message, end: ClientEnd) -> None:
        if message.method == "notifications/roots/list_changed":
            for s in (self.backends or {}).values():
                if isinstance(s, BackendSession) and s in self._owned:
                    await s.peer.notify(message.method)

    async def _closed(self, end: ClientEnd) -> None:
        self.gateway.sessions.discard(self)
        for task in list(self._reconnecting.values()):
            task.cancel()
        owned, self._owned = self._owned, []
        await asyncio.gather(*(s.aclose() for s in owned), return_exceptions=True)


_METHODS = {
    "initialize": GatewaySession._initialize,
    "server/discover": GatewaySession._discover,
    "ping": GatewaySession._ping,
    "tools/list": GatewaySession._list,
    "prompts/list": GatewaySession._list,
    "resources/list": GatewaySession._list,
    "resources/templates/list": GatewaySession._list,
    "tools/call": GatewaySession._invoke_named,
    "prompts/get": GatewaySession._invoke_named,
    "resources/read": GatewaySession._invoke_uri,
    "resources/subscribe": GatewaySession._invoke_uri,
    "resources/unsubscribe": GatewaySession._invoke_uri,
    "completion/complete": GatewaySession._complete,
    "logging/setLevel": GatewaySession._set_level,
    "tasks/get": GatewaySession._task,
    "tasks/update": GatewaySession._task,
    "tasks/cancel": GatewaySession._task,
    "subscriptions/listen": GatewaySession._listen,
}
