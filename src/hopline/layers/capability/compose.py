"""Capability composition (Layer 7, draft §7.2, §7.3): what the gateway advertises.

Truthful by construction: a capability appears only if at least one healthy
backend has it *and* the gateway will deliver it — ``listChanged`` is advertised
because the gateway re-publishes every backend's change signal (and its own on
reload); ``subscribe`` only if some backend supports subscriptions (the gateway
routes them to their owner). Instructions are merged under one heading per
backend. In Reverse mode the single backend's own identity and capabilities
are presented unchanged (the client cannot tell the gateway from the backend).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from hopline import __version__
from hopline.binding import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE, LATEST_MODERN, META_SERVER_INFO
from hopline.layers.discovery.backend import BackendInfo

LIST_CAPABILITIES = ("tools", "prompts", "resources")


def capabilities(infos: Mapping[str, BackendInfo]) -> dict[str, Any]:
    caps: dict[str, Any] = {}
    for kind in LIST_CAPABILITIES:
        present = [info.capabilities[kind] for info in infos.values() if kind in info.capabilities]
        if present:
            entry: dict[str, Any] = {"listChanged": True}
            if kind == "resources":
                entry["subscribe"] = any(isinstance(p, dict) and p.get("subscribe") for p in present)
            caps[kind] = entry
    for kind in ("logging", "completions"):
        if any(kind in info.capabilities for info in infos.values()):
            caps[kind] = {}
    return caps


def instructions(infos: Mapping[str, BackendInfo], own: str | None = None) -> str | None:
    parts = [own] if own else []
    parts += [f"## {backend}\n{info.instructions}" for backend, info in sorted(infos.items()) if info.instructions]
    return "\n\n".join(parts) or None


def negotiate(requested: Any) -> str:
    """Echo a supported handshake version, else counter-offer the latest (§3)."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE


def server_info(name: str) -> dict[str, Any]:
    return {"name": name, "version": __version__}


def initialize_result(
    infos: Mapping[str, BackendInfo],
    *,
    requested: Any,
    name: str,
    own_instructions: str | None,
    reverse: bool,
    starting: bool = False,
) -> dict[str, Any]:
    """``starting``: a backend is still starting and will join later; the lists are advertised
    (with ``listChanged``, which announces it) so that the client lists them when it does."""
    if reverse and len(infos) == 1:
        (info,) = infos.values()
        result = {
            "protocolVersion": negotiate(requested),
            "capabilities": _reverse_caps(info),
            "serverInfo": info.server_info or server_info(name),
        }
        if info.instructions:
            result["instructions"] = info.instructions
        return result
    caps = capabilities(infos)
    if starting:
        for kind in LIST_CAPABILITIES:
            caps.setdefault(
                kind, {"listChanged": True, "subscribe": False} if kind == "resources" else {"listChanged": True}
            )
    result = {
        "protocolVersion": negotiate(requested),
        "capabilities": caps,
        "serverInfo": server_info(name),
    }
    text = instructions(infos, own_instructions)
    if text:
        result["instructions"] = text
    return result


def discover_result(
    infos: Mapping[str, BackendInfo], *, name: str, own_instructions: str | None, reverse: bool
) -> dict[str, Any]:
    if reverse and len(infos) == 1:
        (info,) = infos.values()
        caps, text, identity = (
            _reverse_caps(info, modern=True),
            info.instructions,
            info.server_info or server_info(name),
        )
    else:
        caps, text, identity = capabilities(infos), instructions(infos, own_instructions), server_info(name)
    result: dict[str, Any] = {
        "resultType": "complete",
        "supportedVersions": [LATEST_MODERN],
        "capabilities": caps,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {META_SERVER_INFO: identity},
    }
    if text:
        result["instructions"] = text
    return result


def _reverse_caps(info: BackendInfo, *, modern: bool = False) -> dict[str, Any]:
    caps = dict(info.capabilities)
    if modern:
        caps.pop("tasks", None)  # not a 2026-07-28 ServerCapabilities field (Tasks is an extension there)
    return caps


def healthy(infos: Iterable[tuple[str, BackendInfo | None]]) -> dict[str, BackendInfo]:
    return {backend: info for backend, info in infos if info is not None}


def stamp(value: dict[str, Any], *, name: str, reverse: bool, backend_id: str | None, is_list: bool) -> dict[str, Any]:
    """A 2026-07-28 result as the gateway returns it: ``resultType``, the responder's
    identity in ``_meta`` (§7.3; the backend's own kept under ``io.hopline/backend``,
    so clients can tell them apart), and cache fields on lists and ``resources/read``
    results (``contents``), which the 2026-07-28 schema requires (a backend's own kept)."""
    value = dict(value)
    value.setdefault("resultType", "complete")
    meta = dict(value.get("_meta") or {})
    if backend_id is not None and META_SERVER_INFO in meta:
        meta["io.hopline/backend"] = {"id": backend_id, "serverInfo": meta[META_SERVER_INFO]}
    if not reverse:
        meta[META_SERVER_INFO] = server_info(name)
    value["_meta"] = meta
    if is_list or "contents" in value:
        value.setdefault("ttlMs", 0)
        value.setdefault("cacheScope", "private")
    if is_list:
        tools = value.get("tools")
        if isinstance(tools, list) and any(isinstance(t, dict) and "execution" in t for t in tools):
            # ``execution`` (taskSupport) is handshake-era vocabulary: the 2026-07-28 Tool has
            # no such field, and neither has the Tasks extension's.
            value["tools"] = [
                {k: v for k, v in t.items() if k != "execution"} if isinstance(t, dict) else t for t in tools
            ]
    return value
