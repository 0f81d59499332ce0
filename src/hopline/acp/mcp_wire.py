"""MCP-over-ACP wire shapes, dialect by dialect, as data (reference §3).

A component (the client or a proxy) declares an MCP server with the ACP
transport in the ``mcpServers`` of a session setup request; whoever consumes it
(the agent, or a bridge acting for it) then talks MCP to the declarer over ACP.
Five spellings exist (reference §3.3):

====  =========================================  ==========================================  ===================
 dia  declaration                                connect → answer                            disconnect
====  =========================================  ==========================================  ===================
 d1   ``{"type":"http","url":"acp:<id>"}``       ``_mcp/connect {connectionId, url}``        ``_mcp/disconnect``
                                                 (the connecting side names the connection)  notification
 d2   ``{"type":"acp","name","id"}``             ``mcp/connect {acpId}`` → ``{connectionId}``  ``mcp/disconnect`` \
request
 d3   ``{"type":"http","url":"acp:<id>"}``       ``_mcp/connect {acp_url}`` → ``{connection_id}`` \
``_mcp/disconnect {connection_id}``
 d4   ``{"type":"acp","name","serverId"}``       ``mcp/connect {serverId}`` → ``{connectionId}`` ``mcp/disconnect`` \
request
 d5   ``{"type":"acp","name","serverId"}``       none: ``mcp/message {serverId, requestId, method, params}``
                                                 → ``{result}`` or ``{error}`` (connectionless)
====  =========================================  ==========================================  ===================

In d1..d4 ``mcp/message`` (``_mcp/message`` in d1/d3) carries ``{connectionId,
method, params}``; its outer result *is* the inner MCP result and an inner MCP
error is the outer error. In d5 the outer result carries exactly one inner
outcome and outer errors are binding failures.

A server's **key** is its id without an ``acp:`` prefix, so one server is
recognised whichever shape it is declared in. :data:`SESSION_META_KEY` is the
inner ``params._meta`` key under which hopline tells an MCP server which ACP
session a request comes from (reference §5 item 1: asked for, in no dialect).

Contract: pure functions over plain dicts; nothing here keeps state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SESSION_META_KEY = "io.hopline/acp-session-id"

SESSION_SETUP = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
MCP_METHODS = frozenset(
    {"mcp/connect", "mcp/message", "mcp/disconnect", "_mcp/connect", "_mcp/message", "_mcp/disconnect"}
)
CONNECT, MESSAGE, DISCONNECT = "connect", "message", "disconnect"


@dataclass(frozen=True, slots=True)
class McpDialect:
    name: str
    shape: str  # how a server is declared: "serverId" | "id" | "url"
    connect: str | None  # None: connectionless (d5)
    message: str
    disconnect: str | None
    disconnect_is_request: bool
    server_param: str  # connect's params key naming the server
    connection_key: str  # connect's answer key, and disconnect's param key
    connector_names: bool  # d1: the connecting side picks the connection id

    @property
    def connectionless(self) -> bool:
        return self.connect is None


MCP: dict[str, McpDialect] = {
    "d1": McpDialect(
        "d1", "url", "_mcp/connect", "_mcp/message", "_mcp/disconnect", False, "url", "connectionId", True
    ),
    "d2": McpDialect("d2", "id", "mcp/connect", "mcp/message", "mcp/disconnect", True, "acpId", "connectionId", False),
    "d3": McpDialect(
        "d3", "url", "_mcp/connect", "_mcp/message", "_mcp/disconnect", False, "acp_url", "connection_id", False
    ),
    "d4": McpDialect(
        "d4", "serverId", "mcp/connect", "mcp/message", "mcp/disconnect", True, "serverId", "connectionId", False
    ),
    "d5": McpDialect("d5", "serverId", None, "mcp/message", None, False, "serverId", "", False),
}
SHAPE_KEY = {"serverId": "serverId", "id": "id"}


def key_of(server_id: str) -> str:
    return server_id[4:] if server_id.startswith("acp:") else server_id


# -- declarations ---------------------------------------------------------------------
def declared(entry: Any) -> tuple[str, str, str] | None:
    """``(key, id as written, shape)`` if ``entry`` declares an ACP-transport server."""
    if not isinstance(entry, dict):
        return None
    if entry.get("type") == "acp":
        for shape, field in SHAPE_KEY.items():
            value = entry.get(field)
            if isinstance(value, str) and value:
                return key_of(value), value, shape
        return None
    url = entry.get("url")
    if isinstance(url, str) and url.startswith("acp:") and "command" not in entry:
        return key_of(url), url, "url"
    return None


def shown_id(raw: str, declared_shape: str, shape: str) -> str:
    """The id a component declaring in ``declared_shape`` as ``raw`` is shown by in ``shape``."""
    if shape == declared_shape:
        return raw
    return "acp:" + key_of(raw) if shape == "url" else key_of(raw)


def declaration(entry: dict[str, Any], shape: str, server_id: str) -> dict[str, Any]:
    """``entry`` rewritten in ``shape`` (name and ``_meta`` kept)."""
    out: dict[str, Any] = {"name": entry.get("name", "")}
    if shape == "url":
        out.update(type="http", url=server_id, headers=[])
    else:
        out.update(type="acp", **{SHAPE_KEY[shape]: server_id})
    if isinstance(entry.get("_meta"), dict):
        out["_meta"] = entry["_meta"]
    return out


def consumer_shape(result: Any) -> str | None:
    """How an agent wants ACP servers declared, from its ``initialize`` answer (None: it cannot consume them)."""
    if not isinstance(result, dict):
        return None
    caps = result.get("agentCapabilities")
    mcp = caps.get("mcpCapabilities") if isinstance(caps, dict) else None
    if isinstance(mcp, dict) and mcp.get("acp") is True:
        return "serverId"
    for holder in (
        result.get("capabilities"),
        result.get("_meta"),
        caps,
        caps.get("_meta") if isinstance(caps, dict) else None,
    ):
        if isinstance(holder, dict) and holder.get("mcp_acp_transport") is True:
            return "url"
    return None


# -- messages -----------------------------------------------------------------------
@dataclass(slots=True)
class Op:
    """One MCP-over-ACP message, whatever its spelling."""

    kind: str  # CONNECT | MESSAGE | DISCONNECT
    dialect: str  # the sender's spelling ("d4" stands for d2/d4 alike on messages)
    key: str | None = None  # the server (connect, d5 messages)
    raw: str | None = None  # the server id as the sender wrote it
    connection: Any = None
    method: str | None = None  # the inner MCP method
    params: Any = None  # the inner MCP params
    request_id: Any = None  # d5's requestId, or d1's inner id


def parse(method: str, params: Any) -> Op | None:
    """Read an MCP-over-ACP message; None if ``method`` is not one. ValueError if malformed."""
    if method not in MCP_METHODS:
        return None
    p = params if isinstance(params, dict) else {}
    underscore = method.startswith("_")
    if method.endswith("/connect"):
        for dialect in ("d3", "d1") if underscore else ("d2", "d4"):
            raw = p.get(MCP[dialect].server_param)
            if isinstance(raw, str) and raw:
                return Op(
                    CONNECT, dialect, key_of(raw), raw, connection=p.get("connectionId") if dialect == "d1" else None
                )
        raise ValueError(f"{method} names no server")
    if method.endswith("/disconnect"):
        connection = p.get("connectionId", p.get("connection_id"))
        if connection is None:
            raise ValueError(f"{method} names no connection")
        dialect = ("d3" if "connection_id" in p else "d1") if underscore else "d4"
        return Op(DISCONNECT, dialect, connection=connection)
    inner = p.get("method")
    if not isinstance(inner, str):
        raise ValueError(f"{method} carries no inner MCP method")
    if "connectionId" in p:
        return Op(
            MESSAGE,
            "d1" if underscore else "d4",
            connection=p["connectionId"],
            method=inner,
            params=p.get("params"),
            request_id=p.get("id"),
        )
    raw = p.get("serverId")
    if underscore or not isinstance(raw, str) or "requestId" not in p:
        raise ValueError(f"{method} names neither a connection nor a server and request")
    return Op(MESSAGE, "d5", key_of(raw), raw, method=inner, params=p.get("params"), request_id=p["requestId"])


def connect(d: McpDialect, raw: str, connection: Any, meta: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {d.server_param: raw}
    if d.connector_names:
        params["connectionId"] = connection
    if meta:
        params["_meta"] = meta
    return d.connect, params  # type: ignore[return-value]


def connection_of(d: McpDialect, result: Any) -> Any:
    """The connection id in a connect answer (None if it has none)."""
    return result.get(d.connection_key, result.get("connectionId")) if isinstance(result, dict) else None


def connected(d: McpDialect, connection: Any, upstream: Any) -> dict[str, Any]:
    """The connect answer for a consumer speaking ``d`` (extra fields of the provider's answer kept)."""
    out = (
        {k: v for k, v in upstream.items() if k not in ("connectionId", "connection_id")}
        if isinstance(upstream, dict)
        else {}
    )
    out[d.connection_key or "connectionId"] = connection
    return out


def message(d: McpDialect, target: Any, method: str, params: Any, request_id: Any = None) -> tuple[str, dict[str, Any]]:
    """An ``mcp/message``: ``target`` is a connection id, or in d5 the server id."""
    out: dict[str, Any] = (
        {"serverId": target, "requestId": request_id} if d.connectionless else {"connectionId": target}
    )
    out["method"] = method
    if params is not None:
        out["params"] = params
    if d.name == "d1" and request_id is not None:
        out["id"] = request_id
    return d.message, out


def disconnect(d: McpDialect, connection: Any) -> tuple[str, dict[str, Any], bool]:
    return d.disconnect, {d.connection_key: connection}, d.disconnect_is_request  # type: ignore[return-value]


def outcome(answer: dict[str, Any]) -> dict[str, Any]:
    """A connection-style answer (result, or error = inner error) as a d5 ``{result}``/``{error}`` carrier."""
    if "result" in answer:
        return {"result": answer["result"]}
    return {"error": answer.get("error")}


def from_outcome(result: Any) -> tuple[str, Any]:
    """A d5 carrier as ``("result", value)`` or ``("error", object)``; ``result`` wins if both are there."""
    if isinstance(result, dict) and "result" in result:
        return "result", result["result"]
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        return "error", result["error"]
    return "error", {"code": -32603, "message": "the MCP-over-ACP provider answered without an outcome"}


def with_session(params: Any, session_id: str | None) -> Any:
    """Inner MCP params with the ACP session id under :data:`SESSION_META_KEY` (kept if already set)."""
    if session_id is None:
        return params
    params = dict(params) if isinstance(params, dict) else {}
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.setdefault(SESSION_META_KEY, session_id)
    params["_meta"] = meta
    return params
