"""The tool surface as one identity would get it, in one tool mode: ``GET`` or ``POST
/status/surface`` on the admin listener (observability/admin.py) and the admin page's
"Tool surface" view.

In: ``identity`` (``anonymous``, ``key:<API key name>``, ``session:<subject>`` of a
connected client, or ``custom`` with ``subject``, ``claims`` and ``scopes``) and
``mode`` (``configured``: the main endpoint's plan; ``standard``, ``search``,
``code``: every backend in that mode; or the path of an endpoint of
``tools.endpoints``). Out: the ``tools/list`` that identity would be answered, the
catalogue tools the policy hides from it, and the backends the catalogue lacks.

It is the gateway's own ``tools/list`` code, not a second policy: the gateway's
:class:`~hopline.layers.capability.lists.Catalogue` asked for that principal's view,
as a stateless request would ask it, of the catalogue the gateway last composed (``Catalogue.latest``;
else the one its open shared backend sessions' cached lists compose), so CEL rules,
pinning, withdrawn backends (breakers), the visibility cache and the tool modes apply
exactly as for a client. It opens no backend session and sends nothing to a backend; a
backend never listed yet (not started: ``--lazy``) is named in ``not_listed``.

The preview's principal carries the issuer ``admin-preview`` (rules see only the
claims, so the decisions are the same), so where ``policy.audit.lists`` records
visibility decisions, a preview's records say they were a preview. An identity the
gateway would refuse before any list (anonymous where ``auth`` is configured, an API
key without a required scope) gets no tools and the refusal as ``refused``.

Bounded: the input (its size by the admin listener; subject and claims limits here), the tools
listed (:data:`MAX_TOOLS`, descriptions cut to :data:`MAX_DESCRIPTION`), the
identities offered. Tool descriptions are scrubbed of the configuration's secrets.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from hopline.binding import TOOLS_LIST, Era
from hopline.compose import toolmodes
from hopline.context import ANONYMOUS, Context, Principal
from hopline.jsonrpc import HoplineError, InvalidParams, Message
from hopline.layers.capability.lists import Catalogue, Fanned, View, tools_in_modes
from hopline.layers.capability.toolmodes.code import RUN_CODE
from hopline.layers.capability.toolmodes.host import SessionToolHost
from hopline.layers.capability.toolmodes.search import GET_TOOL, INVOKE_TOOL
from hopline.layers.policy.auth import key_principal
from hopline.observability.admin import RequestError
from hopline.observability.redact import redact, scrub
from hopline.pipeline import STANDARD, ToolPlan

log = logging.getLogger("hopline.admin")

MAX_SUBJECT = 256
MAX_CLAIMS = 4096  # bytes of the claims as JSON
MAX_DEPTH = 8  # nesting of the claims
MAX_SCOPES = 64
MAX_TOOLS = 300
MAX_DESCRIPTION = 300
MAX_ARGUMENTS = 16
MAX_NAME = 256
MAX_IDENTITIES = 200
PREVIEW_ISSUER = "admin-preview"
FIELDS = frozenset({"identity", "subject", "claims", "scopes", "mode"})
UNIFORM = ("standard", "search", "code")
MODE_TOOLS = {GET_TOOL: "search", INVOKE_TOOL: "search", RUN_CODE: "code"}


class _Preview:
    """One principal's view of what the gateway holds: the gateway's :class:`Catalogue`
    asked directly, as a stateless request would ask it, without a session. It is the
    :class:`~hopline.layers.capability.toolmodes.host.ToolSession` the tool modes' hosts
    run on for the preview; it calls no tool."""

    def __init__(self, catalogue: Catalogue, gateway: Any, principal: Principal, plan: ToolPlan) -> None:
        self.catalogue, self.gateway = catalogue, gateway
        self.principal = principal
        self.plan = plan
        self.not_listed: list[str] = []

    def fan_out(self, method: str) -> Fanned:
        """The catalogue the gateway last composed, else the one its open shared sessions' cached lists compose."""
        g, catalogue = self.gateway, self.catalogue
        latest = catalogue.latest.get(method)
        if latest is None:  # no client listed yet: compose what the open shared sessions hold
            held = {s.id: s for s in list(g.sharing.shared.values()) if not s.is_closed()}
            lists = {b: items for b, s in held.items() if (items := s.cached_list(method)) is not None}
            if not lists:  # nothing to compose (and no empty catalogue left behind as the latest)
                self.not_listed = sorted(g.registry.connectors)
                return [], [], [], (method, ())
            items, refs, _missing, key = catalogue.compose(method, lists, held, [])
            listed = set(lists)
        else:
            (version_key, catalog) = latest
            items, refs = catalog.items, [(e.backend, e.original) for e in catalog.entries]
            key, listed = (version_key, catalog.version), {b for b, _ in version_key[1]}
        self.not_listed = sorted(set(g.registry.connectors) - listed)
        # Not "missing": a fail-closed gateway would start (or wait for) them, the preview does not.
        return items, refs, [], key

    async def visible_entries(self, method: str) -> View:
        return self.catalogue.view(method, self.principal, self.fan_out(method))

    async def visible_list(self, method: str) -> tuple[list[dict[str, Any]], list[str]]:
        items, _backends, missing = await self.visible_entries(method)
        return items, missing

    async def invoke_named(self, message: Message, ctx: Context) -> Message:
        raise InvalidParams("a surface preview calls no tool", request_id=message.id)

    def context(self, message: Message) -> Context:
        return Context(self.principal, None, Era.MODERN, None, [], None, message.id, None)

    def tool_host(self, mode: str) -> SessionToolHost:
        return SessionToolHost(self, {}, plan=self.plan, mode=mode)


