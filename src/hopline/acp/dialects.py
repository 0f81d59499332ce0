"""The proxy-chain dialects D1..D5 as data, behind one interface.

Reference: ``shared/reference/acp-proxy-chains.md`` §2.2-2.4. A dialect decides
two things about talking to one proxy component:

- the **handshake**: how the conductor tells the component it is a proxy
  (D5/D2 ``proxy/initialize``; D4/D3 ``_proxy/initialize``; D1 a plain
  ``initialize`` whose ``params._meta.proxy`` is true and whose answer must echo
  ``result._meta.proxy: true``);
- the **successor envelope**: how a message from the component's successor is
  wrapped when delivered to it (D5/D2 ``proxy/successor``; D4/D3
  ``_proxy/successor``; D1 ``_proxy/successor/request`` and
  ``_proxy/successor/notification``).

D2 and D5 share both, as do D3 and D4; the pairs differ only in MCP-over-ACP
shapes, which live elsewhere. What the conductor *receives* is recognised in
every dialect at once (:func:`unwrap`, :func:`handshake_dialect`), so the
dialect only chooses what the conductor *sends*. The envelope's own ``_meta``
(or D3 ``meta``) is hop-local and is never copied into the inner message.

Contract: pure functions over :class:`~hopline.jsonrpc.Message`; nothing here
keeps state or performs I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hopline.jsonrpc import JSONRPC, Id, Message


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str  # "d1" .. "d5"
    handshake: str  # method of the proxy handshake request
    successor_request: str  # envelope method, with an outer id
    successor_notification: str  # envelope method, without one
    where: str  # who speaks it (for messages and docs)

    @property
    def marks_initialize(self) -> bool:
        """D1: the handshake is ``initialize`` carrying ``_meta.proxy``."""
        return self.handshake == "initialize"

    def handshake_request(self, msg_id: Id, params: dict[str, Any] | None) -> Message:
        """The request that offers the proxy role to a component."""
        params = dict(params or {})
        if self.marks_initialize:
            params["_meta"] = {**_meta_of(params), "proxy": True}
        return Message({"jsonrpc": JSONRPC, "id": msg_id, "method": self.handshake, "params": params})

    def accepts(self, result: Any) -> bool:
        """Did the component accept the proxy role in its handshake answer?"""
        if not self.marks_initialize:
            return True  # answering the dedicated method at all is the acceptance
        return isinstance(result, dict) and _meta_of(result).get("proxy") is True

    def wrap(self, method: str, params: Any, msg_id: Id | None) -> Message:
        """A successor envelope around one inner message (request iff ``msg_id``)."""
        inner: dict[str, Any] = {"method": method}
        if params is not None:
            inner["params"] = params
        if msg_id is None:
            return Message({"jsonrpc": JSONRPC, "method": self.successor_notification, "params": inner})
        return Message({"jsonrpc": JSONRPC, "id": msg_id, "method": self.successor_request, "params": inner})


DIALECTS: dict[str, Dialect] = {
    "d1": Dialect(
        "d1",
        "initialize",
        "_proxy/successor/request",
        "_proxy/successor/notification",
        "@thinkwell/conductor 0.5.x, RFD first draft",
    ),
    "d2": Dialect("d2", "proxy/initialize", "proxy/successor", "proxy/successor", "RFD text (Draft)"),
    "d3": Dialect("d3", "_proxy/initialize", "_proxy/successor", "_proxy/successor", "sacp v11, conductor <= 0.11"),
    "d4": Dialect(
        "d4", "_proxy/initialize", "_proxy/successor", "_proxy/successor", "agent-client-protocol-conductor 2.0"
    ),
    "d5": Dialect("d5", "proxy/initialize", "proxy/successor", "proxy/successor", "newest ACP schema, TS SDK 2.4"),
}

# Detection: offer the newest handshake first; each refusal moves one step older.
# D1 comes last because its handshake is a real ``initialize``: a terminal agent
# accepts it (without the echo), which is how a misplaced agent is recognised.
PROBE_ORDER: tuple[str, ...] = ("d5", "d4", "d1")

# Every envelope method, whoever sends it → the dialect it belongs to.
ENVELOPES: dict[str, str] = {
    "proxy/successor": "d5",
    "_proxy/successor": "d4",
    "_proxy/successor/request": "d1",
    "_proxy/successor/notification": "d1",
}

# Handshake methods only a conductor may send (D1's is a marked ``initialize``).
PROXY_INIT_METHODS: dict[str, str] = {"proxy/initialize": "d5", "_proxy/initialize": "d4"}

CANCEL_REQUEST = "$/cancel_request"


def get(name: str) -> Dialect:
    try:
        return DIALECTS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown ACP dialect {name!r}; choose from {', '.join(DIALECTS)} or auto") from None


def unwrap(message: Message) -> tuple[str, Any] | None:
    """``(inner_method, inner_params)`` if ``message`` is a successor envelope, else None.

    Raises ValueError when it is an envelope without an inner method.
    """
    if message.body.get("method") not in ENVELOPES:
        return None
    params = message.body.get("params")
    method = params.get("method") if isinstance(params, dict) else None
    if not isinstance(method, str):
        raise ValueError("a successor envelope must carry the inner message's method")
    return method, params.get("params")


def handshake_dialect(message: Message) -> str | None:
    """Which dialect's proxy handshake ``message`` is, or None if it is not one."""
    method = message.body.get("method")
    if method in PROXY_INIT_METHODS:
        return PROXY_INIT_METHODS[method]
    if method == "initialize" and _meta_of(message.params).get("proxy") is True:
        return "d1"
    return None


def strip_proxy_mark(params: Any) -> Any:
    """Remove D1's ``_meta.proxy`` (and ``mcp_acp_transport``) marks: they are hop-local."""
    if not isinstance(params, dict):
        return params
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not ({"proxy", "mcp_acp_transport"} & meta.keys()):
        return params
    meta = {k: v for k, v in meta.items() if k not in ("proxy", "mcp_acp_transport")}
    out = dict(params)
    if meta:
        out["_meta"] = meta
    else:
        del out["_meta"]
    return out


def mark_proxy(result: Any) -> Any:
    """Add D1's ``_meta.proxy: true`` echo to a handshake answer."""
    result = dict(result) if isinstance(result, dict) else {}
    result["_meta"] = {**_meta_of(result), "proxy": True}
    return result


def _meta_of(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("_meta")
    return meta if isinstance(meta, dict) else {}
