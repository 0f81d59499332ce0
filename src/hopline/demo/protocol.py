"""Both MCP eras on one stdio connection, served the way the official SDK does.

Contract (reference/mcp-wire.md §3, §5 "server/discover" and "stdio (2026)")
- The first *request* locks the connection's era, once. It is modern when it is
  not ``initialize`` and its ``params._meta`` carries
  ``io.modelcontextprotocol/protocolVersion``; the key alone decides, as in the
  SDK, so a half-built envelope still gets the modern -32602/-32022 answers.
  Anything else (``initialize``, a bare ``tools/list``) locks the handshake era.
  Notifications never lock it.
- Handshake era: ``initialize`` echoes a version from
  ``binding.HANDSHAKE_VERSIONS`` or counter-offers the latest; ``ping``,
  ``logging/setLevel`` and the list/call/read/get methods work; a later request
  carrying the 2026 envelope gets -32600.
- Modern era: ``initialize`` gets -32022 with ``data {supported, requested}``.
  Every other request climbs the envelope ladder first: no ``_meta``, a missing
  ``protocolVersion``/``clientCapabilities`` or a non-string version → -32602;
  a version not in ``binding.MODERN_VERSIONS`` → -32022; then an unknown method
  (``ping`` and ``logging/setLevel`` included) → -32601. Results carry
  ``resultType: "complete"`` and ``_meta`` serverInfo; cacheable ones carry
  ``ttlMs`` and ``cacheScope``.
- :meth:`DemoProtocol.admit` is synchronous and runs in arrival order, so the
  lock, ``initialize`` and ``logging/setLevel`` take effect before any later
  request starts even though requests then run concurrently.

No I/O here: :mod:`hopline.demo.server` reads lines, calls :meth:`admit` and
:meth:`call`, and writes what they return.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

from hopline import __version__
from hopline.binding import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    Era,
)
from hopline.demo.catalog import DEMO, Catalog, text
from hopline.demo.context import LOG_LEVELS, Outbox, Request, ToolError
from hopline.jsonrpc import InvalidParams, InvalidRequest, MethodNotFound, ProtocolError, UnsupportedProtocolVersion

log = logging.getLogger("hopline.demo")

SERVER_INFO = {"name": "hopline-demo", "title": "hopline demo server", "version": __version__}
INSTRUCTIONS = "hopline's built-in demo server. Try the tools echo, add, countdown and whoami; read demo://readme."
CACHEABLE = frozenset(
    {"server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read"}
)
_CAPABILITIES = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": False, "listChanged": False},
    "prompts": {"listChanged": False},
    "logging": {},
}


class ResourceNotFound(ProtocolError):
    """Handshake era only; 2026-07-28 answers an unknown URI with -32602."""

    code = -32002


class DemoProtocol:
    """The per-connection state: the era lock and what ``initialize`` told us."""

    def __init__(
        self,
        catalog: Catalog = DEMO,
        *,
        server_info: dict[str, Any] = SERVER_INFO,
        instructions: str = INSTRUCTIONS,
        ttl_ms: int = 60_000,
        cache_scope: str = "public",
    ) -> None:
        self.catalog = catalog
        self.server_info = server_info
        self.instructions = instructions
        self.ttl_ms, self.cache_scope = ttl_ms, cache_scope
        # Per instance, so a test server built on this one can add methods and capabilities.
        self.methods: dict[Era, dict[str, str]] = {era: dict(table) for era, table in METHODS.items()}
        self.capabilities: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in _CAPABILITIES.items()}
        self.era: Era | None = None
        self.version = LATEST_HANDSHAKE  # handshake era: what initialize agreed
        self.client_info: dict[str, Any] | None = None
        self.client_capabilities: dict[str, Any] | None = None
        self.log_threshold: str | None = None  # handshake era: set by logging/setLevel
        self.initialized = False

    # -- admission: synchronous, in arrival order -----------------------------------
    def admit(self, body: dict[str, Any], outbox: Outbox) -> Request | dict[str, Any]:
        """Lock the era, check the envelope, pick the handler.

        Returns a :class:`Request` to run with :meth:`call`, or a finished result
        for the methods that must take effect inline. Raises a ``ProtocolError``.
        """
        method, params = body["method"], body.get("params") or {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        enveloped = META_PROTOCOL_VERSION in meta
        if self.era is None:
            self.era = Era.MODERN if enveloped and method != "initialize" else Era.HANDSHAKE
            log.info("era locked to %s by %r", self.era.value, method)
        if self.era is Era.HANDSHAKE:
            if enveloped and method != "initialize":
                raise InvalidRequest(
                    "this connection serves the handshake protocol era; "
                    "requests carrying the 2026-07-28 envelope are not accepted on it"
                )
            if method == "initialize":
                return self._initialize(params)
            if method == "logging/setLevel":
                return self._set_level(params)
            req = Request(
                body["id"],
                method,
                params,
                Era.HANDSHAKE,
                self.version,
                outbox,
                self.client_info,
                self.client_capabilities,
                self.log_threshold,
                meta,
            )
        else:
            if method == "initialize":
                requested = params.get("protocolVersion")
                raise UnsupportedProtocolVersion(
                    "connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted",
                    data={
                        "supported": list(MODERN_VERSIONS),
                        **({"requested": requested} if isinstance(requested, str) else {}),
                    },
                )
            req = self._modern_request(body, params, meta, outbox)
        if method not in self.methods[req.era]:
            raise MethodNotFound(f"Method not found: {method}")
        return req

    def _modern_request(
        self, body: dict[str, Any], params: dict[str, Any], meta: dict[str, Any], outbox: Outbox
    ) -> Request:
        if not isinstance(params.get("_meta"), dict):
            raise InvalidParams(
                f"params._meta must be an object carrying the required {META_PROTOCOL_VERSION!r} "
                f"and {META_CLIENT_CAPABILITIES!r} envelope keys"
            )
        missing = [k for k in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if k not in meta]
        if missing:
            raise InvalidParams(f"params._meta is missing the required envelope key(s): {', '.join(missing)}")
        version, caps, info = meta[META_PROTOCOL_VERSION], meta[META_CLIENT_CAPABILITIES], meta.get(META_CLIENT_INFO)
        if not isinstance(version, str) or not isinstance(caps, dict):
            raise InvalidParams("the envelope's protocolVersion must be a string and clientCapabilities an object")
        if version not in MODERN_VERSIONS:
            raise UnsupportedProtocolVersion(
                f"unsupported protocol version {version!r}",
                data={"supported": list(MODERN_VERSIONS), "requested": version},
            )
        level = meta.get("io.modelcontextprotocol/logLevel")
        return Request(
            body["id"],
            body["method"],
            params,
            Era.MODERN,
            version,
            outbox,
            info if isinstance(info, dict) else None,
            caps,
            level if level in LOG_LEVELS else None,
            meta,
        )

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise InvalidParams("initialize needs params.protocolVersion (a string)")
        self.version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        info, caps = params.get("clientInfo"), params.get("capabilities")
        self.client_info = info if isinstance(info, dict) else None
        self.client_capabilities = caps if isinstance(caps, dict) else None
        log.info("initialize: client %s asked for %s, agreed %s", self.client_info, requested, self.version)
        return {
            "protocolVersion": self.version,
            "capabilities": self.capabilities,
            "serverInfo": self.server_info,
            "instructions": self.instructions,
        }

    def _set_level(self, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"level must be one of {', '.join(LOG_LEVELS)}")
        self.log_threshold = level
        return {}

    def notify(self, body: dict[str, Any]) -> None:
        """Client notifications other than ``notifications/cancelled`` (the server owns that)."""
        if body["method"] == "notifications/initialized":
            self.initialized = True

    # -- running a request: concurrent ----------------------------------------------
    async def call(self, req: Request) -> dict[str, Any]:
        handler: Callable[[Request], Awaitable[dict[str, Any]]] = getattr(self, self.methods[req.era][req.method])
        result = await handler(req)
        if req.era is Era.MODERN:
            result = {"resultType": "complete", **result}
            if req.method in CACHEABLE:
                result.setdefault("ttlMs", self.ttl_ms)
                result.setdefault("cacheScope", self.cache_scope)
            result["_meta"] = {**result.get("_meta", {}), META_SERVER_INFO: self.server_info}
        return result

    async def _ping(self, req: Request) -> dict[str, Any]:
        return {}

    async def _discover(self, req: Request) -> dict[str, Any]:
        return {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": self.capabilities,
            "instructions": self.instructions,
        }

    async def _tools_list(self, req: Request) -> dict[str, Any]:
        _no_cursor(req)
        return {"tools": [t.describe() for t in self.catalog.tools.values()]}

    async def _tools_call(self, req: Request) -> dict[str, Any]:
        name, args = req.params.get("name"), req.params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise InvalidParams("tools/call needs params.name (a string) and optional params.arguments (an object)")
        tool = self.catalog.tools.get(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {name!r}", data={"name": name})
        try:
            out = await tool.run(args, req)
        except ToolError as exc:
            return {"content": text(str(exc)), "isError": True}
        return out if isinstance(out, dict) else {"content": out}

    async def _resources_list(self, req: Request) -> dict[str, Any]:
        _no_cursor(req)
        return {"resources": [r.describe() for r in self.catalog.resources.values()]}

    async def _templates_list(self, req: Request) -> dict[str, Any]:
        _no_cursor(req)
        return {"resourceTemplates": []}

    async def _resources_read(self, req: Request) -> dict[str, Any]:
        uri = req.params.get("uri")
        resource = self.catalog.resources.get(uri) if isinstance(uri, str) else None
        if resource is None:
            error = ResourceNotFound if req.era is Era.HANDSHAKE else InvalidParams
            raise error(f"Resource not found: {uri!r}", data={"uri": uri})
        return {"contents": resource.contents()}

    async def _prompts_list(self, req: Request) -> dict[str, Any]:
        _no_cursor(req)
        return {"prompts": [p.describe() for p in self.catalog.prompts.values()]}

    async def _prompts_get(self, req: Request) -> dict[str, Any]:
        name, args = req.params.get("name"), req.params.get("arguments") or {}
        prompt = self.catalog.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {name!r}", data={"name": name})
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise InvalidParams("prompts/get arguments must map names to strings")
        missing = [a["name"] for a in prompt.arguments if a.get("required") and a["name"] not in args]
        if missing:
            raise InvalidParams(f"prompt {name!r} is missing required argument(s): {', '.join(missing)}")
        return {"description": prompt.description, "messages": prompt.render(args)}


# method → handler, per era. Handshake-only: initialize, logging/setLevel (both
# inline in admit) and ping. Modern-only: server/discover.
_COMMON = {
    "tools/list": "_tools_list",
    "tools/call": "_tools_call",
    "resources/list": "_resources_list",
    "resources/templates/list": "_templates_list",
    "resources/read": "_resources_read",
    "prompts/list": "_prompts_list",
    "prompts/get": "_prompts_get",
}
METHODS: dict[Era, dict[str, str]] = {
    Era.HANDSHAKE: {"ping": "_ping", **_COMMON},
    Era.MODERN: {"server/discover": "_discover", **_COMMON},
}


def _no_cursor(req: Request) -> None:
    # Every list fits on one page, so no cursor we could have issued exists.
    if req.params.get("cursor") is not None:
        raise InvalidParams("invalid cursor: this server never paginates")