class Surfaces:
    """The previews of one gateway; the Search/Code modes a preview needs and the
    configuration does not use are built once per pipeline (they spawn nothing)."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self._built: tuple[Any, dict[str, Any]] | None = None

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        params = _checked(params)
        g = self.gateway
        principal, identity, refused = self._principal(params)
        mode = params.get("mode") or "configured"
        plan = self._plan(mode)
        out: dict[str, Any] = {
            "identity": identity,
            "mode": {"name": mode, "default": plan.default, "groups": dict(plan.groups)},
            "tools": [],
            "total": 0,
            "hidden": [],
            "hidden_total": 0,
            "not_listed": [],
            "refused": refused,
            "list_error": None,
            "catalogue": "latest" if TOOLS_LIST in g.catalogue.latest else "held sessions",
            "choices": self.choices(),
        }
        if refused is not None:
            return out
        session = _Preview(g.catalogue, g, principal, plan)
        secrets = redact(g.config.model_dump(mode="json"))[1]
        try:
            entries, backends, _missing = await session.visible_entries(TOOLS_LIST)
            if plan.modes:  # as GatewaySession._list answers tools/list
                tools, _missing = await tools_in_modes(
                    plan, lambda: session.visible_entries(TOOLS_LIST), session.tool_host
                )
            else:
                tools = entries
            catalog_items, refs, _, _ = session.fan_out(TOOLS_LIST)
        except HoplineError as exc:  # what the gateway would answer instead of a list
            out["list_error"] = {"code": exc.code, "message": scrub(exc.message[:MAX_DESCRIPTION], secrets)}
            return out
        origin = {id(item): backend for item, backend in zip(entries, backends)}
        out["tools"] = [_row(t, origin.get(id(t)), plan, secrets) for t in tools[:MAX_TOOLS]]
        for row in out["tools"]:
            if "mode" in row and row["mode"] in plan.modes:  # the tools a mode's own tool reaches for this identity
                reach = await session.tool_host(mode=row["mode"]).visible_tools()
                row["reaches"] = [str(t.get("name", ""))[:MAX_NAME] for t in reach[:MAX_TOOLS]]
        out["total"] = len(tools)
        pipeline = g.pipeline
        hidden = [
            {"name": str(item.get("name", ""))[:MAX_NAME], "backend": backend, "original": name[:MAX_NAME]}
            for item, (backend, name) in zip(catalog_items, refs)
            if id(item) not in origin and pipeline.available(backend)
        ]
        out["hidden"], out["hidden_total"] = hidden[:MAX_TOOLS], len(hidden)
        withdrawn = sorted({b for b, _ in refs if not pipeline.available(b)})
        out["not_listed"] = sorted({*session.not_listed, *withdrawn})
        return out

    def choices(self) -> dict[str, Any]:
        """The identities and modes a preview may name."""
        config = self.gateway.config
        ids: list[dict[str, str]] = [{"id": "anonymous", "source": "anonymous"}]
        for k in (config.auth.api_keys if config.auth is not None else [])[:MAX_IDENTITIES]:
            ids.append({"id": f"key:{k.name}", "source": "api_key"})
        seen: set[Any] = set()
        for session in list(self.gateway.sessions):
            p = session.principal
            if p.key not in seen and p is not ANONYMOUS and len(seen) < MAX_IDENTITIES:
                seen.add(p.key)
                ids.append({"id": f"session:{p.subject}", "source": "connected"})
        ids.append({"id": "custom", "source": "custom"})
        return {"identities": ids, "modes": ["configured", *UNIFORM, *sorted(self.gateway.pipeline.endpoints)]}

    # -- the principal --------------------------------------------------------------------
    def _principal(self, params: dict[str, Any]) -> tuple[Principal, dict[str, Any], dict[str, Any] | None]:
        """The preview's principal, how it is shown, and the refusal the gateway would answer it with."""
        config = self.gateway.config
        auth = config.auth
        required = frozenset(auth.required_scopes) if auth is not None else frozenset()
        name = params.get("identity")
        if name is None:
            name = "custom" if "subject" in params or "claims" in params else "anonymous"
        if not isinstance(name, str) or len(name) > MAX_SUBJECT + 8:
            raise RequestError(400, "identity must be a string of at most %d characters" % (MAX_SUBJECT + 8))
        if name == "anonymous":
            shown = {"id": name, "source": "anonymous", "subject": ANONYMOUS.subject}
            if auth is not None:
                return ANONYMOUS, shown, {"status": 401, "message": "authentication required (auth is configured)"}
            return _marked(ANONYMOUS), shown, None
        if name.startswith("key:"):
            keys = {k.name: k for k in (auth.api_keys if auth is not None else [])}
            key = keys.get(name[4:])
            if key is None:
                raise RequestError(400, f"no API key named {name[4:]!r} in auth.api_keys")
            p = key_principal(key.name, key.scopes)
            shown = {
                "id": name,
                "source": "api_key",
                "subject": p.subject,
                "claims": p.claims,
                "scopes": sorted(p.scopes),
            }
            return _marked(p), shown, _scope_refusal(p, required)
        if name.startswith("session:"):
            subject = name[8:]
            found = next((s.principal for s in list(self.gateway.sessions) if s.principal.subject == subject), None)
            if found is None:
                raise RequestError(400, f"no connected client has the subject {subject!r}")
            shown = {"id": name, "source": "connected", "subject": subject, "claim_names": sorted(found.claims)[:64]}
            return _marked(found), shown, None
        if name != "custom":
            raise RequestError(400, "identity must be anonymous, key:<name>, session:<subject> or custom")
        subject = params.get("subject") or "custom"
        claims = params.get("claims") or {}
        scopes = params.get("scopes") or []
        if isinstance(scopes, str):
            scopes = scopes.split()
        if not isinstance(subject, str) or len(subject) > MAX_SUBJECT:
            raise RequestError(400, f"subject must be a string of at most {MAX_SUBJECT} characters")
        if not isinstance(claims, dict):
            raise RequestError(400, "claims must be a JSON object")
        if len(orjson.dumps(claims)) > MAX_CLAIMS or _depth(claims) > MAX_DEPTH:
            raise RequestError(
                400, f"claims must be at most {MAX_CLAIMS} bytes of JSON, nested at most {MAX_DEPTH} deep"
            )
        if not isinstance(scopes, list) or len(scopes) > MAX_SCOPES or not all(isinstance(s, str) for s in scopes):
            raise RequestError(
                400, f"scopes must be a list of at most {MAX_SCOPES} strings (or one space-separated string)"
            )
        claims = {"sub": subject, **claims}  # as a token's claims name its subject
        p = Principal(subject, claims, frozenset(scopes))
        shown = {"id": "custom", "source": "custom", "subject": subject, "claims": claims, "scopes": sorted(p.scopes)}
        return _marked(p), shown, _scope_refusal(p, required) if auth is not None else None

    # -- the plan ---------------------------------------------------------------------------
    def _plan(self, mode: Any) -> ToolPlan:
        pipeline = self.gateway.pipeline
        if mode == "configured":
            return pipeline.tools
        if isinstance(mode, str) and mode in pipeline.endpoints:
            return pipeline.endpoints[mode]
        if mode == STANDARD:
            return ToolPlan()
        if mode not in UNIFORM:
            raise RequestError(400, f"unknown mode {str(mode)[:64]!r}; one of: {', '.join(self.choices()['modes'])}")
        return ToolPlan(default=mode, modes={mode: self._mode(mode)})

    def _mode(self, name: str) -> Any:
        """The gateway's own Search/Code mode object if a plan uses it, else one built from its settings."""
        pipeline = self.gateway.pipeline
        for plan in (pipeline.tools, *pipeline.endpoints.values()):
            if name in plan.modes:
                return plan.modes[name]
        if self._built is None or self._built[0] is not pipeline:
            self._built = (pipeline, {})
        built = self._built[1]
        if name not in built:
            t = self.gateway.config.tools
            # the ranker only orders get_tool's answers, never what tools/list shows: no model loaded for a preview
            tools = t.model_copy(
                update={
                    "mode": name,
                    "groups": {},
                    "endpoints": {},
                    "search": t.search.model_copy(update={"ranker": "bm25"}),
                }
            )
            try:
                built[name] = toolmodes.plans(tools, delimiter=self.gateway.config.routing.delimiter)[0].modes[name]
            except (ImportError, ValueError) as exc:
                raise RequestError(400, f"mode {name} is not available here: {str(exc)[:200]}") from None
        return built[name]


def _checked(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise RequestError(400, "the request must be a JSON object")
    unknown = sorted(str(k)[:32] for k in params if k not in FIELDS)
    if unknown:
        raise RequestError(400, f"unknown field(s) {', '.join(unknown[:8])}; known: {', '.join(sorted(FIELDS))}")
    claims = params.get("claims")
    if isinstance(claims, str):  # from a query string: JSON text
        try:
            params = {**params, "claims": orjson.loads(claims) if claims.strip() else {}}
        except orjson.JSONDecodeError as exc:
            raise RequestError(400, f"claims is not valid JSON: {str(exc)[:120]}") from None
    return params


def _marked(p: Principal) -> Principal:
    """The principal as a preview: the same claims and scopes (what rules read), no token."""
    return Principal(p.subject, p.claims, p.scopes, PREVIEW_ISSUER)


def _scope_refusal(p: Principal, required: frozenset[str]) -> dict[str, Any] | None:
    if required <= p.scopes:
        return None
    return {"status": 403, "message": f"lacks a required scope ({', '.join(sorted(required - p.scopes))})"}


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _row(tool: dict[str, Any], backend: str | None, plan: ToolPlan, secrets: Any) -> dict[str, Any]:
    """One listed tool as the preview shows it: name, where it comes from, its description (cut)."""
    name = str(tool.get("name", ""))
    description = str(tool.get("description") or "")
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    row: dict[str, Any] = {"name": name[:MAX_NAME]}
    if backend is not None:
        row["backend"] = backend
    else:
        row["mode"] = MODE_TOOLS.get(name, plan.default)
    row["description"] = scrub(description[:MAX_DESCRIPTION], secrets) + (
        "…" if len(description) > MAX_DESCRIPTION else ""
    )
    row["arguments"] = [str(k)[:64] for k in props][:MAX_ARGUMENTS] if isinstance(props, dict) else []
    return row
